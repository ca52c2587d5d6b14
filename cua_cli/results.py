"""Reading a run folder back: final results per (task, sample) and a summary."""

from collections import Counter
from pathlib import Path

from .jsonl import read_from


class RunReader:
    """Incremental reader of scheduled.jsonl and episodes.jsonl, usable on a live run."""

    def __init__(self, path):
        self.path = Path(path)
        self.scheduled: dict[tuple[str, int], str | None] = {}
        self.final: dict[tuple[str, int], dict] = {}
        self._offsets = [0, 0]

    def refresh(self, warn: bool = False) -> "RunReader":
        rows, self._offsets[0] = read_from(self.path / "scheduled.jsonl", self._offsets[0], warn)
        for r in rows:
            self.scheduled[(r["task_id"], r["sample"])] = r.get("domain")
        rows, self._offsets[1] = read_from(self.path / "episodes.jsonl", self._offsets[1], warn)
        for r in rows:
            pair = (r["task_id"], r["sample"])
            old = self.final.get(pair)
            if old is None or r["attempt"] >= old["attempt"]:
                self.final[pair] = r
        return self

    def summary(self) -> dict:
        """Counts and rates; missing pairs count 0 in `success_rate`."""
        finals = [self.final[p] for p in self.scheduled if p in self.final]
        outcomes = Counter(r["outcome"] for r in finals)
        scored = [r for r in finals if r["outcome"] != "error"]
        n = len(self.scheduled)
        return {
            "scheduled": n,
            "finished": len(finals),
            "missing": n - len(finals),
            "success": outcomes["success"],
            "failure": outcomes["failure"],
            "errors": outcomes["error"],
            "success_rate": sum(r["score"] or 0 for r in finals) / n if n else None,
            "success_rate_finished": sum(r["score"] for r in scored) / len(scored) if scored else None,
            "mean_steps": sum(r["steps"] for r in finals) / len(finals) if finals else None,
            "stop_reasons": dict(Counter(r["stop_reason"] for r in finals)),
        }
