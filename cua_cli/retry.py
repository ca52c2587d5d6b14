"""Retries with exponential backoff for calls to remote services."""

import random
import time

import requests


class InfraError(Exception):
    """A remote service (env, model server, evaluator) failed; not the agent's fault."""


class Stopped(Exception):
    """The run is stopping (Ctrl-C): end the episode as interrupted."""


def transient(exc: Exception) -> bool:
    """Worth another try: network trouble, timeouts, 429 and 5xx answers."""
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return True
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return False


def with_retries(fn, retries: int, what: str, should_stop=lambda: False, base_delay: float = 0.5):
    """Call fn(); retry transient failures `retries` times, then raise InfraError."""
    for attempt in range(retries + 1):
        if should_stop():
            raise Stopped()
        try:
            return fn()
        except requests.RequestException as e:
            if not transient(e) or attempt == retries:
                raise InfraError(f"{what}: {describe(e)}") from e
        # Jitter keeps many runners from retrying in lockstep.
        time.sleep(base_delay * 2 ** attempt * (0.5 + random.random()))


def describe(exc: Exception) -> str:
    """A short, readable error text (the server's own message when it sent one)."""
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        r = exc.response
        try:
            msg = r.json().get("error") or r.text[:300]
        except ValueError:
            msg = r.text[:300]
        return f"HTTP {r.status_code}: {msg}"
    if isinstance(exc, requests.ConnectionError):
        return f"connection failed ({type(exc).__name__})"
    if isinstance(exc, requests.Timeout):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"
