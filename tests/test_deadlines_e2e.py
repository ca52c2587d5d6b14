"""`cua rollout` against a model server and an env server whose answers trickle forever
(tests/helpers/servers.py): each attempt ends within its deadlines as the failing service's error,
and `--resume` against healthy servers finishes every pair once."""

import json
import os
import signal
from collections import Counter

import pytest
from helpers.cli import kill_group, run_cua, start_cua
from helpers.servers import ClusterStandIn, ModelStandIn
from helpers.waiting import wait_for

from cua_cli.runfolder.jsonl import read_lines

pytestmark = pytest.mark.slow  # whole rollouts in child processes, each attempt waiting out its deadlines

TASKS = ["a", "b"]
STEP_TIMEOUT_S = 1.0  # every request of the first run; a retry follows each timeout


def _config(tmp_path, env_url, model_url):
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"task_id": t, "instruction": "Click."}) + "\n"
                                                  for t in TASKS))
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"""
run: {{name: drip, results_dir: results}}
tasks: {{kind: jsonl, jsonl: tasks.jsonl}}
env: {{url: "{env_url}", retries: 1}}
model: {{provider: openai, endpoints: ["{model_url}/v1"], name: m, image_uuids: false, retries: 1}}
agent: {{parse_retries: 0}}
runner: {{num_envs: 2, max_steps: 2, step_timeout_s: {STEP_TIMEOUT_S}, episode_timeout_s: 120, max_attempts: 3}}
""")
    return cfg


def _lines(tmp_path):
    """The run folder and its episode lines so far (None and none before it exists)."""
    runs = list((tmp_path / "results").iterdir()) if (tmp_path / "results").exists() else []
    if not runs or not (runs[0] / "episodes.jsonl").exists():
        return None, []
    return runs[0], read_lines(runs[0] / "episodes.jsonl")


def _errored(tmp_path, stop_reason):
    """Every pair has an attempt that ended with `stop_reason`."""
    return {r["task_id"] for r in _lines(tmp_path)[1] if r["stop_reason"] == stop_reason} == set(TASKS)


@pytest.mark.parametrize("slow", ["model", "env"])
def test_a_server_that_trickles_forever_ends_each_attempt_as_its_error_and_resume_finishes_every_pair_once(
        tmp_path, slow):
    with ModelStandIn() as model, ClusterStandIn() as env:
        if slow == "model":
            model.drip = "chunks"            # one-byte chunks, the last one never comes
        else:
            env.drip, env.drip_on = "body", "/server/execute/"  # the env allocates, then its screenshots trickle
        cfg = _config(tmp_path, env.url, model.url)
        stop_reason = f"{slow}_error"
        p = start_cua("rollout", str(cfg), cwd=tmp_path)
        try:
            # Each attempt takes two timed-out requests and a backoff (about 3 s); hung, it would take forever.
            wait_for(lambda: _errored(tmp_path, stop_reason), 120, f"an attempt of each pair to end as {stop_reason}")
            os.kill(p.pid, signal.SIGINT)  # the pairs still have attempts left: stop, as a user would
            out, err = p.communicate(timeout=120)
        finally:
            kill_group(p)
        assert p.returncode == 130, err
        run, lines = _lines(tmp_path)
        for r in lines:
            assert r["outcome"] == "error" and r["stop_reason"] in (stop_reason, "interrupted"), r
            assert r["duration_s"] < 60, r  # about 3 s; far less than the episode's 120 s
            if r["stop_reason"] == stop_reason:
                assert "timed out" in r["error"], r
        if slow == "model":  # the step that waited on the model has its line, saying why it ended
            steps = read_lines(run / lines[0]["traj"] / "traj.jsonl")
            assert steps and "timed out" in steps[-1]["error"]
        assert not env.live, "every env allocated was released"

        model.drip = env.drip = None
        r = run_cua("rollout", str(cfg), "--resume", str(run), "--set", "runner.step_timeout_s=60", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    lines = read_lines(run / "episodes.jsonl")
    assert max(Counter((r["task_id"], r["sample"], r["attempt"]) for r in lines).values()) == 1
    final = {}
    for r in lines:
        if r["task_id"] not in final or r["attempt"] > final[r["task_id"]]["attempt"]:
            final[r["task_id"]] = r
    assert set(final) == set(TASKS) and {r["task_id"] for r in read_lines(run / "scheduled.jsonl")} == set(TASKS)
    assert all(r["outcome"] == "failure" and r["stop_reason"] == "finished" and r["attempt"] >= 1
               for r in final.values()), final
    assert os.listdir(run / "queue" / "claimed") == [] and os.listdir(run / "queue" / "pending") == []
    assert not env.live
