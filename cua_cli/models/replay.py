"""Replays the responses of an earlier run, call by call, to check reproducibility.

For each (task, sample) it replays the trajectory of that pair's final
attempt: in each step, the answers the model gave before a re-ask
(`failed_tries`), then the step's own answer. The agent parses the replayed
text exactly as it did the first time.
"""

import os
from pathlib import Path

from .._util.diag import warn_problems
from ..errors import InputError, ModelError
from ..runfolder.confined import run_root
from ..runfolder.reader import RunReader, read_steps, trajectory_dir
from . import Params, Reply


class Replay:
    def __init__(self, run_dir: Path):
        self.run_dir = run_root(run_dir)
        if not os.path.isfile(os.path.join(self.run_dir, "episodes.jsonl")):
            raise InputError(f"{self.run_dir}: no episodes.jsonl to replay")
        reader = RunReader(self.run_dir, strict=True).refresh(warn=True)
        self.trajs = {pair: (rec, reader.where(pair)) for pair, rec in reader.final.items()}

    @classmethod
    def from_config(cls, cfg, secrets: dict, shared) -> "Replay":
        return cls(cfg.resolve_path(cfg.model.replay_run))

    def session(self, task_id: str, sample: int) -> "_Session":
        calls: dict[int, list[str]] = {}
        for s in self._steps(task_id, sample):
            tries = [t.get("response") for t in s.get("failed_tries") or [] if isinstance(t, dict)]
            calls[s["step"]] = [r for r in tries + [s.get("response")] if isinstance(r, str)]
        return _Session(calls)

    def _steps(self, task_id: str, sample: int) -> list[dict]:
        """The recorded steps of a pair's final attempt, read only from inside the run folder."""
        rec, where = self.trajs.get((task_id, sample), (None, None))
        traj_dir = rec and trajectory_dir(self.run_dir, rec, where)
        if not traj_dir:
            return []
        steps, problems, path = read_steps(traj_dir)
        warn_problems(path, problems)
        return [s for _, s in steps]


class _Session:
    def __init__(self, calls: dict[int, list[str]]):
        self.calls = calls

    async def complete(self, messages: list[dict], params: Params) -> Reply:
        answers = self.calls.get(params.step)
        if answers:
            return Reply(answers.pop(0), "replay")
        if params.answers.end is None:
            raise ModelError("the recorded trajectory ends here, and the agent has no answer that ends an episode")
        return Reply(params.answers.end, "replay")

    def close(self) -> None:
        pass
