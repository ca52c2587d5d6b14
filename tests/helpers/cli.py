"""The real `cua` command line in a child process: run to its end, or started and signalled."""

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CUA = [sys.executable, "-m", "cua_cli"]


def run_cua(*args, cwd=ROOT, env=None, timeout=300):
    """Run the real `cua` command line in a child process, to its end."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([*CUA, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def start_cua(*args, cwd=None, env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
              new_session=True):
    """Start the real `cua` in a child process (its own process group unless `new_session` is False),
    its output on pipes; the Popen. End it with `kill_group` in a `finally`."""
    full_env = dict(os.environ, **env) if env else None
    return subprocess.Popen([*CUA, *args], cwd=cwd, env=full_env, stdout=stdout, stderr=stderr, text=text,
                            start_new_session=new_session)


def kill_group(p: subprocess.Popen, sig=signal.SIGKILL) -> None:
    """Send `sig` to the process group of `p` if `p` still runs: the clean-up after a test of a child."""
    if p.poll() is None:
        os.killpg(p.pid, sig)
