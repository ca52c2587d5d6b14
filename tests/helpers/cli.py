"""The real `cua` command line in a child process: run to its end, or started and signalled."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.processes import kill_group

ROOT = Path(__file__).resolve().parent.parent.parent
CUA = [sys.executable, "-m", "cua_cli"]


def run_cua(*args, cwd=ROOT, env=None, timeout=300):
    """Run the real `cua` command line in a child process, to its end (a test fails with the stacks
    of a `cua` that outlives `timeout`)."""
    p = start_cua(*args, cwd=cwd, env=dict(os.environ, **(env or {})))
    try:
        out, err = finish(p, timeout)
    finally:
        kill_group(p)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def finish(p: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Wait for a started `cua` to end; its (stdout, stderr). One still running after `timeout`
    seconds fails the test with what every thread of it was doing (`cua` dumps them on SIGUSR1)."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p, signal.SIGUSR1)
        try:
            err = p.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:
            err = "(no stacks: it did not answer SIGUSR1 either)"
        kill_group(p)
        pytest.fail(f"cua {' '.join(map(str, p.args[3:]))} still ran after {timeout:g} s; its threads:\n"
                    f"{(err or '')[-20000:]}", pytrace=False)


def start_cua(*args, cwd=None, env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
              new_session=True):
    """Start the real `cua` in a child process (its own process group unless `new_session` is False),
    its output on pipes; the Popen. Signal its group with `signal_group` (helpers.processes); end it
    with `kill_group` in a `finally`."""
    full_env = dict(os.environ, **env) if env else None
    return subprocess.Popen([*CUA, *args], cwd=cwd, env=full_env, stdout=stdout, stderr=stderr, text=text,
                            start_new_session=new_session)

