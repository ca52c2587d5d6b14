"""The suite's own rules: a test signals only its child's own process group, and leaves the test
runner as it found it (signal handlers, environment, working directory), or the run fails."""

import ast
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.processes import kill_group, owns_group, signal_group

TESTS = Path(__file__).resolve().parent


def test_no_test_signals_a_process_group_but_through_the_helper():
    raw = []
    for path in TESTS.rglob("*.py"):
        if path == TESTS / "helpers" / "processes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "killpg":
                raw.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert raw == [], "signal a child's group with helpers.processes.signal_group"


def _sleeper(**kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], **kw)


def test_a_child_in_the_runners_group_is_never_signalled_as_a_group():
    p = _sleeper(start_new_session=False)
    try:
        assert not owns_group(p)
        with pytest.raises(AssertionError, match="does not lead a process group of its own"):
            signal_group(p, signal.SIGTERM)
        assert p.poll() is None, "nothing was sent"
    finally:
        kill_group(p)  # the child alone: the group is the runner's
    assert p.wait(30) == -signal.SIGKILL


def test_a_child_of_its_own_session_is_signalled_until_it_is_reaped():
    p = _sleeper(start_new_session=True)
    try:
        assert owns_group(p) and signal_group(p, signal.SIGTERM)
        assert p.wait(30) == -signal.SIGTERM
        assert not owns_group(p) and signal_group(p, signal.SIGTERM) is False, "a reaped pid may be another's"
    finally:
        kill_group(p)


LEAKS = """
import os, signal
import pytest

@pytest.fixture(scope="module")
def library():
    signal.signal(signal.SIGTERM, lambda *_: None)  # as Ray's node does, and never undoes
    yield

def test_leaks(library):
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    os.environ["CUA_LEAKED"] = "1"
    os.chdir("/")

def test_sees_none_of_its_neighbours_leaks():
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL
    assert "CUA_LEAKED" not in os.environ and os.getcwd() != "/"
"""


@pytest.fixture
def inner(pytester, monkeypatch):
    """A pytest run of its own, in a child process, with the suite's global-state plugin."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    return lambda source: (pytester.makepyfile(source),
                           pytester.runpytest_subprocess("-p", "helpers.global_state", "-p", "no:cacheprovider"))[1]


def test_a_tests_leaks_are_put_back_and_a_handler_left_installed_fails_the_run(inner):
    r = inner(LEAKS)
    r.assert_outcomes(passed=2)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    err = r.stderr.str()
    assert "SIGTERM is handled by test_a_tests_leaks_are_put_back" in err and "SIGUSR2" not in err


def test_a_session_that_leaves_the_runner_as_it_found_it_passes(inner):
    r = inner(LEAKS.replace("signal.signal(signal.SIGTERM, lambda *_: None)", "pass"))
    r.assert_outcomes(passed=2)
    assert r.ret == pytest.ExitCode.OK and "left the test runner changed" not in r.stderr.str()
