"""The images of a trajectory's prompts: where each file is, its sha256 and its size.

A run folder is data, possibly crafted: a file is read only when its path leads
to a regular file inside its trajectory folder, through no link (confined.py). Each file is read and hashed once,
however many prompts show it (a 5-image history shows each screenshot 5 times);
the cache lives as long as the trajectory, so memory stays flat over a large run.
"""

import hashlib
import io
import posixpath

from PIL import Image, UnidentifiedImageError

from .._util.diag import warn
from .._util.png import png_size
from ..runfolder.confined import Refused, read_in
from ..runfolder.reader import show_path


class TrajImages:
    def __init__(self, traj_rel: str, traj_real: str):
        self.traj_rel, self.traj_real = traj_rel, traj_real
        self._entries: dict[str, dict] = {}

    def entry(self, name: str, where: str) -> dict:
        """The `images` entry of the trajectory's file `name`: `path` relative to the run
        folder; sha256, width and height null (with a warning) when the file is missing
        or unreadable, and `path` null too when it is refused (confined.py)."""
        e = self._entries.get(name)
        if e is None:
            e = self._entries[name] = self._read(name, where)
        return e

    def differs(self, name: str, sha256: str) -> bool:
        """Whether the file `name`, if it has been read, has another sha256 than `sha256`."""
        e = self._entries.get(name)
        return e is not None and e["sha256"] is not None and e["sha256"] != sha256

    def _read(self, name: str, where: str) -> dict:
        e = {"path": posixpath.normpath(posixpath.join(self.traj_rel, name)),
             "sha256": None, "width": None, "height": None}
        try:
            data = read_in(self.traj_real, name)
        except Refused as err:  # its path is not written either: a trainer must not follow it
            warn(f"{where}: image {show_path(name)} {err}; not read")
            e["path"] = None
            return e
        except OSError as err:
            warn(f"{where}: image {show_path(name)} cannot be read: {err.strerror or err}")
            return e
        e["sha256"] = hashlib.sha256(data).hexdigest()
        size = png_size(data)  # no decoding for what envs send
        if size is not None:
            e["width"], e["height"] = size
            return e
        try:
            with Image.open(io.BytesIO(data)) as im:
                e["width"], e["height"] = im.size
        except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError):
            warn(f"{where}: image {name!r} is not an image file; its size is null")
        return e
