"""One runner process carries thousands of waiting episodes on its event loop (docs/design/runner-loop.md).

The env is a stand-in for DART's env-cluster server (helpers/holding_cluster.py, in a process of its
own) that allocates, then holds every episode's first screenshot request for ever. A thread per episode
would need 2,000 threads here; the loop needs a few, and one connection per waiting episode.
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers.cli import finish, start_cua
from helpers.processes import kill_group, signal_group
from helpers.waiting import wait_for

from cua_cli.rollout.driver import STOP_GRACE_S

EPISODES = 2000
# Threads a runner process may have: the loop's, the queue's, the writers', a few more
# of Python's own. A thread per episode would be EPISODES of them.
MAX_THREADS = 32


def _stats(url: str) -> dict:
    import urllib.request
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture
def holding_cluster():
    p = subprocess.Popen([sys.executable, str(Path(__file__).parent / "helpers" / "holding_cluster.py")],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        yield f"http://127.0.0.1:{int(p.stdout.readline())}"
    finally:
        kill_group(p)
        p.wait()


@pytest.mark.slow  # 2,000 episodes on a busy machine
def test_one_runner_process_carries_2000_waiting_episodes_and_a_stop_ends_them_all_within_the_grace(
        holding_cluster, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": f"held-{i}", "domain": "held"}) + "\n" for i in range(EPISODES)))
    config = tmp_path / "held.yaml"
    config.write_text(f"""
run: {{name: held, results_dir: {tmp_path}/results}}
tasks: {{kind: jsonl, jsonl: {tasks}}}
env: {{url: "{holding_cluster}", retries: 0, timeout_s: 600}}
model: {{provider: random}}
runner: {{num_envs: {EPISODES}, processes: 1, step_timeout_s: 600, sample_s: 0}}
""")
    rollout = start_cua("rollout", str(config))
    try:
        wait_for(lambda: _stats(holding_cluster)["held"] == EPISODES or rollout.poll() is not None, 600,
                 f"{EPISODES} episodes waiting on their screenshots")
        assert rollout.poll() is None, rollout.communicate()[1][-3000:]
        (runner,) = [p for p in psutil.Process(rollout.pid).children() if "spawn_main" in " ".join(p.cmdline())]
        assert runner.num_threads() <= MAX_THREADS
        assert runner.num_fds() > EPISODES  # a connection per waiting episode: no limit of 1,024 files stopped it

        signal_group(rollout, signal.SIGINT)
        stopped = time.monotonic()
        _, err = finish(rollout, STOP_GRACE_S + 120)
        took = time.monotonic() - stopped
    finally:
        kill_group(rollout)
    assert rollout.returncode == 130, err[-3000:]
    assert "stopping now" not in err and took < STOP_GRACE_S + 60, err[-3000:]  # ended, not killed after the grace
    (run,) = (tmp_path / "results").iterdir()
    lines = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == EPISODES and {e["stop_reason"] for e in lines} == {"interrupted"}
    assert _stats(holding_cluster) == {"allocated": EPISODES, "held": EPISODES, "released": EPISODES}
    pending = list((run / "queue" / "pending").iterdir())
    assert len(pending) == EPISODES and not list((run / "queue" / "claimed").iterdir())  # played again on --resume
