"""The one way cua replaces a file: a reader sees the old file or the new one, never part of either."""

import os
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
