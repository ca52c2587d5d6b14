"""Replays the responses of an earlier run, step by step, to check reproducibility.

For each (task, sample) it replays the trajectory of that pair's final
attempt; the agent parses the replayed text exactly as it did the first time.
"""

from pathlib import Path

from ..jsonl import read_lines
from . import Reply, Request

_END = "Thought: the recorded trajectory ends here.\nAction: finished(content='end of replay')"


class Replay:
    def __init__(self, run_dir: Path, coord_mode: str):
        self.run_dir = Path(run_dir)
        if not (self.run_dir / "episodes.jsonl").is_file():
            raise FileNotFoundError(f"{self.run_dir}: no episodes.jsonl to replay")
        final = {}
        for rec in read_lines(self.run_dir / "episodes.jsonl"):
            pair = (rec["task_id"], rec["sample"])
            if rec.get("traj") and (pair not in final or rec["attempt"] > final[pair]["attempt"]):
                final[pair] = rec
        self.trajs = {pair: rec["traj"] for pair, rec in final.items()}

    def episode(self, task_id: str, sample: int) -> "_Episode":
        traj = self.trajs.get((task_id, sample))
        steps = read_lines(self.run_dir / traj / "traj.jsonl") if traj else []
        return _Episode([s["response"] for s in sorted(steps, key=lambda s: s["step"])])


class _Episode:
    def __init__(self, responses: list[str]):
        self.responses = responses

    def complete(self, req: Request) -> Reply:
        text = self.responses[req.step] if req.step < len(self.responses) else _END
        return Reply(text, "replay")

    def close(self) -> None:
        pass
