"""Result folders of three tools, read into one shape: every scheduled
(task, sample) pair, with its final result or None when it never finished.

Detected from the folder's contents:
- cua:    run.json / scheduled.jsonl + episodes.jsonl
- OSWorld: <domain>/<example_id>/ with result.txt (a float) and traj.jsonl
- DART:   <task_id>_<trace_id>/ with reward.txt and task_config.json
"""

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..results import RunReader


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


class LayoutError(ValueError):
    pass


def read_run(path, tasks_file=None) -> RunData:
    p = Path(path)
    if not p.is_dir():
        raise LayoutError(f"{p}: not a folder")
    if (p / "scheduled.jsonl").exists() or (p / "run.json").exists():
        return _read_cua(p)
    if any(p.glob("*/task_config.json")):
        return _read_dart(p)
    if any(p.glob("*/*/result.txt")) or any(p.glob("*/*/traj.jsonl")):
        return _read_osworld(p, tasks_file)
    raise LayoutError(f"{p}: not a cua run, an OSWorld results folder (<domain>/<example>/result.txt) "
                      "or a DART rollout folder (<task>_<trace>/reward.txt)")


def _read_cua(p: Path) -> RunData:
    return from_reader(RunReader(p).refresh(warn=True))


def from_reader(reader: RunReader) -> RunData:
    """A cua run already read (the rollout's progress reader, a report's) in the common shape."""
    data = RunData(reader.path.name, "cua")
    for pair, domain in reader.scheduled.items():
        data.domains.setdefault(pair[0], domain)
        rec = reader.final.get(pair)
        data.pairs[pair] = None if rec is None else _final(rec)
    for pair, rec in reader.final.items():
        if rec.get("evaluator_func") == "infeasible":
            data.infeasible.add(pair[0])
        if pair not in reader.scheduled:
            # A line without its scheduled pair (an older run, a hand-made folder): still counted.
            print(f"warning: {reader.path}: {pair} has an episode line but was never scheduled", file=sys.stderr)
            data.domains.setdefault(pair[0], rec.get("domain"))
            data.pairs[pair] = _final(rec)
    return data


def _final(rec: dict) -> Final:
    return Final(rec["outcome"], rec.get("score"), rec.get("steps"), rec.get("duration_s"), rec.get("stop_reason"))


def _read_float(path: Path):
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _score(value: float) -> Final:
    score = min(max(value, 0.0), 1.0)
    return Final("success" if score == 1.0 else "failure", score)


def _read_osworld(p: Path, tasks_file) -> RunData:
    data = RunData(p.name, "osworld")
    for example in sorted(d for d in p.glob("*/*") if d.is_dir()):
        domain, task_id = example.parent.name, example.name
        data.domains[task_id] = domain
        result = example / "result.txt"
        if not result.exists():
            data.pairs[(task_id, 0)] = None  # started, never scored: missing
            continue
        value = _read_float(result)
        if value is None:
            data.pairs[(task_id, 0)] = Final("error", None, stop_reason="eval_error")
            continue
        final = _score(value)
        traj = example / "traj.jsonl"
        if traj.exists():
            final.steps = sum(1 for line in traj.open(errors="replace") if line.strip())
        data.pairs[(task_id, 0)] = final
    if tasks_file:
        try:
            listing = json.loads(Path(tasks_file).read_text())
        except (OSError, ValueError) as e:
            raise LayoutError(f"{tasks_file}: cannot read the task list: {e}") from None
        for domain, ids in listing.items():
            for task_id in ids:
                data.domains.setdefault(task_id, domain)
                data.pairs.setdefault((task_id, 0), None)  # never started: missing
    return data


def _read_dart(p: Path) -> RunData:
    data = RunData(p.name, "dart")
    traces: dict[str, list] = {}
    for folder in sorted(d for d in p.iterdir() if (d / "task_config.json").exists()):
        try:
            cfg = json.loads((folder / "task_config.json").read_text())
        except ValueError as e:
            print(f"warning: {folder}/task_config.json is not JSON ({e}); skipped", file=sys.stderr)
            continue
        raw = cfg.get("raw") or {}
        task_id = str(raw.get("task_id") or folder.name.rsplit("_", 1)[0])
        data.domains[task_id] = raw.get("task_type")
        evaluator = cfg.get("evaluator") or raw.get("evaluator") or {}
        if isinstance(evaluator, dict) and evaluator.get("func") == "infeasible":
            data.infeasible.add(task_id)
        traces.setdefault(task_id, []).append(folder)
    for task_id, folders in traces.items():
        for sample, folder in enumerate(folders):  # each trace is one sample
            reward_file = folder / "reward.txt"
            value = _read_float(reward_file) if reward_file.exists() else None
            if not reward_file.exists():
                final = None
            elif value in (-1.0, -2.0):  # DART's codes: evaluation failed / model failed
                final = Final("error", None, stop_reason="eval_error" if value == -1.0 else "model_error")
            elif value is None:
                final = Final("error", None, stop_reason="eval_error")
            else:
                final = _score(value)
            data.pairs[(task_id, sample)] = final
    return data
