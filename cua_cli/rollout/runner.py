"""One runner: episode slots on one event loop sharing one queue, wherever the backend runs it.

Episodes spend their time waiting on HTTP, so one loop carries thousands of
them: each is a coroutine, and a slot is a number an attempt holds while it
runs. A dispatcher claims pairs whenever slots are free and starts their
attempts; an ended attempt gives its slot back at once and a filer files its
pair. The queue's file work (claims, filing, heartbeats) runs in a thread of
its own; the attempts' writes run on the loop while the disk keeps up, in a
small pool once it does not (writes.py). A claim never outlives its attempt's
filing.
docs/design/runner-loop.md tells the whole design.
"""

import asyncio
import gc
import os
import resource
import socket
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from .._util.diag import warn
from .._util.event_loop import loop_factory
from .._util.interrupt import Interrupt
from .._util.workers import Workers
from ..config import Config
from ..errors import BadTask, UnwritableRun
from ..runfolder.records import error_line
from ..runfolder.writer import RunDir
from ..tasks import Task, task_from_dict
from .player import Player
from .writes import AttemptWriter, Writes

STOP_POLL_S = 0.1  # how soon the loop sees its process told to stop
YOUNG_COLLECTION = 20_000  # new objects between collections of the youngest generation (Python: 700)
# Pairs claimed, or attempts filed, in one hand-off to the queue's thread: a thousand slots freed at
# once are filled in batches, and the other runners' claims and filings come in between.
QUEUE_BATCH = 32


@dataclass
class RunnerSpec:
    cfg: Config
    run_path: str
    env_url: str
    secrets: dict
    slots: int          # concurrent episodes
    watch: bool         # keep polling the queue once it is empty


class Stop(Protocol):
    """The run's stop as a runner reads it: set once, never cleared."""

    def is_set(self) -> bool: ...


class Plays(Protocol):
    """What plays a claimed pair: a Player here, or runner actors on Ray (backends/ray.py)."""

    async def play(self, item: dict, task: Task, traj: AttemptWriter, interrupt: Interrupt) -> dict | None:
        """The attempt's episode line; None if the backend was killed under it (it puts the claim back)."""


class Runner:
    def __init__(self, spec: RunnerSpec, shared=None, player: Plays | None = None,
                 lane: Callable[[int], str] | None = None):
        cfg = self.cfg = spec.cfg
        self.spec = spec
        self.folder = RunDir.open(spec.run_path)
        self.queue = self.folder.queue(cfg.runner.max_attempts, cfg.runner.lease_ttl_s)
        self.player = player or Player(cfg, spec.env_url, spec.secrets, shared)
        self.lane = lane or lane_name
        self.idle = IdleSlots(self.queue, cfg.runner)
        self.refused: str | None = None  # a file or folder of the run it would not write through: it stopped

    def run(self, stop: Stop) -> None:
        """Play pairs until the queue is done (or `stop` is set)."""
        open_files_to_the_limit()
        gc.freeze()  # what was built before the loop lives as long as it: collections skip it
        # Thousands of episodes each hold a step's young objects at any moment: collecting every 700
        # new ones scanned them again and again (4-5% of a runner's CPU at 1,024 episodes; 0.5% so).
        gc.set_threshold(YOUNG_COLLECTION)
        with asyncio.Runner(loop_factory=loop_factory()) as loop:
            loop.run(self._run(stop))

    async def _run(self, stop: Stop) -> None:
        self.stop = stop
        self.interrupt = Interrupt()
        self.woken = asyncio.Event()  # a slot is free, a pair filed, or the run stops: the dispatcher looks again
        self.to_file: list[tuple[dict, dict]] = []  # ended attempts' (pair, episode line), for the filer
        self.ended = asyncio.Event()  # something to file, or the dispatcher is done: the filer looks again
        self.queue_thread = Workers(1, "cua-queue")
        self.writes = Writes()
        self.dispatching = True
        helpers = [asyncio.ensure_future(c) for c in (self._watch(), self._heartbeat())]
        filer = asyncio.ensure_future(self._filer())
        try:
            await self._dispatch()
        finally:
            self.dispatching = False
            self.ended.set()
            try:
                await filer  # every ended attempt's pair is filed before the runner goes
            finally:
                for h in helpers:
                    h.cancel()
                self.writes.close()
                self.queue_thread.close()

    async def _queue(self, fn, *args):
        return await self.queue_thread.run(fn, *args)

    async def _watch(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(STOP_POLL_S)
        self._stop()

    def _stop(self) -> None:
        self.interrupt.set()
        self.woken.set()

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.runner.lease_ttl_s / 4)
            await self._queue(self.queue.heartbeat)

    async def _dispatch(self) -> None:
        """Claim pairs whenever slots are free and play them there, until the queue is done or the run
        stops; then wait for the attempts still running (a stop ends them as interrupted)."""
        now = time.monotonic()
        free = [(i, now) for i in reversed(range(self.spec.slots))]  # (slot, free since)
        running: set[asyncio.Future] = set()
        while not self.interrupt.is_set():
            if not free:
                await self._woken()
                continue
            try:
                claimed = await self._queue(claim_tasks, self.queue, min(len(free), QUEUE_BATCH))
                if not claimed:
                    # Nothing pending or claimed (pairs still to file are claimed: one may come back).
                    if not self.spec.watch and await self._queue(self.queue.idle):
                        break
                    await self._queue(self.idle.maybe_reclaim)
                    await self._woken(self.cfg.runner.poll_s)
                    continue
                if self.interrupt.is_set() or self.stop.is_set():
                    # Told to stop as it claimed: another runner may have just put these pairs back
                    # on its way out. Giving them back unplayed leaves no line of an attempt never begun.
                    await self._queue(release_all, self.queue, [item for item, _ in claimed])
                    break
            except UnwritableRun as e:  # the queue's files: no pair can be claimed or filed
                self._refuse(e)
                break
            for item, task in claimed:
                if task is None:
                    continue
                slot, since = free.pop()
                attempt = asyncio.ensure_future(self._attempt(item, task, slot, time.monotonic() - since))
                running.add(attempt)

                def ended(a, slot=slot):
                    running.discard(a)
                    free.append((slot, time.monotonic()))
                    self.woken.set()
                attempt.add_done_callback(ended)
        if running:
            await asyncio.wait(running)

    async def _woken(self, timeout: float | None = None) -> None:
        """Until an attempt ends (a slot is free, its pair may be pending again) or the run stops, or
        `timeout` s pass."""
        try:
            await asyncio.wait_for(self.woken.wait(), timeout)
        except TimeoutError:
            pass
        self.woken.clear()

    async def _attempt(self, item: dict, task, slot: int, waited: float) -> None:
        traj = self.folder.traj(item)
        try:
            rec = await self.player.play(item, task, self.writes.attempt(traj), self.interrupt)
        finally:
            traj.close()
        if rec is not None:  # the slot is free again at once: its next claim never waits behind a filing
            self.to_file.append((item, placed(rec, self.lane(slot), waited)))
            self.ended.set()

    async def _filer(self) -> None:
        """File ended attempts' pairs, a batch per hand-off, until the dispatcher is done and all are filed."""
        try:
            while self.to_file or self.dispatching:
                if not self.to_file:
                    self.ended.clear()
                    await self.ended.wait()
                    continue
                batch, self.to_file = self.to_file[:QUEUE_BATCH], self.to_file[QUEUE_BATCH:]
                refused = await self._queue(file_attempts, self.queue, batch)
                if refused is not None:  # episodes.jsonl or the queue: no pair can be filed, so the runner stops
                    self._refuse(refused)
                self.woken.set()  # a pair back in pending, or the last claim gone: the dispatcher looks again
        except BaseException:
            self._stop()  # a bug: no attempt is started that could not be filed
            raise

    def _refuse(self, e: UnwritableRun) -> None:
        if self.refused is None:  # said once, not by every attempt that meets it on its way out
            self.refused = str(e)
            refused_stop(e)
        self._stop()


def open_files_to_the_limit() -> None:
    """Every episode waiting on a server holds a connection: let this process open as many files as
    the system lets it (the soft limit is often 1,024; the hard one far above)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass  # a hard limit the kernel caps lower (nr_open): keep the soft one


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


def claim_tasks(queue, n: int) -> list[tuple[dict, Task | None]]:
    """Up to `n` claimed pairs with their tasks (none: nothing pending). A malformed task is filed as
    bad_task, never left claimed, and comes with None."""
    return [(item, checked_task(queue, item)) for item in queue.claim_some(n)]


def checked_task(queue, item: dict):
    """A claimed pair's task; a malformed one is filed as bad_task, never left claimed, and gives None."""
    try:
        return task_from_dict(item)
    except BadTask as e:
        queue.finish(item, error_line(item, "bad_task", f"bad task: {e}"), give_up=True)
        return None


def release_all(queue, items: list[dict]) -> None:
    for item in items:
        queue.release(item)


def file_attempts(queue, batch: list[tuple[dict, dict]]) -> UnwritableRun | None:
    """File each (pair, episode line); the first refusal, if any (the others are tried all the same)."""
    refused = None
    for item, rec in batch:
        try:
            file_attempt(queue, item, rec)
        except UnwritableRun as e:
            refused = refused or e
    return refused


def file_attempt(queue, item: dict, rec: dict) -> None:
    """Move a pair on by its attempt's episode line: an error is tried again, uncounted if interrupted."""
    queue.finish(item, rec, retry=rec["outcome"] == "error", count_error=rec["stop_reason"] != "interrupted",
                 give_up=rec["stop_reason"] in ("bad_task", "abandoned"))


class IdleSlots:
    """What a dispatcher that found nothing to claim does: scan for expired claims, once per interval
    however often it asks (in the queue's thread, its only caller)."""

    def __init__(self, queue, rcfg):
        self.queue, self.rcfg = queue, rcfg
        self._last_reclaim = 0.0

    def maybe_reclaim(self) -> None:
        # A lease expires only after lease_ttl_s, so one scan every quarter of it is enough;
        # the backend reclaims the claims of runners it saw die at once.
        if time.monotonic() - self._last_reclaim < self.rcfg.lease_ttl_s / 4:
            return
        self._last_reclaim = time.monotonic()
        self.queue.reclaim()
