"""A finished attempt as the run folder holds it: what sinks are handed."""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .._util.diag import warn_problems
from .reader import read_steps


@dataclass(frozen=True)
class Finished:
    run_id: str
    run_dir: Path
    record: dict        # the episode line (checked by runfolder.records.episode_record)
    traj_dir: Path      # run_dir / record["traj"], inside run_dir (runfolder.reader.trajectory_dir)
    task: dict          # the pair's task: task_id, domain, instruction, config, evaluator ({} if gone)
    trace_id: str       # stable per attempt: the same run, task, sample and attempt give the same id

    def steps(self) -> list[dict]:
        """The trajectory's step lines, ordered by step."""
        steps, problems, path = read_steps(str(self.traj_dir))
        warn_problems(path, problems)
        return [s for _, s in steps]


def trace_id(run_id: str, task_id: str, sample: int, attempt: int) -> str:
    text = json.dumps([run_id, task_id, sample, attempt]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[:16]
