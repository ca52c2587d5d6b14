"""DART's result folders as its rollouter leaves them: one folder `<task_id>_<trace_id>/` per
trace, with `task_config.json` (the task, under "raw") and, once scored, `reward.txt`."""

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .._util.diag import warn
from ..runfolder.confined import Refused, read_in, run_root
from ..runfolder.reader import read_number, subfolders

# DART's reward codes for a trace that was not scored: evaluation failed, model failed.
FAILED = {-1.0: "eval_error", -2.0: "model_error"}


@dataclass
class Trace:
    folder: str                 # relative to the results folder
    task_type: str | None
    evaluator: str | None       # the evaluator's func ("infeasible", ...)
    rewarded: bool              # reward.txt is there
    reward: float | None        # what it holds; None if it holds no number


def read_traces(p: Path) -> dict[str, list[Trace]]:
    """Each task's traces, in folder order; folders that cannot be read are warned about and skipped."""
    root = run_root(p)
    traces: dict[str, list[Trace]] = {}
    for folder in subfolders(root, "*/"):
        if not os.path.lexists(os.path.join(root, folder, "task_config.json")):
            continue
        task = _task(root, folder)
        if task is None:
            continue
        task_id, task_type, func = task
        reward_file = f"{folder}/reward.txt"
        rewarded = os.path.lexists(os.path.join(root, reward_file))
        reward = read_number(root, reward_file) if rewarded else None
        traces.setdefault(task_id, []).append(Trace(folder, task_type, func, rewarded, reward))
    return traces


def _task(root: str, folder: str):
    """(task id, task type, evaluator func) from a trace's task_config.json, or None if unreadable."""
    path = f"{root}/{folder}/task_config.json"
    try:
        cfg = json.loads(read_in(root, f"{folder}/task_config.json"))
    except (OSError, Refused, ValueError, RecursionError) as e:
        warn(f"{path}: cannot read ({e}); trace skipped")
        return None
    if not isinstance(cfg, dict):
        warn(f"{path}: not a JSON object; trace skipped")
        return None
    raw = cfg.get("raw") if isinstance(cfg.get("raw"), dict) else {}
    task_id = raw.get("task_id")
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    if not (isinstance(task_id, str) and task_id):
        if task_id not in (None, ""):
            warn(f"{path}: raw.task_id is not a string; the folder name is used")
        task_id = folder.rsplit("_", 1)[0]
    task_type = raw.get("task_type")
    if task_type is not None and not isinstance(task_type, str):
        warn(f"{path}: raw.task_type is not a string; read as null")
        task_type = None
    evaluator = cfg.get("evaluator") or raw.get("evaluator")
    func = evaluator.get("func") if isinstance(evaluator, dict) else None
    return task_id, task_type, func
