"""Reading a cua run folder back, also while it runs: scheduled pairs and final results.

Every line read goes through `scheduled_record` or `episode_record` (records.py),
the one place that decides what a valid line is; what they reject or repair is
warned about with file and line, never raised.
"""

from collections import Counter
from pathlib import Path

from .jsonl import scan, warn_problems
from .records import episode_record, scheduled_record, supersedes


def checked(rows: dict, check, problems: list) -> list[tuple[int, dict]]:
    """(line number, record) of the lines `check` accepts; what it rejects or repairs joins `problems`."""
    records = []
    for n, obj in rows.items():
        rec, problem = check(obj)
        if problem:
            problems.append((n, problem))
        if rec is not None:
            records.append((n, rec))
    return records


class RunReader:
    """Incremental reader of scheduled.jsonl and episodes.jsonl, usable on a live run."""

    def __init__(self, path):
        self.path = Path(path)
        self.scheduled: dict[tuple[str, int], str | None] = {}
        self.final: dict[tuple[str, int], dict] = {}
        self._pos = {"scheduled.jsonl": (0, 1), "episodes.jsonl": (0, 1)}  # byte offset, line number

    def refresh(self, warn: bool = False) -> "RunReader":
        for r in self._read("scheduled.jsonl", scheduled_record, warn):
            self.scheduled[(r["task_id"], r["sample"])] = r.get("domain")
        for r in self._read("episodes.jsonl", episode_record, warn):
            pair = (r["task_id"], r["sample"])
            if supersedes(r, self.final.get(pair)):
                self.final[pair] = r
        return self

    def _read(self, name: str, check, warn: bool) -> list[dict]:
        """The new valid records of one file, each line checked by `check`."""
        path = self.path / name
        offset, line = self._pos[name]
        rows, problems, offset, line = scan(path, offset, line)
        self._pos[name] = (offset, line)
        records = checked(rows, check, problems)
        if warn:
            warn_problems(path, sorted(problems))
        return [rec for _, rec in records]

    def summary(self) -> dict:
        """Live counts for the progress bar (`cua stats` has the full figures)."""
        outcomes = Counter(r["outcome"] for p, r in self.final.items() if p in self.scheduled)
        return {"success": outcomes["success"], "failure": outcomes["failure"], "errors": outcomes["error"]}
