"""The one way cua replaces a file: a reader sees the old file or the new one, never part of either."""

import os
import shutil
import uuid
from pathlib import Path


def write_atomic(path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to a new file beside `path`, then rename it over `path`.

    The new file is created afresh without following links, so whatever sits at
    `path` (a link planted there, a hard link to a file elsewhere) is replaced,
    never written through; on any failure the temporary file is removed and
    `path` is as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def place_file(src, dst, opened=None) -> None:
    """`dst` becomes the file at `src`: a hard link where the file system allows it, else a copy
    (of `opened`, the file as already opened and checked, when given). As with write_atomic,
    whatever sat at `dst` is replaced, never written through, and on failure `dst` is as it was."""
    dst = Path(dst)
    tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex}.tmp")
    try:
        try:
            os.link(src, tmp)
        except OSError:
            with open(tmp, "xb") as out:
                if opened is not None:
                    shutil.copyfileobj(opened, out)
                else:
                    with open(src, "rb") as f:
                        shutil.copyfileobj(f, out)
        os.replace(tmp, dst)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
