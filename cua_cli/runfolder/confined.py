"""Reading a run folder's files, and never anything outside it.

A run folder is data, possibly crafted: its records name paths (`traj` in
episodes.jsonl, `screenshot` and prompt images in traj.jsonl) that must lead
to a file inside the folder. Every reader of a run folder opens files here:

- `confine` takes a path from a record, relative to a folder known to be
  safe (the run folder, a trajectory folder it returned), and refuses an
  absolute path, a `..`, and a link anywhere on the way.
- `open_regular` opens the file a path names only when it is a regular file
  reached without a link: a FIFO, a device, a socket or a folder is never
  read (opening a FIFO to read would wait for a writer for ever).

What is refused raises `Refused`, whose text says why in a few words, for a
warning that also names the record.
"""

import errno
import os
import stat

_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(Exception):
    """A path cua will not follow, or a file it will not read."""


def run_root(path) -> str:
    """The real path of a run folder given by the user: a link to it is their choice, and is followed."""
    return os.path.realpath(path)


def confine(folder: str, rel) -> str:
    """The path of `rel`, a path a record holds, inside `folder` (a path cua trusts).

    Refused: anything but a non-empty relative path (an absolute one, a NUL, a
    name the file system cannot encode), a `..` part, and a link as any part of
    it, the last one included. A part that does not exist is not refused: the
    file is missing, and opening it says so.
    """
    if type(rel) is not str or not rel or "\0" in rel:
        raise Refused("is not a path name")
    try:
        os.fsencode(rel)
    except UnicodeEncodeError:  # a lone surrogate no file name holds
        raise Refused("is not a path name") from None
    if rel.startswith("/"):
        raise Refused("is an absolute path")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused("climbs out of its folder with '..'")
    if not parts:
        raise Refused("names no file")
    path = folder
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return os.path.join(path, *parts[i + 1:])
        except OSError:  # a file where a folder is due, no permission: opening it says which
            return os.path.join(path, *parts[i + 1:])
        if stat.S_ISLNK(mode):
            raise Refused("goes through a link" if i < len(parts) - 1 else "is a link")
    return path


def confined_dir(folder: str, rel) -> str:
    """`confine` for a folder: also refused when something other than a folder is there."""
    path = confine(folder, rel)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return path  # missing: its files are missing too
    if not stat.S_ISDIR(mode):
        raise Refused(f"is {_kind(mode)}, not a folder")
    return path


def open_regular(path: str):
    """A binary file object of the regular file at `path`, opened without following a link
    at its last part and without waiting on a FIFO. Refused: a link, anything but a
    regular file. FileNotFoundError and other OSErrors pass through."""
    try:
        fd = os.open(path, _NOFOLLOW)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Refused("is a link") from None
        raise
    except (UnicodeEncodeError, ValueError):
        raise Refused("is not a path name") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Refused(f"is {_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_in(folder: str, rel):
    """`open_regular` of the file a record's path `rel` names inside `folder`."""
    return open_regular(confine(folder, rel))


def read_in(folder: str, rel, limit: int | None = None) -> bytes:
    """The bytes of the file `rel` names inside `folder`; at most `limit` + 1 of them when given,
    so a caller can tell a file longer than it wants."""
    with open_in(folder, rel) as f:
        return f.read() if limit is None else f.read(limit + 1)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "not a regular file"
