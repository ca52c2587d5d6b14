"""The run folder (results/<run>/): its layout is a contract: docs/reference/run-folder.md."""

import json
import os
import platform
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from .._util.atomic import write_atomic
from ..errors import InputError
from . import takeover
from .jsonl import append_line
from .leases import record
from .names import encode_task_id
from .queue import DirQueue
from .records import FORMAT_VERSION, UNSUPPORTED


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
        run.run_json.write_text(json.dumps(meta, indent=2) + "\n")
        return run

    @classmethod
    def open(cls, path) -> "RunDir":
        run = cls(path)
        if not run.run_json.is_file():
            raise InputError(f"{path}: not a cua run folder (no run.json)")
        return run

    def refuse(self, refused: list[dict]) -> None:
        """The tasks cua cannot play ({"task_id", "domain", "missing"}): listed, never scheduled."""
        write_atomic(self.unsupported, "".join(json.dumps(r) + "\n" for r in refused).encode())

    def queue(self, max_attempts: int, lease_ttl: float) -> DirQueue:
        return DirQueue(self.path / "queue", self.scheduled, self.episodes, max_attempts, lease_ttl)

    def traj(self, item: dict) -> "TrajWriter":
        """The writer of a queue item's attempt."""
        return TrajWriter(self.path / traj_rel(item["task_id"], item["sample"], item["attempt"]), self.path)


def traj_rel(task_id: str, sample: int, attempt: int) -> str:
    """An attempt's folder, relative to the run folder."""
    return f"trajectories/{encode_task_id(task_id)}/{sample}_{attempt}"


VIDEO = "episode.mp4"  # the attempt's screen recording, when env.osworld.record asks for one


def screenshot_name(step: int) -> str:
    return f"step_{step:04d}.png"


def a11y_tree_name(step: int) -> str:
    return f"step_{step:04d}_a11y.xml"


class TrajWriter:
    """Writes one attempt's steps: traj.jsonl plus the screenshots (and accessibility trees) as received.

    The folder appears with the first step: an attempt that never got an env leaves none.
    The envs it allocates go to the run's leases.jsonl (leases.py).
    """

    def __init__(self, folder: Path, run_path: Path):
        self.dir = folder
        self.run_path = run_path
        self._made = False

    def lease(self, rec: dict) -> None:
        """An env this attempt took (named with the attempt's folder, so the run can give back what a
        lost runner held) or gave back."""
        if rec.get("state") == "held":
            rec = {**rec, "traj": self.dir.relative_to(self.run_path).as_posix()}
        record(self.run_path, rec)

    def _folder(self) -> Path:
        if not self._made:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._made = True
        return self.dir

    def screenshot(self, step: int, png: bytes) -> str:
        return self._file(screenshot_name(step), png)  # the bytes the env sent: no re-encoding

    def a11y_tree(self, step: int, xml: str) -> str:
        return self._file(a11y_tree_name(step), xml.encode())  # the env checked it parses: valid UTF-8

    def video(self, mp4: bytes) -> str:
        return self._file(VIDEO, mp4)

    def _file(self, name: str, data: bytes) -> str:
        fd = os.open(self._folder() / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return name

    def step(self, record: dict) -> None:
        append_line(self._folder() / "traj.jsonl", record)

    def takeover(self) -> str | None:
        """A person's wish for this attempt (takeover.py), None when nobody takes it over."""
        return takeover.wish(self.dir) if self._made else None

    def holding(self, on: bool) -> None:
        """Say whether the agent has let go of the desktop (on) or plays again (off)."""
        takeover.set_held(self._folder(), on)

