"""Replays the responses of an earlier run, call by call, to check reproducibility.

For each (task, sample) it replays the trajectory of that pair's final
attempt: in each step, the answers the model gave before a re-ask
(`failed_tries`), then the step's own answer. The agent parses the replayed
text exactly as it did the first time.
"""

from pathlib import Path

from ..errors import InputError, ModelError
from ..runfolder.jsonl import read_lines
from ..runfolder.reader import RunReader
from . import Params, Reply


class Replay:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir).resolve()
        if not (self.run_dir / "episodes.jsonl").is_file():
            raise InputError(f"{self.run_dir}: no episodes.jsonl to replay")
        final = RunReader(self.run_dir).refresh(warn=True).final
        self.trajs = {pair: rec["traj"] for pair, rec in final.items() if isinstance(rec.get("traj"), str)}

    @classmethod
    def from_config(cls, cfg, secrets: dict, shared) -> "Replay":
        return cls(cfg.resolve_path(cfg.model.replay_run))

    def session(self, task_id: str, sample: int) -> "_Session":
        calls: dict[int, list[str]] = {}
        for s in self._steps(self.trajs.get((task_id, sample))):
            tries = [t.get("response") for t in s.get("failed_tries") or [] if isinstance(t, dict)]
            calls[s["step"]] = [r for r in tries + [s.get("response")] if isinstance(r, str)]
        return _Session(calls)

    def _steps(self, traj: str | None) -> list[dict]:
        """The recorded steps, read only from inside the run folder."""
        if traj is None:
            return []
        folder = (self.run_dir / traj).resolve()
        if not folder.is_relative_to(self.run_dir):
            return []  # a crafted `traj` must not make us read elsewhere
        steps = [s for s in read_lines(folder / "traj.jsonl") if type(s.get("step")) is int]
        return sorted(steps, key=lambda s: s["step"])


class _Session:
    def __init__(self, calls: dict[int, list[str]]):
        self.calls = calls

    def complete(self, messages: list[dict], params: Params) -> Reply:
        answers = self.calls.get(params.step)
        if answers:
            return Reply(answers.pop(0), "replay")
        if params.answers.end is None:
            raise ModelError("the recorded trajectory ends here, and the agent has no answer that ends an episode")
        return Reply(params.answers.end, "replay")

    def close(self) -> None:
        pass
