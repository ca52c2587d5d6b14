"""Adaptive rollouts, DART's way: rounds of samples per task, fewer for tasks the policy already solves.

Round one gives every task `rollout_n` samples. Whenever the queue runs dry,
the next round gives each task the count DART's rule (cua_cli/dart/adaptive.py)
takes from its latest scores in this run, as new samples after its last one.
"""

from ..runfolder.reader import RunReader
from .adaptive import Rule, next_round


class AdaptiveRounds:
    def __init__(self, cfg, queue, tasks: list[dict], run_path):
        a = cfg.tasks.adaptive
        self.rule = Rule(rollout_n=a.rollout_n, threshold=a.threshold, min_n=a.min_n,
                         min_failure_steps=a.min_failure_steps)
        self.rounds = a.rounds
        self.queue = queue
        self.tasks = {t["task_id"]: t for t in tasks}
        self.reader = RunReader(run_path)
        self.done = 0
        self.last: dict[str, int] = {}

    def start(self) -> None:
        """Round one; on --resume, the rounds already queued count."""
        self.reader.refresh()
        queued = {}
        for task_id, sample in self.reader.scheduled:
            queued[task_id] = max(queued.get(task_id, 0), sample + 1)
        if queued:
            self.done = 1  # a resumed run: its first round is in the queue
        else:
            self._enqueue({t: self.rule.rollout_n for t in self.tasks})

    def tick(self) -> str | None:
        """Queue the next round when the last one is over; what was queued, for the log."""
        if self.done >= self.rounds or not self.queue.idle():
            return None
        self.reader.refresh()
        counts = next_round(list(self.reader.final.values()), self.last, self.rule)
        counts = {t: n for t, n in counts.items() if t in self.tasks}
        self._enqueue(counts)
        return f"adaptive round {self.done}/{self.rounds}: {sum(counts.values())} samples over {len(counts)} tasks"

    def _enqueue(self, counts: dict[str, int]) -> None:
        nxt = {}
        for task_id, sample in self.reader.scheduled:
            nxt[task_id] = max(nxt.get(task_id, 0), sample + 1)
        for task_id, n in counts.items():
            self.queue.enqueue([self.tasks[task_id]], n, first=nxt.get(task_id, 0))
        self.last, self.done = counts, self.done + 1
