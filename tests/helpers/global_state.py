"""A pytest plugin (conftest.py loads it): the process-wide state one test must not leak into the
next. Signal handlers, environment variables and the working directory are put back after every
test; at the end of the session the run fails if the test runner was left changed in a way no
single test could undo: a handler of another library installed (Ray's SIGTERM handler exits the
runner from inside whichever test the signal lands in), Ray initialised in this process, or the
runner moved to a process group of its own (Ray does that to reap its nodes)."""

import os
import signal
import sys

import pytest

CATCHABLE = tuple(s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP))
PYTEST_OWN = "PYTEST_CURRENT_TEST"  # pytest sets it for each phase of a test and removes it itself
_BASELINE = pytest.StashKey[tuple]()


def handlers() -> dict:
    out = {}
    for sig in CATCHABLE:
        try:
            out[sig] = signal.getsignal(sig)
        except (OSError, ValueError):  # a signal the C library keeps for itself
            pass
    return out


def put_back_handlers(before: dict) -> None:
    for sig, handler in before.items():
        if handler is not None and signal.getsignal(sig) != handler:  # None: set outside Python, left as is
            signal.signal(sig, handler)


def put_back_environment(before: dict) -> None:
    for key in set(os.environ) - set(before) - {PYTEST_OWN}:
        del os.environ[key]
    for key, value in before.items():
        if key != PYTEST_OWN and os.environ.get(key) != value:
            os.environ[key] = value


def _name(handler) -> str:
    if isinstance(handler, int):
        return signal.Handlers(handler).name
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', repr(handler))}"


def leftovers(baseline: dict, pgrp: int) -> list[str]:
    """What the session leaves changed in the runner, one sentence each."""
    out = [f"{signal.Signals(sig).name} is handled by {_name(now)} (was {_name(baseline[sig])})"
           for sig, now in handlers().items() if sig in baseline and now != baseline[sig]]
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        out.append("Ray is still initialised in the test process (ray.shutdown() was not called)")
    if os.getpgrp() != pgrp:
        out.append(f"the test runner's process group changed from {pgrp} to {os.getpgrp()}")
    return out


def pytest_configure(config):
    config.stash[_BASELINE] = (handlers(), os.getpgrp())


@pytest.fixture(autouse=True)
def _global_state_put_back():
    before = (handlers(), dict(os.environ), os.getcwd())
    yield
    put_back_handlers(before[0])
    put_back_environment(before[1])
    if os.getcwd() != before[2]:
        os.chdir(before[2])


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    found = leftovers(*session.config.stash[_BASELINE])
    if found:
        sys.stderr.write("\nThe test session left the test runner changed:\n"
                         + "".join(f"  - {line}\n" for line in found))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
