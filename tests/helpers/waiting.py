"""Waiting for something that happens in another thread or process."""

import time


def wait_for(cond, timeout: float = 120, what: str = "condition"):
    """Poll `cond` until it holds; fail the test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
