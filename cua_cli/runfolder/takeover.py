"""A person taking an episode over (`cua watch --takeover`): two small files in the attempt's folder.

`takeover.json` is the person's wish, written by `cua watch`: {"state", "at"}, where state is
`hold` (pause the agent and give me the desktop), then one of `return` (give it back to the agent),
`finished` or `fail` (end the episode with that verdict, then score it) or `abandon` (end it
unscored). While a person holds the desktop, `cua watch` renews the file every few seconds: a
wish older than STALE_S is from a viewer that went away, and the agent takes the desktop back.

`held` is the episode's answer, written by the runner playing it: it exists while the agent is
paused, so the desktop's keyboard and mouse are handed over only once the agent has let go.
"""

import json
import os
import stat
import time
from pathlib import Path

from .._util.atomic import write_atomic
from .confined import open_writable

WISH = "takeover.json"
HELD = "held"
HOLD, RETURN = "hold", "return"
ENDINGS = ("finished", "fail", "abandon")
STATES = (HOLD, RETURN, *ENDINGS)
STALE_S = 30.0      # a hold not renewed for this long is given back
RENEW_S = 5.0       # how often cua watch renews the holds it made
MAX_BYTES = 4096


def wish(folder: Path, now: float | None = None, dir_fd: int | None = None) -> str | None:
    """The person's wish for the attempt in `folder` (one of STATES), or None: no takeover, a stale
    hold (given back), or a file that is not one (a link, a folder, garbage: no takeover).
    `dir_fd`: the folder, open (the runner's TrajWriter reads through it, whatever became of its path)."""
    try:
        fd = os.open(WISH if dir_fd is not None else Path(folder) / WISH, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            return None
        rec = json.loads(os.read(fd, MAX_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    state = rec.get("state") if type(rec) is dict else None
    if state not in STATES:
        return None
    if state == HOLD and (time.time() if now is None else now) - st.st_mtime > STALE_S:
        return RETURN
    return state


def set_wish(folder: Path, state: str) -> None:
    """Write the person's wish (atomically: the runner never reads half of one)."""
    if state not in STATES:
        raise ValueError(f"a takeover's state is one of {', '.join(STATES)}")
    write_atomic(Path(folder) / WISH, json.dumps({"state": state, "at": round(time.time(), 3)}).encode())


def renew(folder: Path) -> None:
    """Keep a hold fresh (its file's time): the person is still there."""
    try:
        os.utime(Path(folder) / WISH, follow_symlinks=False)
    except OSError:
        pass


def held(folder: Path) -> bool:
    """Whether the agent of the attempt in `folder` has let go of its desktop."""
    return os.path.lexists(Path(folder) / HELD) and not os.path.islink(Path(folder) / HELD)


def set_held(folder: Path, on: bool, dir_fd: int | None = None) -> None:
    """The runner's side: the agent is paused (on) or playing again (off). The empty file is made whole
    by its open, never through a link (UnwritableRun for one). `dir_fd`: the folder, open (the runner's
    TrajWriter answers through it, whatever became of its path)."""
    name = HELD if dir_fd is not None else Path(folder) / HELD
    if on:
        os.close(open_writable(name, os.O_WRONLY | os.O_CREAT, dir_fd=dir_fd, shown=Path(folder) / HELD))
    else:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
