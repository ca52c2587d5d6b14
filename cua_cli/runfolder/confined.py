"""Reading and writing a run folder's files, and never anything outside it.

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

Every writer of a run folder (its JSONL files, the queue, trajectory folders,
logs) opens files here too, by the same rule seen from the other side:

- `open_writable` opens a file without following a link at its last part
  (O_NOFOLLOW) and only when it is a regular file: a link planted where a run
  file was, even while the run goes on, is never written through.
- `make_dirs` makes (or opens) a folder inside a folder cua trusts one part at
  a time, each part opened without following a link, so a linked
  `trajectories/`, `trajectories/<task>/` or `queue/pending/` is never written
  into. It can hand back the folder's descriptor: files written relative to it
  stay in that folder even if a folder above it is swapped for a link later.
- `check_writable_file` / `check_writable_dir`: the same judgement of what is
  there now, for a resume to refuse a run before it starts anything.

A file replaced whole (queue files, `unsupported.jsonl`, `env-server.json`)
goes through _util/atomic.write_atomic, which makes a new file (O_EXCL,
O_NOFOLLOW) and renames it over the old: a link there is replaced, never
followed.

What a writer refuses raises UnwritableRun (an InputError: exit 2), naming the
path. A folder's parents are checked when it is made or opened, once, never per
write: a write costs only its O_NOFOLLOW flag.
"""

import errno
import os
import stat
from pathlib import Path

from ..errors import UnwritableRun

_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO to write must fail (ENXIO) or return at once, never wait for a reader. It is
# left on: I/O on a regular file ignores it, and clearing it would cost two more system calls a write.
_WRITE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


def open_writable(path, flags: int, mode: int = 0o644, dir_fd: int | None = None, shown=None,
                  regular_only: bool = True) -> int:
    """A descriptor of the regular file at `path` (relative to `dir_fd` when given), opened with `flags`
    (O_WRONLY or O_RDWR, O_APPEND, O_CREAT, O_TRUNC, ...) without following a link at its last part and
    without waiting on a FIFO. UnwritableRun, naming `shown` (else `path`), for a link, a folder, a FIFO
    or anything but a regular file; other OSErrors (a full disk, no permission) pass through.

    `regular_only=False` spares a write-only open the fstat of its kind check, for a file written at
    every step: the open itself still refuses a link (ELOOP), a folder (EISDIR) and a FIFO or socket
    nobody reads (ENXIO); a FIFO someone reads gets bytes they could read in the run folder anyway."""
    return open_writable_stat(path, flags, mode, dir_fd, shown, regular_only)[0]


def open_writable_stat(path, flags: int, mode: int = 0o644, dir_fd: int | None = None, shown=None,
                       regular_only: bool = True) -> tuple[int, os.stat_result | None]:
    """`open_writable`, and the file's stat as it was opened (a writer that needs its size asks no more;
    None without the kind check)."""
    try:
        fd = os.open(path, flags | _WRITE, mode, dir_fd=dir_fd)
    except OSError as e:
        why = {errno.ELOOP: "is a link", errno.EISDIR: "is a folder, not a regular file",
               errno.ENXIO: "is a FIFO or a socket, not a regular file"}.get(e.errno)
        if why:
            raise _unwritable_file(shown or path, why) from None
        raise
    if not regular_only:
        return fd, None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _unwritable_file(shown or path, f"is {_kind(st.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def make_dirs(base, rel: str, keep: bool = False):
    """The folder `rel` ("a/b/c") inside `base` (a folder cua trusts: the run folder), made where missing.
    Each part is made and opened without following a link: UnwritableRun, naming it, for one that is a
    link or no folder. Returns the folder's path, or with `keep` an open descriptor of it (the caller
    closes it) to write relative to."""
    path = Path(base)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the base itself may be a link: trusted
    try:
        for part in (p for p in rel.split("/") if p not in ("", ".")):
            path = path / part
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                sub = os.open(part, _DIR, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise _unwritable_dir(path, _dir_problem(os.lstat(part, dir_fd=fd).st_mode)) from None
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    if keep:
        return fd
    os.close(fd)
    return path


def check_writable_file(path) -> None:
    """UnwritableRun when something is at `path` that a writer would refuse: a link, anything but a
    regular file. Nothing there is fine: a writer makes it."""
    try:
        st_mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st_mode):
        raise _unwritable_file(path, "is a link")
    if not stat.S_ISREG(st_mode):
        raise _unwritable_file(path, f"is {_kind(st_mode)}, not a regular file")


def check_writable_dir(path) -> None:
    """UnwritableRun when something is at `path` that make_dirs would refuse: a link, anything but a folder."""
    try:
        st_mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st_mode):
        raise _unwritable_dir(path, _dir_problem(st_mode))


def _dir_problem(st_mode: int) -> str:
    return "is a link" if stat.S_ISLNK(st_mode) else f"is {_kind(st_mode)}, not a folder"


def _unwritable_file(path, why: str) -> UnwritableRun:
    return UnwritableRun(f"{path}: the file {why}; not written")


def _unwritable_dir(path, why: str) -> UnwritableRun:
    return UnwritableRun(f"{path}: {why}; nothing is written into it")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISLNK, "a link"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"
