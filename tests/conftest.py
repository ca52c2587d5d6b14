import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests: modest example counts by default so the suite stays fast;
# `pytest --hypothesis-profile=deep` searches much harder.
settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")

ROOT = Path(__file__).resolve().parent.parent
CUA = [sys.executable, "-m", "cua_cli"]


def run_cua(*args, cwd=ROOT, env=None, timeout=300):
    """Run the real `cua` command line in a child process."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([*CUA, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def wait_for(cond, timeout: float = 120, what: str = "condition"):
    """Poll `cond` until it holds; fail the test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def write(tmp_path):
    def _write(name, text):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    return _write
