"""Least-loaded endpoint choice, shared by every runner process of a rollout.

The counts live in shared memory created by the main process, so a new
episode goes to the server with the fewest episodes in flight across the
whole pool. A server that failed is skipped for a cool-down.
"""

import time
from contextlib import contextmanager

COOL_DOWN_S = 30.0
# A runner killed inside a count update (SIGKILL, the OOM killer) leaves the lock held for good.
# The counts only steer routing, so after this long the others go on without the lock.
LOCK_WAIT_S = 2.0


class Router:
    # Calls whose caller needs no answer: a copy in another process may run them later, in order.
    ONE_WAY = ("take", "release", "failed")

    def __init__(self, n: int, ctx=None):
        import multiprocessing as mp
        ctx = ctx or mp.get_context("spawn")
        self.load = ctx.Array("i", n)        # episodes in flight per endpoint
        self.total = ctx.Array("i", n)       # episodes ever sent: breaks ties so idle servers take turns
        self.bad_until = ctx.Array("d", n)   # time.time() until which an endpoint is skipped
        self.orphaned = False                # this process found the lock held by a dead runner

    @contextmanager
    def _counts(self):
        """The three count arrays, unlocked views (each item access of a synchronized array would
        take the lock again), under the lock while it can be had."""
        lock = self.load.get_lock()
        got = not self.orphaned and lock.acquire(timeout=LOCK_WAIT_S)
        self.orphaned = not got
        try:
            yield self.load.get_obj(), self.total.get_obj(), self.bad_until.get_obj()
        finally:
            if got:
                lock.release()

    def acquire(self, exclude: int | None = None) -> int:
        """The least-loaded healthy endpoint (or the least-bad one if all failed)."""
        with self._counts() as (load, total, bad_until):
            now = time.time()
            i = min(range(len(load)), key=lambda i: (i == exclude, bad_until[i] > now, load[i], total[i], i))
            load[i] += 1
            total[i] += 1
            return i

    def take(self, i: int) -> None:
        with self._counts() as (load, total, _):
            load[i] += 1
            total[i] += 1

    def release(self, i: int) -> None:
        with self._counts() as (load, _, _):
            load[i] = max(load[i] - 1, 0)

    def failed(self, i: int) -> None:
        with self._counts() as (_, _, bad_until):
            bad_until[i] = time.time() + COOL_DOWN_S
