"""Retries with exponential backoff for calls to remote services."""

import math
import random
import time

from ..errors import InfraError, Stopped
from .diag import detail
from .httpclient import BadAnswer, BadStatus, HttpError, NoAnswer, Unreachable
from .interrupt import sleep


def transient(exc: Exception) -> bool:
    """Worth another try: network trouble, timeouts, 429 and 5xx answers, answers outside the protocol."""
    if isinstance(exc, (Unreachable, NoAnswer, BadAnswer)):
        return True
    if isinstance(exc, BadStatus):
        return exc.response.status == 429 or exc.response.status >= 500
    return False


def never_sent(exc: Exception) -> bool:
    """The connection was never established, so the server cannot have seen the request.

    Only these failures may be retried for a request that must not run twice
    (an env action): a reset or a timeout after connecting may come after the
    server acted on it.
    """
    return isinstance(exc, Unreachable)


def with_retries(fn, retries: int, what: str, should_stop=lambda: False, base_delay: float = 0.5,
                 idempotent: bool = True, error: type[InfraError] = InfraError, deadline: float = math.inf):
    """Call fn(); retry transient HTTP failures `retries` times, then raise `error` (whose service failed).

    With idempotent=False only failures that never reached the server are retried.
    No wait between tries lasts past `deadline` (the episode's, a time.monotonic()),
    and a stop ends it at once.
    """
    for attempt in range(retries + 1):
        if should_stop():
            raise Stopped()
        try:
            return fn()
        except HttpError as e:
            delay = _next_try(e, attempt, retries, what, idempotent, error, base_delay)
        pause(delay, should_stop, deadline)


async def with_retries_async(fn, retries: int, what: str, budget, base_delay: float = 0.5, idempotent: bool = True,
                             error: type[InfraError] = InfraError):
    """with_retries for an event loop: `await fn()`, tries and waits bounded by `budget` (its stop, its
    interrupt and its deadline)."""
    for attempt in range(retries + 1):
        if budget.should_stop():
            raise Stopped()
        try:
            return await fn()
        except HttpError as e:
            delay = _next_try(e, attempt, retries, what, idempotent, error, base_delay)
        await sleep(delay, budget.interrupt, budget.deadline)


def _next_try(e: HttpError, attempt: int, retries: int, what: str, idempotent: bool, error, base_delay: float):
    """The wait before trying again after `e`, or `error` raised when no try is left or it is not worth one."""
    retry = transient(e) if idempotent else never_sent(e)
    if not retry or attempt == retries:
        raise error(f"{what}: {describe(e)}") from e
    detail(f"{what}: {describe(e)}; try {attempt + 2} of {retries + 1}")
    # Jitter keeps many runners from retrying in lockstep.
    return base_delay * 2 ** attempt * (0.5 + random.random())


def pause(delay: float, should_stop, deadline: float = math.inf) -> None:
    """Sleep `delay` s, or until the deadline (the next try then finds the episode over), or until told to stop."""
    end = min(time.monotonic() + delay, deadline)
    while (left := end - time.monotonic()) > 0:
        if should_stop():
            raise Stopped()
        time.sleep(min(left, 0.25))


def describe(exc: Exception) -> str:
    """A readable error text (the server's own message when it sent one).

    Not shortened here: callers mask secrets first and shorten after, so no
    cut can leave part of a secret behind.
    """
    if isinstance(exc, BadStatus):
        r = exc.response
        try:
            body = r.json()
            msg = body.get("error") if isinstance(body, dict) else None
        except (ValueError, RecursionError):
            msg = None
        return f"HTTP {r.status}: {msg or r.text}"
    return str(exc) if isinstance(exc, HttpError) else f"{type(exc).__name__}: {exc}"
