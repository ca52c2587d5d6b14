"""Reading a cua run folder back, also while it runs: scheduled pairs and final results."""

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
        """Live counts for the progress bar (`cua stats` has the full figures)."""
        outcomes = Counter(r["outcome"] for p, r in self.final.items() if p in self.scheduled)
        return {"success": outcomes["success"], "failure": outcomes["failure"], "errors": outcomes["error"]}
