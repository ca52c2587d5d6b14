"""Sinks: where finished trajectories go besides the run folder (today DART's folders and MySQL table: dart/sink.py).

The run folder stays the source of truth. A SinkFollower in the rollout's
driver reads episodes.jsonl as it grows and hands each finished trajectory
(every attempt that is not an infrastructure error) to every sink. Sinks are
idempotent, so a resumed run, or one whose database was down for a while,
simply replays what is not there yet: nothing finished is ever lost.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Protocol

from .._util.diag import warn, warn_problems
from .._util.text import clip
from ..errors import CuaError, SinkUnavailable
from ..runfolder.confined import Refused, read_in, run_root
from ..runfolder.finished import Finished, trace_id
from ..runfolder.jsonl import scan
from ..runfolder.names import pair_key
from ..runfolder.reader import trajectory_dir
from ..runfolder.records import episode_record


class Sink(Protocol):
    def write(self, t: Finished) -> object: ...
    def close(self) -> None: ...


class SinkFollower:
    """Hands each finished trajectory of a run to the sinks, in order; retries a sink that is down."""

    RETRY_S = 10.0
    MAX_POLLS_UNFILED = 20

    def __init__(self, run_dir: Path, sinks: list[Sink], run_id: str):
        self.run_dir = Path(run_dir)
        self.root = run_root(run_dir)
        self.run_id = run_id
        self.sinks = sinks
        self.offset, self.line = 0, 1
        self.waiting: list[Finished] = []   # read, not yet taken by every sink
        self.unfiled: list[tuple[dict, int]] = []  # episode lines whose queue file has not moved yet, and polls
        self.done: list[set] = [set() for _ in sinks]
        self.retry_at = 0.0

    def poll(self) -> None:
        """Read new episode lines, and pass what is waiting to the sinks (a down sink is retried later)."""
        episodes = self.run_dir / "episodes.jsonl"
        rows, problems, self.offset, self.line = scan(episodes, self.offset, self.line)
        warn_problems(episodes, problems)
        recs = [(rec, f"{episodes}:{n}", 0) for n, (rec, _) in ((n, episode_record(obj)) for n, obj in rows.items())
                if rec is not None and rec["outcome"] != "error" and isinstance(rec.get("traj"), str)]
        unfiled, self.unfiled = self.unfiled + recs, []
        for rec, where, polls in unfiled:
            task = self._task(rec)
            if task is None and polls < self.MAX_POLLS_UNFILED:  # the queue writes the line, then moves the file
                self.unfiled.append((rec, where, polls + 1))
                continue
            finished = self._finished(rec, where, task or {})
            if finished is not None:
                self.waiting.append(finished)
        if not self.waiting or time.monotonic() < self.retry_at:
            return
        for i, sink in enumerate(self.sinks):
            for t in self.waiting:
                if t.trace_id in self.done[i]:
                    continue
                try:
                    sink.write(t)
                except SinkUnavailable as e:
                    warn(f"{type(sink).__name__}: {e}; trying again in {self.RETRY_S:.0f} s")
                    self.retry_at = time.monotonic() + self.RETRY_S
                    break
                except CuaError as e:  # this trajectory cannot go there (say, recorded without its prompt)
                    warn(f"{type(sink).__name__}: {clip(t.record['task_id'], 100)!r} sample {t.record['sample']}: {e}")
                self.done[i].add(t.trace_id)
        self.waiting = [t for t in self.waiting if not all(t.trace_id in d for d in self.done)]

    def _task(self, rec: dict) -> dict | None:
        """The pair's task, from its queue file once it is done; None while it is not there."""
        for state in ("done", "failed"):
            try:
                item = json.loads(read_in(self.root, f"queue/{state}/{pair_key(rec['task_id'], rec['sample'])}.json"))
            except (OSError, Refused, ValueError, RecursionError):
                continue
            if isinstance(item, dict):
                return {k: item.get(k) for k in ("task_id", "domain", "instruction", "config", "evaluator")}
        return None

    def _finished(self, rec: dict, where: str, task: dict) -> Finished | None:
        traj_dir = trajectory_dir(self.root, rec, where)
        if traj_dir is None:
            return None
        return Finished(self.run_id, self.run_dir, rec, Path(traj_dir), task,
                        trace_id(self.run_id, rec["task_id"], rec["sample"], rec["attempt"]))

    def start(self, every_s: float = 2.0) -> None:
        """Follow the run in a thread of its own, so slow sinks never hold up the rollout."""
        self._stop = threading.Event()

        def follow():
            while not self._stop.wait(every_s):
                self.poll()

        self._thread = threading.Thread(target=follow, name="cua-sinks", daemon=True)
        self._thread.start()

    def finish(self, wait_s: float = 10.0) -> int:
        """Stop following; pass on what is left, waiting up to `wait_s` for a sink that is down.
        Returns how many trajectories some sink still lacks (a `--resume` catches them up)."""
        self._stop.set()
        self._thread.join()
        deadline = time.monotonic() + wait_s
        while True:
            self.retry_at = 0.0
            self.poll()
            if not self.waiting and not self.unfiled or time.monotonic() > deadline:
                break
            time.sleep(min(self.RETRY_S, 2.0))
        for sink in self.sinks:
            sink.close()
        return len(self.waiting) + len(self.unfiled)
