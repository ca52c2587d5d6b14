"""`cua rollout` end to end: real MiniWoB++ env server, real runner processes, real signals."""

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
from helpers.cli import kill_group, run_cua, start_cua
from helpers.net import free_port
from helpers.processes import signal_group
from helpers.waiting import wait_for

from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.records import PHASES

pytestmark = pytest.mark.slow  # whole rollouts on real MiniWoB++ (Chromium) in child processes

TASKS = "[click-test, click-test-2, click-button]"


def config(write, body="", env_url="local", seeds="[0, 1]"):
    return write("exp.yaml", f"""
run: {{name: e2e, results_dir: results}}
tasks:
  kind: miniwob
  miniwob: {{names: {TASKS}, seeds: {seeds}}}
env: {{url: "{env_url}", local: {{max_envs: 2}}}}
model: {{provider: random, seed: 1}}
runner: {{num_envs: 2, max_steps: 6}}
{body}""")


def run_dir(tmp_path) -> Path:
    (run,) = (tmp_path / "results").iterdir()
    return run


def check_complete(run: Path):
    """One final line per scheduled pair, no duplicate attempt, nothing left claimed."""
    scheduled = {(r["task_id"], r["sample"]) for r in read_lines(run / "scheduled.jsonl")}
    lines = read_lines(run / "episodes.jsonl")
    attempts = Counter((r["task_id"], r["sample"], r["attempt"]) for r in lines)
    assert max(attempts.values()) == 1, "an attempt was recorded twice"
    final = {}
    for r in lines:
        key = (r["task_id"], r["sample"])
        if key not in final or r["attempt"] > final[key]["attempt"]:
            final[key] = r
    assert set(final) == scheduled
    assert os.listdir(run / "queue" / "claimed") == [] and os.listdir(run / "queue" / "pending") == []
    return final, lines


def test_rollout_writes_run_folder_with_real_rewards(write, tmp_path):
    r = run_cua("rollout", str(config(write)))
    assert r.returncode == 0, r.stderr
    run = run_dir(tmp_path)
    final, lines = check_complete(run)
    assert len(final) == 6
    meta = json.loads((run / "run.json").read_text())
    assert meta["config"]["runner"]["num_envs"] == 2 and meta["run_id"] == run.name
    for rec in final.values():
        assert rec["outcome"] in ("success", "failure")
        assert (rec["outcome"] == "success") == (rec["score"] == 1.0)
        steps = read_lines(run / rec["traj"] / "traj.jsonl")
        assert [s["step"] for s in steps] == list(range(rec["steps"])) and rec["steps"] >= 1
        for s in steps:
            png = (run / rec["traj"] / s["screenshot"]).read_bytes()
            assert png.startswith(b"\x89PNG") and s["action"]
    # MiniWoB's own rewards decide the score: positive raw reward <=> success
    assert all((rec["reward"] > 0) == (rec["outcome"] == "success") for rec in final.values())
    assert any(rec["outcome"] == "success" for rec in final.values()), "random clicks hit click-test's big button"
    assert "scheduled" in r.stdout and "success rate" in r.stdout
    # Every attempt's wall time is split into its phases, in the slot (lane) that played it.
    for rec in lines:
        phases = rec["phases"]
        assert set(phases) == set(PHASES) and min(phases.values()) >= 0
        assert abs(sum(phases.values()) - rec["duration_s"]) < 0.01 + 0.0001 * len(PHASES), rec
        assert phases["allocate_s"] > 0 and phases["observe_s"] > 0 and phases["evaluate_s"] > 0
        assert meta["created_at"] and rec["started_at"] > 1.7e9 and rec["claim_wait_s"] >= 0
    assert len({rec["lane"] for rec in lines}) <= 2  # runner.num_envs


def test_replay_reproduces_actions_and_scores(write, tmp_path):
    assert run_cua("rollout", str(config(write))).returncode == 0
    first = run_dir(tmp_path)
    r = run_cua("rollout", str(config(write)), "--set", "model.provider=replay",
                "--set", f"model.replay_run={first}", "--set", "run.results_dir=replayed")
    assert r.returncode == 0, r.stderr
    (second,) = (tmp_path / "replayed").iterdir()
    a, _ = check_complete(first)
    b, _ = check_complete(second)
    for pair in a:
        steps_a = [s["action"] for s in read_lines(first / a[pair]["traj"] / "traj.jsonl")]
        steps_b = [s["action"] for s in read_lines(second / b[pair]["traj"] / "traj.jsonl")]
        assert steps_a == steps_b, pair
        assert a[pair]["score"] == b[pair]["score"], pair


def test_ctrl_c_then_resume_completes_without_duplicates(write, tmp_path):
    cfg = config(write, seeds="[0, 1, 2, 3]")
    p = start_cua("rollout", str(cfg), cwd=tmp_path)
    try:
        wait_for(lambda: (tmp_path / "results").exists() and any(
            (d / "episodes.jsonl").exists() for d in (tmp_path / "results").iterdir()), what="first episode")
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        kill_group(p)
    assert p.returncode == 130, err
    assert "--resume" in out
    run = run_dir(tmp_path)
    assert os.listdir(run / "queue" / "claimed") == []
    interrupted = [r for r in read_lines(run / "episodes.jsonl") if r["stop_reason"] == "interrupted"]
    assert all(r["outcome"] == "error" for r in interrupted)
    assert len(read_lines(run / "episodes.jsonl")) < 12 or interrupted
    r = run_cua("rollout", str(cfg), "--resume", str(run))
    assert r.returncode == 0, r.stderr
    final, _ = check_complete(run)
    assert len(final) == 12 and all(rec["outcome"] != "error" for rec in final.values())
    assert len(list((tmp_path / "results").iterdir())) == 1, "resume must not start a new run"


def _runner_children(pid):
    return [c for c in psutil.Process(pid).children() if "multiprocessing" in " ".join(c.cmdline())]


def test_sigkilled_runner_pair_finishes_after_reclaim(write, tmp_path):
    cfg = config(write, body="", seeds="[0, 1, 2]")
    p = start_cua("rollout", str(cfg), "--set", "runner.lease_ttl_s=3", "--set", "runner.processes=2", cwd=tmp_path)
    try:
        wait_for(lambda: (tmp_path / "results").exists() and any(
            os.listdir(d / "queue" / "claimed") for d in (tmp_path / "results").iterdir()
            if (d / "queue" / "claimed").exists()), what="a claim")
        run = run_dir(tmp_path)
        claimed = [json.loads(f.read_text()) for f in (run / "queue" / "claimed").iterdir()]
        victim = claimed[0]["lease"]["pid"]
        assert victim in [c.pid for c in _runner_children(p.pid)]
        os.kill(victim, signal.SIGKILL)
        out, err = p.communicate(timeout=180)
    finally:
        kill_group(p)
    assert p.returncode == 0, err
    final, lines = check_complete(run)
    assert len(final) == 9
    lost = final[(claimed[0]["task_id"], claimed[0]["sample"])]
    assert lost["attempt"] >= 1, "the killed runner's pair must have been run again"


def test_env_server_killed_mid_run_errors_are_retried(write, tmp_path):
    port = free_port()
    server_args = ["env-server", "--port", str(port), "--max-envs", "2"]
    server = start_cua(*server_args, cwd=tmp_path)
    cfg = config(write, env_url=f"http://127.0.0.1:{port}", seeds="[0, 1, 2]",
                 body="")
    rollout = None
    try:
        assert "listening" in server.stdout.readline()
        rollout = start_cua("rollout", str(cfg), "--set", "env.retries=1", "--set", "runner.max_attempts=10",
                            "--set", "env.allocate_wait_s=5", cwd=tmp_path)
        wait_for(lambda: (tmp_path / "results").exists() and any(
            (d / "episodes.jsonl").exists() for d in (tmp_path / "results").iterdir()), what="first episode")
        signal_group(server, signal.SIGKILL)
        server.wait()
        time.sleep(3)
        server = start_cua(*server_args, cwd=tmp_path)
        assert "listening" in server.stdout.readline()
        out, err = rollout.communicate(timeout=240)
        assert rollout.returncode == 0, err
    finally:
        for proc in (rollout, server):
            if proc is not None and proc.poll() is None:
                signal_group(proc, signal.SIGKILL)
    run = run_dir(tmp_path)
    final, lines = check_complete(run)
    errors = [r for r in lines if r["outcome"] == "error"]
    assert errors and all(r["stop_reason"] in ("env_error", "eval_error") for r in errors)
    assert all(r["error"] for r in errors)
    assert all(rec["outcome"] != "error" for rec in final.values())


def test_env_token_is_used_and_never_written(write, tmp_path):
    token = "s3cr3t-token-value-xyz"
    env = {"CUA_E2E_TOKEN": token}
    port = free_port()
    server = start_cua("env-server", "--port", str(port), "--token-env", "CUA_E2E_TOKEN", cwd=tmp_path, env=env,
                       stderr=None)
    try:
        assert "listening" in server.stdout.readline()
        cfg = write("tok.yaml", f"""
run: {{name: tok, results_dir: results}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test], seeds: [0]}}}}
env: {{url: "http://127.0.0.1:{port}", token_env: CUA_E2E_TOKEN}}
runner: {{num_envs: 1, max_steps: 3}}
""")
        r = run_cua("rollout", str(cfg), "--set", "env.retries=0", "--set", "runner.max_attempts=1",
                    env={"CUA_E2E_TOKEN": "wrong"})
        final, _ = check_complete(run_dir(tmp_path))
        assert all(rec["outcome"] == "error" and "401" in rec["error"] for rec in final.values())
        r = run_cua("rollout", str(cfg), "--set", "run.results_dir=ok", env=env)
        assert r.returncode == 0, r.stderr
        (run,) = (tmp_path / "ok").iterdir()
        final, _ = check_complete(run)
        assert all(rec["outcome"] != "error" for rec in final.values())
        for f in run.rglob("*"):
            if f.is_file():
                assert token.encode() not in f.read_bytes(), f
        assert token not in r.stdout + r.stderr
    finally:
        signal_group(server, signal.SIGKILL)


def test_watch_picks_up_dropped_task_files(write, tmp_path):
    cfg = config(write, seeds="[0]")
    p = start_cua("rollout", str(cfg), "--watch", "--set", "runner.poll_s=0.2", cwd=tmp_path)
    try:
        wait_for(lambda: (tmp_path / "results").exists() and any(
            (d / "queue" / "done").exists() and len(os.listdir(d / "queue" / "done")) == 3
            for d in (tmp_path / "results").iterdir()), what="the config's tasks")
        run = run_dir(tmp_path)
        pending = run / "queue" / "pending"
        task = {"task_id": "dropped/../one", "domain": "click-test", "sample": 0,
                "config": {"miniwob": "click-test", "seed": 7}, "evaluator": {}}
        (pending / "x.json").write_text(json.dumps(task))
        (pending / "bad.json").write_text(json.dumps({"task_id": "bad", "domain": 5}))
        wait_for(lambda: len(os.listdir(run / "queue" / "done")) == 4
                  and len(os.listdir(run / "queue" / "failed")) == 1, what="the dropped tasks")
        assert p.poll() is None, "--watch keeps running on an empty queue"
        os.kill(p.pid, signal.SIGINT)
        p.communicate(timeout=60)
    finally:
        kill_group(p)
    final, _ = check_complete(run)
    assert final[("dropped/../one", 0)]["outcome"] in ("success", "failure")
    assert final[("bad", 0)]["stop_reason"] == "bad_task"
    assert not (run / "trajectories" / "dropped").exists(), "task ids never become raw paths"
