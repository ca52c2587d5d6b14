"""OSWorld-format tasks of the `os` domain (tests/data/osworld: a file moved, a gsettings key, a
process killed, a terminal read, an infeasible task) played by `cua rollout` on real desktops
(`env.url: local`: cua's own desktop server, Xvfb sessions in their own namespaces), scored by
OSWorld's evaluator rules on the client."""

import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from helpers.cli import ROOT, kill_group, run_cua, start_cua
from helpers.waiting import wait_for

from cua_cli._util.httpclient import Client

pytestmark = pytest.mark.slow

DATA = ROOT / "tests/data/osworld"
TASKS = sorted(json.loads((DATA / "evaluation_examples/test_all.json").read_text())["os"])


def _config(tmp_path: Path, script: Path, name: str, max_envs: int = 2, timeout_s: int = 120) -> Path:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(f"""
run: {{name: {name}, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/evaluation_examples/test_all.json,
                                  examples_dir: {DATA}/evaluation_examples/examples}}}}
env: {{kind: osworld, url: local, local: {{max_envs: {max_envs}}},
      osworld: {{pause_s: 0.3, files_dir: {DATA}/cache}}}}
model: {{provider: script, script: {script}}}
agent: {{kind: osworld}}
runner: {{num_envs: {max_envs}, max_steps: 4, step_timeout_s: 60, episode_timeout_s: {timeout_s}}}
""")
    return cfg


def _finals(run: Path) -> dict:
    lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    return {r["task_id"]: r for r in lines}


def _xvfbs() -> set:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "Xvfb"}


def test_oracle_scores_every_task_and_doing_nothing_scores_none(tmp_path):
    before = _xvfbs()
    oracle = run_cua("rollout", str(_config(tmp_path, DATA / "oracle.json", "oracle")), timeout=600)
    assert oracle.returncode == 0, oracle.stderr[-3000:]
    run = next((tmp_path / "results").glob("oracle-*"))
    finals = _finals(run)
    assert set(finals) == set(TASKS)
    assert {t: r["outcome"] for t, r in finals.items()} == {t: "success" for t in TASKS}
    assert finals["cua-os-infeasible-firmware"]["stop_reason"] == "fail"  # FAIL is what an infeasible task wants
    held = run_cua("envs", "list", str(run))
    assert held.returncode == 0 and "no env is held" in held.stdout

    # DONE at once: nothing was done, so nothing scores (the infeasible task wanted FAIL, not DONE).
    noop = tmp_path / "noop.json"
    noop.write_text(json.dumps({t: ["```DONE```"] for t in TASKS}))
    result = run_cua("rollout", str(_config(tmp_path, noop, "noop")), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    finals = _finals(next((tmp_path / "results").glob("noop-*")))
    assert {t: (r["outcome"], r["score"]) for t, r in finals.items()} == {t: ("failure", 0.0) for t in TASKS}
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="every desktop of the two runs is gone")


def test_kill_9_mid_episode_then_gc_and_resume_plays_each_pair_once(tmp_path):
    before = _xvfbs()
    slow = tmp_path / "slow.json"  # each task waits a while before its oracle answers: the kill lands mid-episode
    oracle = json.loads((DATA / "oracle.json").read_text())
    slow.write_text(json.dumps({t: ["```python\ntime.sleep(3)\n```"] * 2 + oracle[t] for t in TASKS}))
    cfg = _config(tmp_path, slow, "killed", max_envs=1)
    p = start_cua("rollout", str(cfg), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        leases = lambda: list((tmp_path / "results").glob("killed-*/leases.jsonl"))  # noqa: E731
        wait_for(lambda: leases() and '"held"' in leases()[0].read_text(), timeout=120, what="a desktop is held")
        os.kill(p.pid, signal.SIGKILL)  # the rollout alone: its env server sees its parent go
        p.wait()
    finally:
        kill_group(p)
    run = leases()[0].parent
    gc = run_cua("envs", "gc", str(run))
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert "no env is held" in run_cua("envs", "list", str(run)).stdout
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="the killed run's desktops are gone")

    resumed = run_cua("rollout", str(_config(tmp_path, DATA / "oracle.json", "killed", max_envs=2)),
                      "--resume", str(run), timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    finals = {}
    for r in lines:
        # the killed run's episode ends interrupted, or as an env error once its desktop went with the run
        assert r["outcome"] != "error" or r["stop_reason"] in ("interrupted", "env_error"), r
        finals[r["task_id"]] = r
    assert {t: finals[t]["outcome"] for t in TASKS} == {t: "success" for t in TASKS}
    attempts = [(r["task_id"], r["sample"], r["attempt"]) for r in lines]
    assert len(attempts) == len(set(attempts))  # no attempt played twice
    assert "no env is held" in run_cua("envs", "list", str(run)).stdout
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="every desktop is gone")


def test_a_fixed_list_of_running_desktops_is_served_one_episode_at_a_time(tmp_path):
    """env.osworld.desktops: desktops someone else started (here one of cua's own, allocated by hand),
    each reset by the list's command before every episode."""
    token = "list-test-token"
    server = start_cua("env-server", "--backend", "desktop", "--port", "0", "--max-envs", "1",
                       env={"CUA_ENV_TOKEN": token}, cwd=ROOT)
    try:
        url = server.stdout.readline().split()[-1]  # "cua env-server (desktops) listening on URL"
        started = Client(token).post(f"{url}/start_emulator", 60, json={}).json()["data"]
        desktop = f"http://127.0.0.1:{started['server_port']}"
        cfg = _config(tmp_path, DATA / "oracle.json", "listed")
        text = cfg.read_text().replace("env: {kind: osworld, url: local, local: {max_envs: 2},",
                                       "env: {kind: osworld,")
        text = text.replace("osworld: {pause_s: 0.3,",
                            f'osworld: {{desktops: ["{desktop}"], reset: [bash, -c, "rm -f ~/Documents/notes.txt"],'
                            " pause_s: 0.3,")
        cfg.write_text(text)
        result = run_cua("rollout", str(cfg), timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        finals = _finals(next((tmp_path / "results").glob("listed-*")))
        assert {t: r["outcome"] for t, r in finals.items()} == {t: "success" for t in TASKS}
    finally:
        kill_group(server, signal.SIGTERM)
        server.wait(60)
