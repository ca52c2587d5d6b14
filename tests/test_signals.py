"""Every stop signal ends a command cleanly: `cua rollout` under SIGTERM, SIGHUP and any mix of
signals (real runner processes, the real built-in MiniWoB env server), and the long commands."""

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import psutil
import pytest
from helpers.cli import ROOT, finish, kill_group, run_cua, start_cua
from helpers.envserver import UNSET_TOKEN_ENV, start_env_server, stop_env_server
from helpers.processes import signal_group
from helpers.waiting import wait_for

from cua_cli._util.httpclient import Client
from cua_cli._util.procgroup import kill_group as stop_group
from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.leases import still_held

# Generous: the suite must pass on a loaded 2-core machine. A hang shows as a timeout here.
ENDS_WITHIN_S = 120


@pytest.fixture(scope="module")
def env_url():
    # A second signal stops runners at once, and they cannot release their envs: the idle timeout does,
    # as the README asks of every env server. A loaded machine may well deliver both signals mid-episode.
    server, url = start_env_server(max_envs=3, token_env=UNSET_TOKEN_ENV, idle_timeout_s=30)
    yield url
    stop_env_server(server)


def _config(tmp_path, env_url, seeds=4):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"""
run: {{name: sig, results_dir: {tmp_path}/results}}
tasks:
  kind: miniwob
  miniwob: {{names: [click-test-2, click-button], seeds: [{", ".join(map(str, range(seeds)))}]}}
env: {{url: "{env_url}"}}
model: {{provider: random, seed: 1}}
runner: {{num_envs: 3, max_steps: 8, processes: 2}}
""")
    return cfg


def _run(tmp_path):
    (run,) = (tmp_path / "results").iterdir()
    return run


def _episodes(tmp_path) -> int:
    d = tmp_path / "results"
    runs = list(d.iterdir()) if d.exists() else []
    return len(read_lines(runs[0] / "episodes.jsonl", warn=False)) if runs and (runs[0] / "episodes.jsonl").exists() else 0


def _start(cfg, *args):
    return start_cua("rollout", str(cfg), *args)


def _held_envs(env_url) -> list:
    return Client().get(f"{env_url}/server/list", 10).json()["data"]


def _group_left(pgid) -> list:
    left = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                left.append(p.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return left


def _finish_and_check(cfg, run, env_url, pairs):
    """--resume plays every pair to its end, each final once, no attempt twice, nothing held."""
    r = run_cua("rollout", str(cfg), "--resume", str(run), timeout=600)
    assert r.returncode == 0, r.stderr
    lines = read_lines(run / "episodes.jsonl")
    assert max(Counter((e["task_id"], e["sample"], e["attempt"]) for e in lines).values()) == 1
    final = {}
    for e in lines:
        final[(e["task_id"], e["sample"])] = e
    assert len(final) == pairs and all(e["outcome"] in ("success", "failure") for e in final.values())
    assert os.listdir(run / "queue" / "claimed") == [] and os.listdir(run / "queue" / "pending") == []
    wait_for(lambda: _held_envs(env_url) == [], ENDS_WITHIN_S, "the env server's envs to be released")


@pytest.mark.slow  # whole rollouts on real MiniWoB++ (Chromium) in child processes
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stop_signal_to_the_process_group_ends_the_run_as_ctrl_c_does(tmp_path, env_url, sig, code):
    cfg = _config(tmp_path, env_url)
    p = _start(cfg)
    try:
        wait_for(lambda: _episodes(tmp_path) >= 1, ENDS_WITHIN_S, "a first episode")
        signal_group(p, sig)  # what a batch scheduler, `timeout` or a container stop does
        out, err = p.communicate(timeout=ENDS_WITHIN_S)
    finally:
        kill_group(p)
    assert p.returncode == code, err
    assert "Traceback" not in err and "--resume" in out, err
    # multiprocessing's resource tracker leaves once it reads the end of its pipe, just after the rollout
    wait_for(lambda: _group_left(p.pid) == [], 30, "no process of the rollout to be left")
    run = _run(tmp_path)
    assert os.listdir(run / "queue" / "claimed") == []
    interrupted = [e for e in read_lines(run / "episodes.jsonl") if e["stop_reason"] == "interrupted"]
    assert all(e["outcome"] == "error" for e in interrupted)
    assert "stopping now" not in err, "a healthy env's episodes end at their next step, within the grace"
    assert _held_envs(env_url) == [], "the rollout released its envs before it exited"
    _finish_and_check(cfg, run, env_url, 8)


def _stop_and_check(p, tmp_path, env_url, code):
    out, err = p.communicate(timeout=ENDS_WITHIN_S)
    assert p.returncode == code and "Traceback" not in err, err
    # multiprocessing's resource tracker leaves once it reads the end of its pipe, just after the rollout
    wait_for(lambda: _group_left(p.pid) == [], 30, "no process of the rollout to be left")
    run = _run(tmp_path)
    assert os.listdir(run / "queue" / "claimed") == []
    return run, out, err


@pytest.mark.slow  # whole rollouts on real MiniWoB++ (Chromium) in child processes
def test_any_mix_of_signals_ends_the_run_and_resume_finishes_every_pair_once(tmp_path, env_url):
    """Ctrl-C, then SIGTERM during its clean-up, then Ctrl-C again: a bounded, clean end, named by the first."""
    cfg = _config(tmp_path, env_url)
    p = _start(cfg)
    try:
        wait_for(lambda: _episodes(tmp_path) >= 1, ENDS_WITHIN_S, "a first episode")
        signal_group(p, signal.SIGINT)
        wait_for(lambda: _episodes(tmp_path) >= 2 or p.poll() is not None, ENDS_WITHIN_S, "the clean-up")
        for sig in (signal.SIGTERM, signal.SIGINT):
            if p.poll() is None:
                signal_group(p, sig)
        run, _, _ = _stop_and_check(p, tmp_path, env_url, 130)
    finally:
        kill_group(p)
    assert still_held(run) == [], "envs of runners stopped at once are given back before the rollout exits"
    _finish_and_check(cfg, run, env_url, 8)


@pytest.mark.slow  # whole rollouts on real MiniWoB++ (Chromium) in child processes
def test_a_signal_during_set_up_ends_the_run_before_any_episode(tmp_path, env_url):
    cfg = _config(tmp_path, env_url)
    p = _start(cfg)
    try:
        wait_for(lambda: (tmp_path / "results").exists(), ENDS_WITHIN_S, "the run folder")
        signal_group(p, signal.SIGTERM)
        run, out, _ = _stop_and_check(p, tmp_path, env_url, 143)
    finally:
        kill_group(p)
    assert "--resume" in out
    _finish_and_check(cfg, run, env_url, 8)


def _held_rollout(tmp_path, held: str, code: int = 143):
    """A rollout through a proxy that holds every `held` request ("action" or "allocation"), stopped by one
    SIGTERM once two are held; (the run, cua's stderr, the env server's URL, its config), the server still up."""
    from helpers.faultproxy import FaultProxy

    # Runners stopped at once cannot release their envs: the env server's idle timeout does.
    server, env_url = start_env_server(max_envs=3, token_env=UNSET_TOKEN_ENV, idle_timeout_s=5)
    action = lambda path, body: "execute" in path and b'"screenshot"' not in body  # noqa: E731
    holds = {"action": action, "allocation": lambda path, body: "getAvailableAndLock" in path}[held]
    with FaultProxy(env_url, lambda m, path, body: "hang" if holds(path, body) else "pass", hang_s=3600) as proxy:
        cfg = _config(tmp_path, proxy.url, seeds=1)
        p = _start(cfg, "--set", "runner.step_timeout_s=3600", "--set", "runner.episode_timeout_s=7200",
                   "--set", "env.timeout_s=3600")
        try:
            wait_for(lambda: proxy.faults["hang"] >= 2, ENDS_WITHIN_S, f"{held}s held by the env")
            signal_group(p, signal.SIGTERM)
            run, _, err = _stop_and_check(p, tmp_path, env_url, code)
        finally:
            kill_group(p)
    cfg.write_text(cfg.read_text().replace(proxy.url, env_url))
    return run, err, server, env_url, cfg


@pytest.mark.slow  # whole rollouts on real MiniWoB++ (Chromium) in child processes
def test_episodes_waiting_on_a_held_action_end_at_once_on_one_signal_and_give_their_envs_back(tmp_path):
    """The stop wakes the waits of the runners' event loop: an answer the env will never send is not waited
    for, the episodes end as interrupted within the grace, and their envs are released."""
    run, err, server, env_url, cfg = _held_rollout(tmp_path, "action")
    try:
        assert "stopping now" not in err
        lines = read_lines(run / "episodes.jsonl")
        assert len(lines) == 2 and {e["stop_reason"] for e in lines} == {"interrupted"}
        assert _held_envs(env_url) == [] and still_held(run) == []
        pending = [json.loads(f.read_text()) for f in (run / "queue" / "pending").glob("*.json")]
        assert len(pending) == 2 and all(item["errors"] == 0 for item in pending), "stopped by us, not counted"
        _finish_and_check(cfg, run, env_url, 2)
    finally:
        stop_env_server(server)


@pytest.mark.slow  # whole rollouts on real MiniWoB++ (Chromium) in child processes
def test_episodes_that_do_not_end_after_one_signal_are_stopped_after_a_grace(tmp_path):
    """An allocation is never cut short (the env it locks would be lost): episodes waiting on allocations the
    env holds do not end after one SIGTERM, so the grace ends the run, and the pairs go back uncounted."""
    run, err, server, env_url, cfg = _held_rollout(tmp_path, "allocation")
    try:
        assert "stopping now" in err
        pending = [json.loads(f.read_text()) for f in (run / "queue" / "pending").glob("*.json")]
        assert len(pending) == 2 and all(item["errors"] == 0 for item in pending), "stopped by us, not counted"
        _finish_and_check(cfg, run, env_url, 2)
    finally:
        stop_env_server(server)


@pytest.mark.slow
def test_start_models_stopped_while_its_server_starts_leaves_no_process(tmp_path):
    """SIGTERM, and SIGHUP (a closed terminal, no reload asked for), stop a foreground fleet and its real
    vLLM server's whole process group, even before the server is ready."""
    model = tmp_path / "tiny-vlm"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_vlm.py"), str(model)], check=True,
                   capture_output=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        fleet_file = tmp_path / f"fleet-{sig}.json"
        p = start_cua("start-models", "--cpu", "1", "--model", str(model), "--config",
                      str(ROOT / "configs/fleet-cpu.yaml"), "--fleet", str(fleet_file), "--base-port", "8470")
        pgid = None
        try:
            wait_for(lambda: fleet_file.exists() and json.loads(fleet_file.read_text()).get("pgids"),
                     ENDS_WITHIN_S, "the server to be started")
            (pgid,) = json.loads(fleet_file.read_text())["pgids"]
            wait_for(lambda: _group_left(pgid), ENDS_WITHIN_S, "the server's processes")
            signal_group(p, sig)
            out, err = finish(p, ENDS_WITHIN_S)
        finally:
            kill_group(p)
            if pgid is not None and _group_left(pgid):  # the server has a session of its own: a failed stop leaves it
                stop_group(pgid, 0.0)
        assert p.returncode == 0 and "Traceback" not in err, err
        assert "no server process is left" in out
        assert _group_left(pgid) == [] and not fleet_file.exists()


def _wchan(pid) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read()
    except OSError:
        return ""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_long_command_stopped_by_a_signal_says_so_and_exits_with_its_status(tmp_path, sig):
    """`cua stats` held mid-output (nobody reads its pipe) ends on a stop signal with 128 + signum, not a traceback."""
    run = tmp_path / "big-run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    ids = [f"task-{i:05d}" for i in range(3000)]
    (run / "scheduled.jsonl").write_text("".join(
        json.dumps({"task_id": t, "domain": "d", "sample": 0}) + "\n" for t in ids))
    (run / "episodes.jsonl").write_text("".join(json.dumps(
        {"task_id": t, "domain": "d", "sample": 0, "attempt": 0, "outcome": "failure", "reward": 0, "score": 0.0,
         "steps": 1, "stop_reason": "max_steps", "duration_s": 1.0, "error": None, "traj": None}) + "\n" for t in ids))
    p = start_cua("stats", str(run), "--by", "task", "--format", "json", text=False)
    try:
        wait_for(lambda: "pipe_write" in _wchan(p.pid), ENDS_WITHIN_S, "the output to fill its pipe")
        signal_group(p, sig)
        _, err = p.communicate(timeout=ENDS_WITHIN_S)
    finally:
        kill_group(p)
    assert p.returncode == 128 + sig and b"Traceback" not in err, err
    assert f"interrupted ({signal.Signals(sig).name})".encode() in err


@pytest.mark.slow  # a real env server in a child process for each stop signal
def test_env_server_ends_cleanly_on_every_stop_signal():
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        p = start_cua("env-server", "--port", "0", "--token-env", UNSET_TOKEN_ENV)
        try:
            assert "listening on" in p.stdout.readline()
            signal_group(p, sig)
            _, err = p.communicate(timeout=ENDS_WITHIN_S)
        finally:
            kill_group(p)
        assert p.returncode == 0 and "Traceback" not in err, (sig, err)
        wait_for(lambda: _group_left(p.pid) == [], 30, "no process of the env server to be left")
