"""Result folders of three tools, read into one shape: every scheduled
(task, sample) pair, with its final result or None when it never finished.

Detected from the folder's contents:
- cua:    run.json / scheduled.jsonl + episodes.jsonl
- OSWorld: <domain>/<example_id>/ with result.txt (a float) and traj.jsonl
- DART:   <task_id>_<trace_id>/ with reward.txt and task_config.json

What cannot be read is warned about, naming the file, and never raised: a
score that is not a number in [0, 1] (NaN, infinite, garbage) is an error,
never a success. Only a task list of the wrong shape stops the reading.
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .._util.diag import warn
from ..dart.layout import FAILED, read_traces
from ..errors import LayoutError
from ..runfolder.confined import Refused, open_in, run_root
from ..runfolder.jsonl import read_lines
from ..runfolder.reader import RunReader, read_number, subfolders
from ..runfolder.records import UNSUPPORTED


@dataclass
class Final:
    outcome: str                 # success | failure | error
    score: float | None          # in [0, 1]; None on error
    steps: int | None = None
    duration_s: float | None = None
    stop_reason: str | None = None


@dataclass
class RunData:
    name: str
    layout: str
    pairs: dict = field(default_factory=dict)     # (task_id, sample) -> Final | None
    domains: dict = field(default_factory=dict)   # task_id -> domain
    infeasible: set = field(default_factory=set)  # task ids whose evaluator func is "infeasible"
    unsupported: dict = field(default_factory=dict)  # task id -> what cua lacks to play it (never scheduled)
    path: Path | None = None                      # the folder it was read from


def read_run(path, tasks_file=None) -> RunData:
    p = Path(path)
    if not p.is_dir():
        raise LayoutError(f"{p}: not a folder")
    listing = read_task_list(tasks_file) if tasks_file else None
    try:
        if (p / "scheduled.jsonl").exists() or (p / "run.json").exists():
            return _named(_read_cua(p), p)
        if any(p.glob("*/task_config.json")):
            return _named(_read_dart(p), p)
        if any(p.glob("*/*/result.txt")) or any(p.glob("*/*/traj.jsonl")):
            return _named(_read_osworld(p, listing), p)
    except OSError as e:  # a folder where a file is due, no permission: name it, no traceback
        raise LayoutError(f"{p}: cannot read: {e}") from None
    raise LayoutError(f"{p}: not a cua run, an OSWorld results folder (<domain>/<example>/result.txt) "
                      "or a DART rollout folder (<task>_<trace>/reward.txt)")


def _named(data: RunData, p: Path) -> RunData:
    data.name = p.resolve().name  # `cua stats .` names the folder, not ""
    data.path = p
    return data


def read_task_list(tasks_file) -> dict[str, list[str]]:
    """OSWorld's test_all.json: {domain: [task id, ...]}; any other shape is refused, not guessed at."""
    try:
        listing = json.loads(Path(tasks_file).read_bytes())
    except (OSError, ValueError, RecursionError) as e:
        raise LayoutError(f"{tasks_file}: cannot read the task list: {e}") from None
    if not isinstance(listing, dict):
        raise LayoutError(f"{tasks_file}: a task list maps each domain to a list of task ids, "
                          f"got {type(listing).__name__} at top level")
    for domain, ids in listing.items():
        if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
            raise LayoutError(f"{tasks_file}: domain {domain!r}: expected a list of task id strings")
    return listing


def _read_cua(p: Path) -> RunData:
    return from_reader(RunReader(p, strict=True).refresh(warn=True))


def from_reader(reader: RunReader) -> RunData:
    """A cua run already read (the rollout's progress reader, a report's) in the common shape."""
    data = RunData(reader.path.name, "cua")
    for rec in read_lines(reader.path / UNSUPPORTED) if (reader.path / UNSUPPORTED).exists() else []:
        if isinstance(rec.get("task_id"), str):
            data.unsupported[rec["task_id"]] = rec.get("missing")
    for pair, domain in reader.scheduled.items():
        data.domains.setdefault(pair[0], domain)
        rec = reader.final.get(pair)
        data.pairs[pair] = None if rec is None else _final(rec)
    for pair, rec in reader.final.items():
        if rec.get("evaluator_func") == "infeasible":
            data.infeasible.add(pair[0])
        if pair not in reader.scheduled:
            # A line without its scheduled pair (an older run, a hand-made folder): still counted.
            warn(f"{reader.path}: {pair} has an episode line but was never scheduled")
            data.domains.setdefault(pair[0], rec.get("domain"))
            data.pairs[pair] = _final(rec)
    return data


def _final(rec: dict) -> Final:
    """A record checked by `episode_record` (every field absent, null or of its type) as a Final."""
    return Final(rec["outcome"], rec.get("score"), rec.get("steps"), rec.get("duration_s"), rec.get("stop_reason"))


def _score(path, value: float | None) -> Final:
    """The Final of a score file: a number in [0, 1], else an evaluation error (NaN is no success)."""
    if value is None or not (0 <= value <= 1):
        warn(f"{path}: holds {'no number' if value is None else value} where a score in [0, 1] is due; "
              "counted as an error")
        return Final("error", None, stop_reason="eval_error")
    return Final("success" if value == 1 else "failure", value)


def _count_lines(root: str, rel: str) -> int | None:
    try:
        with open_in(root, rel) as f:
            return sum(1 for line in f if line.strip())
    except Refused as e:
        warn(f"{root}/{rel}: the file {e}; not read")
        return None
    except OSError:
        return None


def _read_osworld(p: Path, listing) -> RunData:
    data = RunData(p.name, "osworld")
    root = run_root(p)
    for example in subfolders(root, "*/*"):
        domain, task_id = example.split("/")
        data.domains[task_id] = domain
        result = f"{example}/result.txt"
        if not os.path.lexists(os.path.join(root, result)):
            data.pairs[(task_id, 0)] = None  # started, never scored: missing
            continue
        final = _score(p / result, read_number(root, result))
        if final.outcome != "error" and os.path.lexists(os.path.join(root, example, "traj.jsonl")):
            final.steps = _count_lines(root, f"{example}/traj.jsonl")
        data.pairs[(task_id, 0)] = final
    for domain, ids in (listing or {}).items():
        for task_id in ids:
            data.domains.setdefault(task_id, domain)
            data.pairs.setdefault((task_id, 0), None)  # never started: missing
    return data


def _read_dart(p: Path) -> RunData:
    data = RunData(p.name, "dart")
    for task_id, traces in read_traces(p).items():
        for sample, t in enumerate(traces):  # each trace is one sample
            data.domains[task_id] = t.task_type
            if t.evaluator == "infeasible":
                data.infeasible.add(task_id)
            if not t.rewarded:
                final = None
            elif t.reward in FAILED:
                final = Final("error", None, stop_reason=FAILED[t.reward])
            else:
                final = _score(p / t.folder / "reward.txt", t.reward)
            data.pairs[(task_id, sample)] = final
    return data
