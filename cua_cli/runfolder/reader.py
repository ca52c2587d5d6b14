"""Reading a cua run folder back, also while it runs: scheduled pairs, final results,
and the trajectories they point at.

Every line read goes through `scheduled_record` or `episode_record` (records.py),
the one place that decides what a valid line is; what they reject or repair is
warned about with file and line, never raised. Files are opened only inside the
run folder (confined.py).
"""

import os
from collections import Counter
from pathlib import Path

from .._util.diag import warn, warn_problems
from .._util.text import clip
from ..errors import UnreadableRun
from .confined import Refused, confined_dir, open_regular, read_in
from .jsonl import scan
from .records import episode_record, scheduled_record, step_record, supersedes


def checked(rows: dict, check, problems: list) -> list[tuple[int, dict]]:
    """(line number, record) of the lines `check` accepts; what it rejects or repairs joins `problems`."""
    records = []
    for n, obj in rows.items():
        rec, problem = check(obj)
        if problem:
            problems.append((n, problem))
        if rec is not None:
            records.append((n, rec))
    return records


class RunReader:
    """Incremental reader of scheduled.jsonl and episodes.jsonl, usable on a live run.

    `strict`: for a command that reads a finished run once (stats, export, view): a file that
    is there but is no regular file (a link, a FIFO, a folder) raises UnreadableRun, naming it,
    rather than reading as a run with no lines. Live readers warn and read on."""

    def __init__(self, path, keep_attempts: bool = False, strict: bool = False):
        self.path = Path(path)
        self.strict = strict
        self.scheduled: dict[tuple[str, int], str | None] = {}
        self.final: dict[tuple[str, int], dict] = {}
        self.lines: dict[tuple[str, int], int] = {}  # the episodes.jsonl line of each final record
        self.attempts: list[dict] | None = [] if keep_attempts else None  # every attempt, for timings
        self._pos = {"scheduled.jsonl": (0, 1), "episodes.jsonl": (0, 1)}  # byte offset, line number

    def refresh(self, warn: bool = False) -> "RunReader":
        for _, r in self._read("scheduled.jsonl", scheduled_record, warn):
            self.scheduled[(r["task_id"], r["sample"])] = r.get("domain")
        for n, r in self._read("episodes.jsonl", episode_record, warn):
            if self.attempts is not None:
                self.attempts.append(r)
            pair = (r["task_id"], r["sample"])
            if supersedes(r, self.final.get(pair)):
                self.final[pair], self.lines[pair] = r, n
        return self

    def _read(self, name: str, check, warn: bool) -> list[tuple[int, dict]]:
        """(line, record) of the new valid lines of one file, each line checked by `check`."""
        path = self.path / name
        offset, line = self._pos[name]
        if self.strict:
            require_regular(path)
        rows, problems, offset, line = scan(path, offset, line)
        self._pos[name] = (offset, line)
        records = checked(rows, check, problems)
        if warn:
            warn_problems(path, sorted(problems))
        return records

    def where(self, pair) -> str:
        """File and line of a pair's final record, for warnings."""
        return f"{self.path / 'episodes.jsonl'}:{self.lines[pair]}"

    def summary(self) -> dict:
        """Live counts for the progress bar (`cua stats` has the full figures)."""
        outcomes = Counter(r["outcome"] for p, r in self.final.items() if p in self.scheduled)
        return {"success": outcomes["success"], "failure": outcomes["failure"], "errors": outcomes["error"]}


def unreadable(path) -> str | None:
    """Why the run file `path` is there but cannot be read (a link, a FIFO, a folder, no permission);
    None when it is a regular file, or missing: only not written yet. Nothing is followed or waited on."""
    try:
        open_regular(str(path)).close()
    except FileNotFoundError:
        return None
    except Refused as e:
        return f"the file {e}; not read"
    except OSError as e:
        return f"cannot read: {e.strerror or e}"
    return None


def require_regular(path) -> None:
    """Raise UnreadableRun, naming the file, when the run file `path` is there but cannot be read."""
    why = unreadable(path)
    if why:
        raise UnreadableRun(f"{path}: {why}")


def trajectory_dir(run: str, rec: dict, where: str) -> str | None:
    """The trajectory folder of episode record `rec` inside run folder `run` (a real path);
    None when it has none, or (with a warning naming `where`, its file and line) when its
    `traj` would lead elsewhere."""
    traj = rec.get("traj")
    if not traj:
        return None
    try:
        return confined_dir(run, traj)
    except Refused as e:
        warn(f"{where}: traj {show_path(traj)} {e}; not read")
        return None


def read_steps(traj_dir: str) -> tuple[list[tuple[int, dict]], list, str]:
    """The step lines of a trajectory folder's traj.jsonl, in step order, as (line, object);
    the problems of its lines, as (line, text); and the file's path.

    A line without a step index, or repeating a step, is a problem and skipped: what a step
    is must not depend on which of two lines a reader takes. A field of the wrong type is a
    problem too, and read as null (records.step_record).
    """
    path = os.path.join(traj_dir, "traj.jsonl")
    rows, problems, _, _ = scan(path)
    steps = {}
    for n, obj in rows.items():
        rec, problem = step_record(obj)
        if problem:
            problems.append((n, problem))
        if rec is None:
            continue
        if rec["step"] in steps:
            problems.append((n, f"skipped a second line of step {rec['step']}"))
        else:
            steps[rec["step"]] = (n, rec)
    return [steps[s] for s in sorted(steps)], sorted(problems), path


def show_path(v) -> str:
    """A path from a record, for a warning: short, and quoted so its ends show."""
    return repr(clip(v, 83)) if isinstance(v, str) else f"of type {type(v).__name__}"


def subfolders(root: str, pattern: str) -> list[str]:
    """The folders matching `pattern` in run folder `root`, relative to it; one reached
    through a link is left out with a warning (a run folder is read only inside itself)."""
    found = []
    for d in sorted(Path(root).glob(pattern)):
        rel = d.relative_to(root).as_posix()
        try:
            if os.path.isdir(confined_dir(root, rel)):
                found.append(rel)
        except Refused as e:
            warn(f"{d}: {e}; not read")
    return found


def read_number(root: str, rel: str) -> float | None:
    """The number a score file in the run folder holds; None (with a warning when refused) if none."""
    try:
        text = read_in(root, rel, 100)
        return None if len(text) > 100 else float(text.decode())  # a score is short: more is not one
    except Refused as e:
        warn(f"{root}/{rel}: the file {e}; not read")
        return None
    except (OSError, ValueError):
        return None
