"""A stop that reaches an episode's waits at once, on an event loop.

Blocking code polls `should_stop` between requests and in its pauses. An
episode on an event loop registers whatever it waits on (an answer, a
connection, a pause) here instead, and `set` cancels all of it: the waiter
raises errors.Stopped at once, even while a server holds its request.
"""

import asyncio
import math
import time

from ..errors import Stopped


class Interrupt:
    """Set once, from the loop's thread; every wait registered here ends as Stopped."""

    def __init__(self):
        self._set = False
        self._waits: set[asyncio.Future] = set()

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waits, self._waits = self._waits, set()
        for f in waits:
            f.cancel()


async def wait(fut: asyncio.Future, deadline: float = math.inf, interrupt: Interrupt | None = None):
    """`fut`'s result; TimeoutError once `deadline` (a time.monotonic()) passes, Stopped once `interrupt`
    is set. Either way `fut` is cancelled. A cancellation of the waiting task itself goes through."""
    loop = asyncio.get_running_loop()
    expired = False

    def expire():
        nonlocal expired
        if not fut.done():
            expired = True
            fut.cancel()

    timer = loop.call_later(max(0.0, deadline - time.monotonic()), expire) if deadline < math.inf else None
    if interrupt is not None:
        if interrupt.is_set():
            fut.cancel()
        else:
            interrupt._waits.add(fut)
    try:
        return await fut
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():
            raise
        if expired:
            raise TimeoutError from None
        if interrupt is not None and interrupt.is_set():
            raise Stopped() from None
        raise
    finally:
        if timer is not None:
            timer.cancel()
        if interrupt is not None:
            interrupt._waits.discard(fut)


async def sleep(delay: float, interrupt: Interrupt | None = None, deadline: float = math.inf) -> None:
    """Sleep `delay` s, or until `deadline` (the next try then finds the episode over); Stopped once
    `interrupt` is set."""
    try:
        await wait(asyncio.get_running_loop().create_future(), min(time.monotonic() + delay, deadline), interrupt)
    except TimeoutError:
        pass
