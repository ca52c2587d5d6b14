"""The run folders to export: each counted once, its id, and its finished attempts.

Only `episodes.jsonl` says an attempt has finished, so a run still going
exports its finished attempts only; a torn last line is skipped (scan).
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .._util.diag import warn, warn_problems
from ..errors import InputError
from ..runfolder.confined import Refused, read_in, run_root
from ..runfolder.jsonl import scan
from ..runfolder.reader import checked, require_regular, trajectory_dir
from ..runfolder.records import episode_record, supersedes


@dataclass
class Run:
    path: Path                  # as given
    real: str                   # its real path: every file read must be inside it
    run_id: str
    lines: list = field(default_factory=list)   # (line number, episode record), in file order
    meta: dict = field(default_factory=dict)    # run.json, when it is an object

    def attempts(self, all_attempts: bool) -> list:
        """(line, record) of the attempts to export, in file order: each pair's final
        attempt, or every attempt (a line repeated for the same attempt counts once)."""
        latest = {}
        for n, rec in self.lines:
            key = (rec["task_id"], rec["sample"]) + ((rec["attempt"],) if all_attempts else ())
            old = latest.get(key)
            if old is None or supersedes(rec, old[1]):
                latest[key] = (n, rec)
        return sorted(latest.values(), key=lambda x: x[0])

    def finals(self) -> list[dict]:
        """Each pair's final record: what group statistics are computed over."""
        return [rec for _, rec in self.attempts(False)]

    def traj_dir(self, rec: dict, where: str) -> tuple[str, str] | None:
        """(folder relative to the run, its path) of an attempt's trajectory; None when it
        has none, or (with a warning) when its `traj` would lead out of the run folder."""
        real = trajectory_dir(self.real, rec, where)
        return None if real is None else (rec["traj"], real)


def open_runs(paths: list[Path]) -> list[Run]:
    """The runs given, each once: by real path, then by run_id."""
    runs, by_real, by_id = [], {}, {}
    for path in paths:
        real = run_root(path)
        if not os.path.isfile(os.path.join(real, "run.json")):
            why = ("no such folder" if not os.path.exists(real) else "not a folder" if not os.path.isdir(real)
                   else "not a cua run folder (no run.json)")
            raise InputError(f"{path}: {why}")
        if real in by_real:
            warn(f"{path}: the same folder as {by_real[real]}; exported once")
            continue
        by_real[real] = path
        meta = _meta(path, real)
        run_id = _run_id(path, real, meta)
        if run_id in by_id:
            warn(f"{path}: the same run_id {run_id!r} as {by_id[run_id]}; exported once")
            continue
        by_id[run_id] = path
        runs.append(Run(path, real, run_id, _episodes(path, real), meta))
    return runs


def _meta(path: Path, real: str) -> dict:
    """run.json's object; {} when it is refused, not JSON or not an object."""
    try:
        meta = json.loads(read_in(real, "run.json"))
    except Refused as e:
        warn(f"{path}/run.json: the file {e}; not read")
        meta = None
    except OSError as e:
        raise InputError(f"{path}/run.json: cannot read: {e.strerror}") from None
    except (ValueError, RecursionError):
        meta = None
    return meta if isinstance(meta, dict) else {}


def _run_id(path: Path, real: str, meta: dict) -> str:
    """run.json's run_id; the folder's name (with a warning) when it has none."""
    run_id = meta.get("run_id")
    if isinstance(run_id, str) and run_id:
        return run_id
    warn(f"{path}/run.json: no run_id string; using the folder name {os.path.basename(real)!r}")
    return os.path.basename(real)


def _episodes(path: Path, real: str) -> list:
    """The valid lines of episodes.jsonl; what is rejected or repaired is warned about."""
    file = os.path.join(real, "episodes.jsonl")
    require_regular(file)  # a link, a FIFO, a folder, no permission: the run cannot be exported, not "no episodes"
    rows, problems, _, _ = scan(file)
    lines = checked(rows, episode_record, problems)
    warn_problems(f"{path}/episodes.jsonl", sorted(problems))
    return lines
