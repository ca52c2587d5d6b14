"""One runner: episode slots (threads) sharing one queue, wherever the backend runs it.

Episodes spend their time waiting on HTTP, so threads carry the concurrency;
a backend runs several runners to spread the CPU work. A slot claims a pair,
plays it and files the result; a claim never outlives its slot's attempt.
"""

import os
import socket
import threading
import time
from dataclasses import dataclass

from .._util.diag import warn
from ..config import Config
from ..errors import BadTask, UnwritableRun
from ..runfolder.records import error_line
from ..runfolder.writer import RunDir
from ..tasks import task_from_dict
from .player import Player


@dataclass
class RunnerSpec:
    cfg: Config
    run_path: str
    env_url: str
    secrets: dict
    slots: int          # concurrent episodes
    watch: bool         # keep polling the queue once it is empty


class Runner:
    def __init__(self, spec: RunnerSpec, shared=None):
        cfg = self.cfg = spec.cfg
        self.spec = spec
        self.folder = RunDir.open(spec.run_path)
        self.queue = self.folder.queue(cfg.runner.max_attempts, cfg.runner.lease_ttl_s)
        self.player = Player(cfg, spec.env_url, spec.secrets, shared)
        self.idle = IdleSlots(self.queue, cfg.runner)
        self.refused: str | None = None  # a file or folder of the run it would not write through: it stopped

    def run(self, stop: threading.Event) -> None:
        """Play pairs until the queue is done (or `stop` is set)."""
        finished = threading.Event()

        def heartbeat():
            while not finished.wait(self.cfg.runner.lease_ttl_s / 4):
                self.queue.heartbeat()

        threading.Thread(target=heartbeat, daemon=True).start()
        slots = [threading.Thread(target=self._slot, args=(stop, lane_name(i))) for i in range(self.spec.slots)]
        for t in slots:
            t.start()
        for t in slots:
            t.join()
        finished.set()

    def _slot(self, stop, lane: str) -> None:
        try:
            self._play_pairs(stop, lane)
        except UnwritableRun as e:  # the queue or episodes.jsonl: no pair can be filed, so the runner stops
            if self.refused is None:  # said once, not by every slot that meets it on its way out
                self.refused = str(e)
                refused_stop(e)
            stop.set()

    def _play_pairs(self, stop, lane: str) -> None:
        idle_since = time.monotonic()
        while not stop.is_set():
            item = self.queue.claim()
            if item is None:
                if not self.spec.watch and self.idle.drained():
                    return
                self.idle.maybe_reclaim()
                stop.wait(self.cfg.runner.poll_s)
                continue
            waited, task = time.monotonic() - idle_since, checked_task(self.queue, item)
            if task is not None:
                with self.folder.traj(item) as traj:
                    rec = self.player.play(item, task, traj, stop.is_set)
                file_attempt(self.queue, item, placed(rec, lane, waited))
                idle_since = time.monotonic()


def refused_stop(e: UnwritableRun) -> None:
    """Say why a runner stops on a run file or folder it would not write through, and what becomes of its pairs."""
    warn(f"{e}. The runner stops; the pairs it holds stay claimed (an attempt whose line could not be written is "
         "not lost: `cua rollout --resume` plays it again)")


def lane_name(slot: int) -> str:
    """The slot an attempt was played in, as the timeline draws it: host/process/slot."""
    return f"{socket.gethostname()}/{os.getpid()}/{slot}"


def placed(rec: dict, lane: str, waited_s: float) -> dict:
    """The episode line with its lane and how long its slot waited for the claim (outside its duration)."""
    return {**rec, "lane": lane, "claim_wait_s": round(waited_s, 4)}


def checked_task(queue, item: dict):
    """A claimed pair's task; a malformed one is filed as bad_task, never left claimed, and gives None."""
    try:
        return task_from_dict(item)
    except BadTask as e:
        queue.finish(item, error_line(item, "bad_task", f"bad task: {e}"), give_up=True)
        return None


def file_attempt(queue, item: dict, rec: dict) -> None:
    """Move a pair on by its attempt's episode line: an error is tried again, uncounted if interrupted."""
    queue.finish(item, rec, retry=rec["outcome"] == "error", count_error=rec["stop_reason"] != "interrupted",
                 give_up=rec["stop_reason"] in ("bad_task", "abandoned"))


class IdleSlots:
    """What slots that found nothing to claim look at, once per interval however many of them ask."""

    def __init__(self, queue, rcfg):
        self.queue, self.rcfg = queue, rcfg
        self._last_reclaim = 0.0
        self._reclaim_lock = threading.Lock()
        self._idle_checked = (-1e9, False)  # (when, whether the queue was drained)
        self._idle_lock = threading.Lock()

    def drained(self) -> bool:
        """Nothing pending or claimed: looked at once per poll interval."""
        with self._idle_lock:
            if time.monotonic() - self._idle_checked[0] >= self.rcfg.poll_s / 2:
                self._idle_checked = (time.monotonic(), self.queue.idle())
            return self._idle_checked[1]

    def maybe_reclaim(self) -> None:
        # A lease expires only after lease_ttl_s, so one scan every quarter of it is enough;
        # the backend reclaims the claims of runners it saw die at once.
        with self._reclaim_lock:
            if time.monotonic() - self._last_reclaim < self.rcfg.lease_ttl_s / 4:
                return
            self._last_reclaim = time.monotonic()
        self.queue.reclaim()
