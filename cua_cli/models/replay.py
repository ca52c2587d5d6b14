"""Replays the responses of an earlier run, call by call, to check reproducibility.

For each (task, sample) it replays the trajectory of that pair's final
attempt: in each step, the answers the model gave before a re-ask
(`failed_tries`), then the step's own answer. The agent parses the replayed
text exactly as it did the first time.
"""

from pathlib import Path

from ..jsonl import read_lines
from ..results import RunReader
from . import Reply, Request

_END = "Thought: the recorded trajectory ends here.\nAction: finished(content='end of replay')"


class Replay:
    def __init__(self, run_dir: Path, coord_mode: str):
        self.run_dir = Path(run_dir).resolve()
        if not (self.run_dir / "episodes.jsonl").is_file():
            raise FileNotFoundError(f"{self.run_dir}: no episodes.jsonl to replay")
        final = RunReader(self.run_dir).refresh(warn=True).final
        self.trajs = {pair: rec["traj"] for pair, rec in final.items() if isinstance(rec.get("traj"), str)}

    def episode(self, task_id: str, sample: int) -> "_Episode":
        calls: dict[int, list[str]] = {}
        for s in self._steps(self.trajs.get((task_id, sample))):
            tries = [t.get("response") for t in s.get("failed_tries") or [] if isinstance(t, dict)]
            calls[s["step"]] = [r for r in tries + [s.get("response")] if isinstance(r, str)]
        return _Episode(calls)

    def _steps(self, traj: str | None) -> list[dict]:
        """The recorded steps, read only from inside the run folder."""
        if traj is None:
            return []
        folder = (self.run_dir / traj).resolve()
        if not folder.is_relative_to(self.run_dir):
            return []  # a crafted `traj` must not make us read elsewhere
        steps = [s for s in read_lines(folder / "traj.jsonl") if type(s.get("step")) is int]
        return sorted(steps, key=lambda s: s["step"])


class _Episode:
    def __init__(self, calls: dict[int, list[str]]):
        self.calls = calls

    def complete(self, req: Request) -> Reply:
        answers = self.calls.get(req.step)
        return Reply(answers.pop(0) if answers else _END, "replay")

    def close(self) -> None:
        pass
