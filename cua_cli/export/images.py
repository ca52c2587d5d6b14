"""The images of a trajectory's prompts: where each file is, its sha256 and its size.

A run folder is data, possibly crafted: a file is read only when its real path
(links followed) is inside its run folder. Each file is read and hashed once,
however many prompts show it (a 5-image history shows each screenshot 5 times);
the cache lives as long as the trajectory, so memory stays flat over a large run.
"""

import hashlib
import io
import os
import posixpath

from PIL import Image, UnidentifiedImageError

from ..png import png_size
from ..runfolder.jsonl import warn


class TrajImages:
    def __init__(self, run_real: str, traj_rel: str, traj_real: str):
        self.inside = os.path.join(run_real, "")
        self.traj_rel, self.traj_real = traj_rel, traj_real
        self._entries: dict[str, dict] = {}

    def entry(self, name: str, where: str) -> dict:
        """The `images` entry of the trajectory's file `name`: `path` relative to the run
        folder; sha256, width and height null (with a warning) when the file is missing,
        unreadable or outside the run folder."""
        e = self._entries.get(name)
        if e is None:
            e = self._entries[name] = self._read(name, where)
        return e

    def _read(self, name: str, where: str) -> dict:
        e = {"path": posixpath.normpath(posixpath.join(self.traj_rel, name)),
             "sha256": None, "width": None, "height": None}
        path = os.path.join(self.traj_real, name)
        try:
            # The trajectory folder is a real path already: for a plain file name only a link
            # could lead elsewhere, and one lstat is much cheaper than a realpath.
            plain = "/" not in name and name not in (".", "..") and not os.path.islink(path)
            real = path if plain else os.path.realpath(path)
        except (OSError, ValueError):  # an unencodable name
            real = ""
        if not real.startswith(self.inside):
            warn(f"{where}: image {name!r} is outside the run folder; not read")
            return e
        try:
            with open(real, "rb") as f:
                data = f.read()
        except (OSError, ValueError) as err:  # ValueError: a name the file system cannot encode
            warn(f"{where}: image {name!r} cannot be read: {getattr(err, 'strerror', None) or 'a bad name'}")
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
