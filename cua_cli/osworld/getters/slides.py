"""OSWorld's Impress getters (its getters/impress.py): a slide's sound and a slide's background
picture, taken out of a deck on the desktop.

Each pulls the deck (`ppt_file_path`) into the episode folder and looks at the slide's part by its
file name, ppt/slides/slide<slide_index + 1>.xml, as OSWorld does (not by the slide's place in the
deck). What the slide relates to inside the deck is written to the episode folder's
`slide_media/` under its own file name; a linked file (`file://...` target) is pulled from the
desktop as `dest`. Not there (no deck, no such slide, no sound or picture) is None, for the metric
to score. A target that is neither inside the deck nor a file:// link is one OSWorld fails on: None.
"""

import posixpath
import zipfile
from typing import Optional
from xml.etree import ElementTree

from ...errors import BadTask
from ..local_files import safe_name
from ..metrics.ooxml import checked
from .context import EvalContext, need
from .general import get_vm_file

_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_BG_PR = "{http://schemas.openxmlformats.org/presentationml/2006/main}bgPr"
_BLIP = "{http://schemas.openxmlformats.org/drawingml/2006/main}blip"
_EMBED = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"


def _deck(ctx: EvalContext, config: dict, getter: str) -> tuple[Optional[str], int]:
    path = need(config, "ppt_file_path")
    try:
        index = int(config.get("slide_index"))
    except (TypeError, ValueError):
        raise BadTask(f"getter {getter!r}: 'slide_index' must be a number") from None
    need(config, "dest")
    return get_vm_file(ctx, {"type": "vm_file", "path": path, "dest": posixpath.basename(path)}), index


def _relations(z: zipfile.ZipFile, index: int) -> list:
    name = f"ppt/slides/_rels/slide{index + 1}.xml.rels"
    if name not in z.namelist():
        return []
    return ElementTree.fromstring(z.read(name)).findall(_RELS)


def _take(ctx: EvalContext, z: zipfile.ZipFile, config: dict, target: str) -> Optional[str]:
    """The related file: out of the deck (a target relative to the slides' folder, '../...'), or
    pulled from the desktop (a file:// link)."""
    if target is None:
        return None  # OSWorld fails on a relationship without a target
    if target.startswith(".."):
        member = posixpath.normpath(posixpath.join("ppt/slides", target))
        try:
            data = z.read(member)
        except KeyError:  # the deck names a part it does not hold: OSWorld's extraction fails
            return None
        folder = ctx.folder / "slide_media"
        folder.mkdir(exist_ok=True)
        local = folder / safe_name(posixpath.basename(member) or "media")
        local.write_bytes(data)
        return str(local)
    if not target.startswith("file://"):
        return None
    return get_vm_file(ctx, {"type": "vm_file", "path": target[len("file://"):], "dest": config["dest"]})


def _open(path: Optional[str]) -> Optional[zipfile.ZipFile]:
    if path is None:
        return None
    try:
        return zipfile.ZipFile(checked(path))
    except (OSError, ValueError, zipfile.BadZipFile):  # the agent left no readable deck
        return None


def get_audio_in_slide(ctx: EvalContext, config: dict) -> Optional[str]:
    """The first sound the slide relates to (a relationship whose type names audio)."""
    path, index = _deck(ctx, config, "audio_in_slide")
    z = _open(path)
    if z is None:
        return None
    with z:
        try:
            relations = _relations(z, index)
        except ElementTree.ParseError:
            return None
        for rel in relations:
            if rel.get("Type") is None:
                return None  # OSWorld fails on a relationship without a type
            if "audio" in rel.get("Type"):
                return _take(ctx, z, config, rel.get("Target"))
    return None


def get_background_image_in_slide(ctx: EvalContext, config: dict) -> Optional[str]:
    """The picture of the slide's own background: the first blip with an embedded image in its
    background properties, then the image relationship of that id."""
    path, index = _deck(ctx, config, "background_image_in_slide")
    z = _open(path)
    if z is None:
        return None
    with z:
        name = f"ppt/slides/slide{index + 1}.xml"
        if name not in z.namelist():
            return None
        try:
            slide = ElementTree.fromstring(z.read(name))
            image_id = None
            for background in slide.iter(_BG_PR):
                blip = next((b for b in background.iter(_BLIP) if b is not background), None)
                if blip is not None and blip.get(_EMBED) is not None:
                    image_id = blip.get(_EMBED)
                    break
            if image_id is None:
                return None
            relations = _relations(z, index)
        except ElementTree.ParseError:
            return None
        for rel in relations:
            if rel.get("Type") is None or ("image" in rel.get("Type") and rel.get("Id") is None):
                return None  # OSWorld fails on a relationship without a type, or an image one without an id
            if "image" in rel.get("Type") and rel.get("Id") == image_id:
                return _take(ctx, z, config, rel.get("Target"))
    return None


GETTERS = {"audio_in_slide": get_audio_in_slide, "background_image_in_slide": get_background_image_in_slide}
EXTRA = None
