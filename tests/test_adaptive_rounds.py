"""Adaptive rounds in a real --watch rollout: DART's rule decides each task's next samples from its scores."""

import os
import signal
import time

import pytest
from helpers.cli import start_cua
from helpers.waiting import wait_for

from cua_cli.runfolder.jsonl import read_lines

pytestmark = pytest.mark.slow  # a whole --watch rollout on real MiniWoB++ (Chromium)


def test_watch_rollout_runs_dart_rounds(write, tmp_path):
    # Whatever the random baseline scores, each task's second round must be what DART's rule gives for it
    # (min_failure_steps 0: every failure counts, so the rate is the plain mean of the first round).
    cfg = write("rounds.yaml", f"""
run: {{name: rounds, results_dir: {tmp_path}/results}}
tasks:
  kind: miniwob
  miniwob: {{names: [click-test], seeds: [0, 1]}}
  adaptive: {{rounds: 2, rollout_n: 3, threshold: 0.3, min_failure_steps: 0}}
env: {{url: local, local: {{max_envs: 2}}}}
model: {{provider: random, seed: 4}}
runner: {{num_envs: 2, max_steps: 1, poll_s: 0.2}}
""")
    p = start_cua("rollout", str(cfg), "--watch", new_session=False)
    try:
        def scheduled():
            runs = list((tmp_path / "results").glob("*/scheduled.jsonl"))
            return read_lines(runs[0]) if runs else []

        wait_for(lambda: len(scheduled()) > 6, 240, "the second round")
        run = next((tmp_path / "results").iterdir())
        wait_for(lambda: len(read_lines(run / "episodes.jsonl")) >= len(scheduled()), 240, "the second round's end")
        time.sleep(1.0)  # no third round comes
        final = {(r["task_id"], r["sample"]): r for r in read_lines(run / "episodes.jsonl")}
        sched = scheduled()
        per_task = {t: sorted(s["sample"] for s in sched if s["task_id"] == t)
                    for t in ("click-test@0", "click-test@1")}
        for task, samples in per_task.items():
            first = [final[(task, s)]["score"] for s in range(3)]
            rate = sum(first) / 3
            expected = 3 if rate < 0.3 or rate == 0 else max(1, int(9 / rate - 7))  # DART's rule, with these constants
            assert samples == list(range(3 + expected)), (task, first, samples)
    finally:
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    assert "adaptive round 2/2" in err
