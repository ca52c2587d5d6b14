"""The run folder (results/<run>/): its layout is a contract: docs/reference/run-folder.md."""

import json
import os
import platform
import socket
import stat
import sys
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from .._util.atomic import write_atomic
from ..errors import InputError, UnreadableRun
from . import page_cache, takeover
from .confined import check_writable_dir, check_writable_file, make_dirs, open_writable
from .jsonl import line_bytes, open_appending
from .leases import LEASES, record
from .names import encode_task_id
from .queue import DirQueue, check_writable_queue
from .records import ENV_SERVER_LOG, FORMAT_VERSION, LOCAL_SERVER, METRICS, UNSUPPORTED

TRAJECTORIES = "trajectories"
TRAJ = "traj.jsonl"  # an attempt's steps, a line each, in its folder
QUEUE = "queue"
# The files a rollout writes in the run folder itself (the queue's and the trajectories' are below).
RUN_FILES = ("run.json", "scheduled.jsonl", "episodes.jsonl", LEASES, METRICS, UNSUPPORTED, LOCAL_SERVER,
             ENV_SERVER_LOG)


class RunDir:
    def __init__(self, path):
        self.path = Path(path)
        self.run_json = self.path / "run.json"
        self.scheduled = self.path / "scheduled.jsonl"
        self.episodes = self.path / "episodes.jsonl"
        self.unsupported = self.path / UNSUPPORTED

    @classmethod
    def create(cls, results_dir, name: str, config: dict, about: dict | None = None) -> "RunDir":
        """A new run folder; `about`: more for run.json (e.g. `scored_as`, the evaluator code the scores
        follow)."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        base = Path(results_dir) / f"{encode_task_id(name)}-{stamp}"
        path, n = base, 1
        while True:
            try:
                path.mkdir(parents=True)
                break
            except FileExistsError:
                n += 1
                path = base.with_name(f"{base.name}-{n}")
        run = cls(path)
        meta = {"format_version": FORMAT_VERSION, "run_id": path.name,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "config": config,
                "cua_version": __version__, "host": socket.gethostname(), "python": platform.python_version(),
                "argv": sys.argv[1:], **(about or {})}
        write_atomic(run.run_json, (json.dumps(meta, indent=2) + "\n").encode())
        return run

    @classmethod
    def open(cls, path) -> "RunDir":
        run = cls(path)
        if not run.run_json.is_file():
            raise InputError(f"{path}: not a cua run folder (no run.json)")
        return run

    def check_writable(self) -> None:
        """UnwritableRun, naming it, for the first file or folder of the run a rollout would write
        that its writer would refuse (a link, a FIFO, a file where a folder is due): a resume stops
        on it before it starts anything, rather than an episode later. Attempt folders are checked
        as they are made."""
        for name in RUN_FILES:
            check_writable_file(self.path / name)
        trajectories = self.path / TRAJECTORIES
        check_writable_dir(trajectories)
        if trajectories.is_dir():  # a folder, not a link: checked just above
            with os.scandir(trajectories) as entries:
                for entry in entries:  # each task's folder: new attempts are made in it
                    if entry.is_symlink():
                        check_writable_dir(entry.path)
        check_writable_queue(self.path / QUEUE)

    def refuse(self, refused: list[dict]) -> None:
        """The tasks cua cannot play ({"task_id", "domain", "missing"}): listed, never scheduled."""
        write_atomic(self.unsupported, "".join(json.dumps(r) + "\n" for r in refused).encode())

    def queue(self, max_attempts: int, lease_ttl: float) -> DirQueue:
        return DirQueue(self.path / QUEUE, self.scheduled, self.episodes, max_attempts, lease_ttl)

    def traj(self, item: dict) -> "TrajWriter":
        """The writer of a queue item's attempt."""
        return TrajWriter(self.path / traj_rel(item["task_id"], item["sample"], item["attempt"]), self.path)


def traj_rel(task_id: str, sample: int, attempt: int) -> str:
    """An attempt's folder, relative to the run folder."""
    return f"{TRAJECTORIES}/{encode_task_id(task_id)}/{sample}_{attempt}"


VIDEO = "episode.mp4"  # the attempt's screen recording, when env.osworld.record asks for one


def screenshot_name(step: int) -> str:
    return f"step_{step:04d}.png"


def a11y_tree_name(step: int) -> str:
    return f"step_{step:04d}_a11y.xml"


def _file_id(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class TrajWriter:
    """Writes one attempt's steps: traj.jsonl plus the screenshots (and accessibility trees) as received.

    The folder appears with the first step: an attempt that never got an env leaves none.
    The envs it allocates go to the run's leases.jsonl (leases.py).

    The folder is made inside the run folder part by part, none of them a link (confined.make_dirs),
    and kept open: every file is written relative to it, without following a link at its last part,
    so neither a link planted in it nor a folder above it swapped for one mid-attempt leads a write out
    of the run (UnwritableRun instead). `close` lets the folder go (the attempt has ended).
    """

    def __init__(self, folder: Path, run_path: Path):
        self.dir = Path(folder)
        self.run_path = Path(run_path)
        self._fd: int | None = None  # the attempt's folder, open once it is made
        self._traj: int | None = None  # its traj.jsonl, open from the first step on: a step's line is one write
        self._traj_id = (0, 0)

    def lease(self, rec: dict) -> None:
        """An env this attempt took (named with the attempt's folder, so the run can give back what a
        lost runner held) or gave back."""
        if rec.get("state") == "held":
            rec = {**rec, "traj": self.dir.relative_to(self.run_path).as_posix()}
        record(self.run_path, rec)

    def _folder_fd(self) -> int:
        if self._fd is None:
            self._fd = make_dirs(self.run_path, self.dir.relative_to(self.run_path).as_posix(), keep=True)
        return self._fd

    def screenshot(self, step: int, png: bytes) -> str:
        return self._file(screenshot_name(step), png)  # the bytes the env sent: no re-encoding

    def read_back(self, name: str) -> bytes:
        """A file this writer wrote, read through the attempt's folder: UnreadableRun, naming it, for a
        link or anything but a regular file there now."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self._folder_fd())
        except OSError as e:
            raise UnreadableRun(f"{self.dir / name}: cannot be read back: {e.strerror}") from None
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnreadableRun(f"{self.dir / name}: cannot be read back: not a regular file")
            return f.read()

    def a11y_tree(self, step: int, xml: str) -> str:
        return self._file(a11y_tree_name(step), xml.encode())  # the env checked it parses: valid UTF-8

    def video(self, mp4: bytes) -> str:
        return self._file(VIDEO, mp4)

    def _file(self, name: str, data: bytes) -> str:
        # A file a step: the open's flags are its whole check (no fstat), as os.open alone cost before.
        fd = open_writable(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, dir_fd=self._folder_fd(),
                           shown=self.dir / name, regular_only=False)
        try:
            os.write(fd, data)
        except BaseException:
            os.close(fd)
            raise
        page_cache.written(fd)  # closes it once its pages have left the cache
        return name

    def step(self, record: dict, files: list[tuple[str, bytes]] = ()) -> None:
        """The step's line in traj.jsonl, after the files it names ((name, bytes) each) are written."""
        for name, data in files:
            self._file(name, data)
        line = line_bytes(record)
        if self._traj is not None and not self._still_traj():
            # Removed, moved or replaced since (a link planted there, say): opened again, as at first,
            # so no line follows the file out of the folder.
            os.close(self._traj)
            self._traj = None
        if self._traj is None:
            self._traj, lead = open_appending(TRAJ, dir_fd=self._folder_fd(), shown=self.dir / TRAJ)
            self._traj_id = _file_id(os.fstat(self._traj))
            line = lead + line
        os.write(self._traj, line)

    def _still_traj(self) -> bool:
        """Whether traj.jsonl is still the file open (held open, its inode number cannot be reused)."""
        try:
            return _file_id(os.stat(TRAJ, dir_fd=self._fd, follow_symlinks=False)) == self._traj_id
        except OSError:
            return False

    def takeover(self) -> str | None:
        """A person's wish for this attempt (takeover.py), None when nobody takes it over."""
        return takeover.wish(self.dir, dir_fd=self._fd) if self._fd is not None else None

    def holding(self, on: bool) -> None:
        """Say whether the agent has let go of the desktop (on) or plays again (off)."""
        takeover.set_held(self.dir, on, dir_fd=self._folder_fd())

    def close(self) -> None:
        for fd in (self._traj, self._fd):
            if fd is not None:
                os.close(fd)
        self._traj = self._fd = None

    def __enter__(self) -> "TrajWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit there may be no os module left to close with
            pass
