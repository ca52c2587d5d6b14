"""A real 2-server vLLM fleet on the CPU, a real MiniWoB rollout through it.

The model is the tiny random Qwen2-VL that scripts/make_tiny_vlm.py builds;
guided decoding makes its random weights answer well-formed actions.
"""

import json
import os
import shutil
import signal
import time
from collections import Counter

import psutil
import pytest
from helpers.cli import ROOT, kill_group, run_cua, start_cua
from helpers.envserver import start_env_server, stop_env_server
from helpers.faultproxy import FaultProxy, chaos

from cua_cli.rollout.envserver_process import EnvServerProcess
from cua_cli.runfolder.jsonl import read_lines

pytestmark = pytest.mark.slow  # real vLLM fleets


@pytest.fixture(scope="module")
def fleet(tiny_vllm):
    """The suite's shared fleet (two servers): its folder (the model is `tiny-vlm` there), file, and doc."""
    return tiny_vllm.parent, tiny_vllm, json.loads(tiny_vllm.read_text())


def _rollout_config(work, name):
    cfg = work / f"{name}.yaml"
    cfg.write_text(f"""
run: {{name: {name}, results_dir: {work}/results-{name}}}
tasks:
  kind: miniwob
  miniwob: {{names: [click-test, click-button], seeds: [0, 1, 2], episode_max_time: 120}}
env: {{url: local, local: {{max_envs: 2}}}}
model: {{provider: openai, guided: true, max_tokens: 128, retries: 1, timeout_s: 60}}
runner: {{num_envs: 2, max_steps: 4}}
""")
    return cfg


def _final(run):
    final = {}
    for r in read_lines(run / "episodes.jsonl"):
        if (r["task_id"], r["sample"]) not in final or r["attempt"] > final[(r["task_id"], r["sample"])]["attempt"]:
            final[(r["task_id"], r["sample"])] = r
    return final


def _check_load_and_phases(run, doc, final, steps):
    """The rollout sampled every server's real /metrics, and its attempts' model time is their steps'."""
    samples = [m for m in read_lines(run / "metrics.jsonl") if m.get("up")]
    assert {m["server"] for m in samples} == {s["url"] for s in doc["servers"]}
    # Gauges are read (a sample may well never catch a request running: a busy host samples late);
    # the counters show the servers' work whenever they were read.
    assert all(m["running"] >= 0 and m["waiting"] >= 0 and 0 <= m["kv_usage"] <= 1 for m in samples)
    assert samples[-1]["generation_tokens"] > 0 and samples[-1]["prompt_tokens"] > 0
    t = json.loads(run_cua("stats", str(run), "--timing", "--format", "json").stdout)["runs"][0]
    assert 0 < t["model_busy"] <= 1 and t["env"]["model"] > 0 and len(t["model_servers"]) == 2
    model_s = sum(s["timings"]["model_s"] for s in steps)
    assert abs(sum(r["phases"]["model_s"] for r in final.values()) - model_s) < 0.01 * len(steps) + 0.01


def test_fleet_serves_and_reports(fleet):
    work, fleet_file, doc = fleet
    assert len(doc["servers"]) == 2 and doc["servers"][0]["served_model_name"] == "tiny-vlm"
    assert psutil.Process(doc["supervisor_pid"]).is_running()
    r = run_cua("models", "--fleet", str(fleet_file))
    assert r.returncode == 0
    assert r.stdout.count("True") == 2 and "tiny-vlm" in r.stdout


def test_rollout_through_fleet_with_guided_decoding(fleet):
    work, fleet_file, doc = fleet
    r = run_cua("rollout", str(_rollout_config(work, "guided")), "--fleet", str(fleet_file), timeout=600)
    assert r.returncode == 0, r.stderr
    (run,) = (work / "results-guided").iterdir()
    final = _final(run)
    assert len(final) == 6 and all(rec["outcome"] != "error" for rec in final.values())
    steps = [s for rec in final.values() for s in read_lines(run / rec["traj"] / "traj.jsonl")]
    # Guided answers always parse, unless model.max_tokens cut one short of its grammar's end.
    assert steps and all(t["finish_reason"] == "length" for s in steps for t in s.get("failed_tries", [])), steps
    assert any(s["parse_retries"] == 0 and s["action"] for s in steps)
    assert {s["endpoint"] for s in steps} == {f"{s['url']}/v1" for s in doc["servers"]}, "both servers used"
    _check_load_and_phases(run, doc, final, steps)


def test_ray_runner_actors_play_through_the_fleet_with_the_versions_the_driver_reads(fleet, ray_cluster, tmp_path):
    """Runner actors on a real 3-node Ray cluster share the fleet's routing, and every step carries the
    version of the fleet file as the driver reads it: a rewrite mid-run (as a reload makes) reaches them."""
    work, fleet_file, doc = fleet
    cluster, _ = ray_cluster
    mine = tmp_path / "fleet.json"
    shutil.copy(fleet_file, mine)  # the supervisor rewrites its own file; this copy changes only when we say
    serving = {(s["model_version"], s["policy_version"]) for s in json.loads(mine.read_text())["servers"]}
    env, env_url = start_env_server(max_envs=2)
    cfg = tmp_path / "ray.yaml"
    cfg.write_text(f"""
run: {{name: ray, results_dir: {tmp_path}/results}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test, click-button], seeds: [0, 1, 2, 3, 4, 5],
                           episode_max_time: 120}}}}
env: {{url: "{env_url}"}}
model: {{provider: openai, guided: true, max_tokens: 128, retries: 1, timeout_s: 60}}
runner: {{num_envs: 2, max_steps: 4}}
""")
    p = start_cua("rollout", str(cfg), "--fleet", str(mine), "--ray", cluster.address)
    try:
        deadline = time.monotonic() + 300
        while not list((tmp_path / "results").glob("*/trajectories/*/*/traj.jsonl")):
            if p.poll() is not None:
                raise AssertionError(f"the rollout ended before a step (exit {p.returncode}): {p.stderr.read()[-3000:]}")
            assert time.monotonic() < deadline, "no step was taken"
            time.sleep(0.2)
        time.sleep(3)
        reloaded = json.loads(mine.read_text())
        for s in reloaded["servers"]:
            s["model_version"], s["policy_version"] = "/ckpt/step-7", 7
        (tmp_path / "next.json").write_text(json.dumps(reloaded))
        os.replace(tmp_path / "next.json", mine)
        changed = time.time()
        out, err = p.communicate(timeout=600)
    finally:
        kill_group(p)
        stop_env_server(env)
    assert p.returncode == 0, err
    (run,) = (tmp_path / "results").iterdir()
    final = _final(run)
    assert len(final) == 12 and all(rec["outcome"] != "error" for rec in final.values())
    steps = [s for rec in final.values() for s in read_lines(run / rec["traj"] / "traj.jsonl")]
    assert {s["endpoint"] for s in steps} == {f"{s['url']}/v1" for s in doc["servers"]}, "both servers used"
    _check_load_and_phases(run, doc, final, steps)
    # A step's time is when its screenshot came; its model call follows within a moment.
    before = {(s["model_version"], s["policy_version"]) for s in steps if s["time"] < changed - 2}
    after = {(s["model_version"], s["policy_version"]) for s in steps if s["time"] > changed + 2}
    assert before and before <= serving
    assert after == {("/ckpt/step-7", 7)}


def test_killed_server_episodes_move_on_and_supervisor_restarts_it(fleet):
    work, fleet_file, doc = fleet
    victim = doc["servers"][0]
    p = start_cua("rollout", str(_rollout_config(work, "kill")), "--fleet", str(fleet_file),
                  "--set", "runner.max_steps=8", cwd=work, new_session=False)
    try:
        deadline = time.monotonic() + 120
        while not list((work / "results-kill").glob("*/trajectories/*/*/traj.jsonl")):
            assert time.monotonic() < deadline and p.poll() is None, "no step was taken"
            time.sleep(0.2)
        os.kill(victim["pid"], signal.SIGKILL)  # the API server only: its engine is left behind
        out, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    (run,) = (work / "results-kill").iterdir()
    final = _final(run)
    assert len(final) == 6 and all(rec["outcome"] != "error" for rec in final.values())
    deadline = time.monotonic() + 300
    while True:
        servers = json.loads(fleet_file.read_text())["servers"]
        if len(servers) == 2 and any(s["restarts"] >= 1 for s in servers):
            break
        assert time.monotonic() < deadline, "the supervisor did not bring the server back"
        time.sleep(1)
    restarted = next(s for s in servers if s["url"] == victim["url"])
    assert restarted["pid"] != victim["pid"]


def test_trainer_handoff_export_lines_up_and_logprobs_agree(fleet):
    """The trainer's side of the handoff on real parts: a --watch rollout records tokens; its export
    lines up; transformers agrees with vLLM's logprobs (and catches a corrupted one). Unguided: vLLM's
    logprobs of guided answers come after the grammar's mask, which transformers lacks. The rest of the
    loop runs elsewhere, once each: a step of the worked trainer (test_logprobs_check), a reload while
    a rollout runs, with the new policy_version in the rows sampled after it (test_rl_loop_demo), and
    `cua models reload` (test_image_uuids)."""
    work, fleet_file, doc = fleet
    # The shared fleet's servers may have been reloaded by earlier tests: each counts its own reloads.
    versions = {s["policy_version"] for s in json.loads(fleet_file.read_text())["servers"]}
    cfg = _rollout_config(work, "rl")
    p = start_cua("rollout", str(cfg), "--fleet", str(fleet_file), "--watch",
                  "--set", "model.record_tokens=true", "--set", "model.guided=false",
                  "--set", "tasks.rollout_n=2", "--set", "tasks.miniwob.seeds=[0, 1]",
                  "--set", "runner.poll_s=0.5", "--set", "model.retries=3", cwd=work, new_session=False)
    try:
        def steps():  # lines still being written are left for the next look
            return [s for f in (work / "results-rl").glob("*/trajectories/*/*/traj.jsonl")
                    for s in read_lines(f, warn=False)]

        deadline = time.monotonic() + 600
        while not steps() or len(os.listdir(next((work / "results-rl").iterdir()) / "queue" / "done")) < 8:
            assert time.monotonic() < deadline and p.poll() is None, "the first tasks did not finish"
            time.sleep(0.5)
        (run,) = (work / "results-rl").iterdir()
        _check_export(run, work, versions)
        _check_logprobs(run, work)
        os.kill(p.pid, signal.SIGINT)
        p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    all_steps = steps()
    assert {(s["model_version"], s.get("policy_version")) for s in all_steps if s["response"] is not None} <= \
        {(str(work / "tiny-vlm"), v) for v in versions}
    for s in all_steps:
        if s["response"] is None:  # the step the final Ctrl-C cut short: kept, with why
            assert s["error"] == "the run was stopped" and "response_token_ids" not in s
            continue
        assert len(s["response_token_ids"]) == len(s["response_logprobs"]) > 0 and s["finish_reason"]
        assert all(lp <= 0 for lp in s["response_logprobs"]) and s["sampling"]["guided"] is False
        images = [part["file"] for m in s["prompt"] for part in (m["content"] if isinstance(m["content"], list)
                                                                  else []) if part["type"] == "image_file"]
        assert images and images[-1] == s["screenshot"], "the current screenshot is the last image"
        assert "base64" not in json.dumps(s["prompt"]), "images are referenced, never inlined"


def _check_export(run, work, versions):
    """Export the run so far to jsonl and parquet: the same rows, lengths aligned, prompts that decode right."""
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    for fmt in ("jsonl", "parquet"):
        r = run_cua("export", str(run), "--format", fmt, "--out", str(work / f"rows.{fmt}"))
        assert r.returncode == 0, r.stderr
    rows = read_lines(work / "rows.jsonl")
    table = pq.read_table(work / "rows.parquet").to_pylist()
    assert rows and len(table) == len(rows)
    assert [(t["trajectory_id"], t["step"]) for t in table] == [(x["trajectory_id"], x["step"]) for x in rows]
    tokenizer = AutoTokenizer.from_pretrained(work / "tiny-vlm")
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    for row in rows:
        assert len(row["response_token_ids"]) == len(row["response_logprobs"]) > 0
        text = tokenizer.decode(row["prompt_token_ids"])
        # The chat template's: its default system turn, our prompt as the first user turn, the assistant's turn open.
        assert "<|im_start|>user\nYou operate a computer" in text and text.endswith("<|im_start|>assistant\n")
        assert text.count("<|vision_start|>") == len(row["images"]) == sum(
            1 for m in row["prompt_messages"] if isinstance(m["content"], list)
            for part in m["content"] if part["type"] == "image_file")
        assert pad in row["prompt_token_ids"]
        assert row["group_id"] == row["task_id"] and row["policy_version"] in versions
        final = row["outcome"] != "error"
        assert (row["traj_reward"] is not None) == final and (row["traj_reward"] is None or row["traj_reward"] >= 0)
        assert row["step_reward"] == (row["traj_reward"] if row["is_last_step"] else 0.0 if final else None)
    groups = {}
    for row in rows:
        groups.setdefault(row["group_id"], set()).add(row["trajectory_id"])
    assert all(len(t) == 2 for t in groups.values()), "rollout_n=2: two samples per group"


def _check_logprobs(run, work):
    r = run_cua("check-logprobs", str(run), "--model", str(work / "tiny-vlm"), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    print("check-logprobs:", r.stdout.strip().splitlines()[-1])
    bad = work / "corrupted"
    shutil.copytree(run, bad, ignore=shutil.ignore_patterns("queue"))
    for traj in bad.glob("trajectories/*/*/traj.jsonl"):  # whichever calls it checks first, one is off
        lines = [json.loads(x) for x in traj.read_text().splitlines()]
        lines[0]["response_logprobs"][0] += 0.5
        traj.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = run_cua("check-logprobs", str(bad), "--model", str(work / "tiny-vlm"), "--max-steps", "6", timeout=900)
    assert r.returncode == 1 and "logprobs differ" in r.stderr


def test_chaos_rollout_through_fault_injecting_proxies(fleet, tmp_path):
    """A real rollout (built-in MiniWoB env server, this fleet's real vLLM servers) with a
    fault-injecting proxy in front of the env and of each model server: ~10% HTTP 500,
    5% dropped connections, 2% hangs longer than the step timeout. Whatever fails,
    every scheduled pair ends with exactly one final line, nothing stays queued or
    claimed, no step is lost, and the command ends by itself with exit code 0."""
    work, fleet_file, _ = fleet
    servers = json.loads(fleet_file.read_text())["servers"]
    env = EnvServerProcess(max_envs=4, port=0, token_env=None, log_path=tmp_path / "env.log")
    env_url = env.start()
    step_timeout = 8
    proxies = [FaultProxy(url, chaos(seed), hang_s=step_timeout + 4)
               for seed, url in enumerate([env_url] + [f"{s['url']}" for s in servers])]
    try:
        for proxy in proxies:
            proxy.__enter__()
        endpoints = ", ".join(f"{p.url}/v1" for p in proxies[1:])
        cfg = tmp_path / "chaos.yaml"
        cfg.write_text(f"""
run: {{name: chaos, results_dir: {tmp_path}/results}}
tasks:
  kind: miniwob
  miniwob: {{names: [click-test, click-button, click-test-2], seeds: [0, 1, 2], episode_max_time: 300}}
env: {{url: "{proxies[0].url}", timeout_s: {step_timeout}, retries: 2, allocate_wait_s: 60}}
model: {{provider: openai, endpoints: [{endpoints}], name: {servers[0]["served_model_name"]},
        guided: true, max_tokens: 64, retries: 2}}
runner: {{num_envs: 2, max_steps: 4, step_timeout_s: {step_timeout}, max_attempts: 4}}
""")
        r = run_cua("rollout", str(cfg), timeout=900)
    finally:
        for proxy in proxies:
            proxy.__exit__(None, None, None)
        env.stop()
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "results").iterdir()
    lines = read_lines(run / "episodes.jsonl")
    attempts = [(x["task_id"], x["sample"], x["attempt"]) for x in lines]
    assert len(attempts) == len(set(attempts)), "an attempt was recorded twice"
    final = _final(run)
    scheduled = {(x["task_id"], x["sample"]) for x in read_lines(run / "scheduled.jsonl")}
    assert set(final) == scheduled and len(scheduled) == 9
    assert os.listdir(run / "queue" / "claimed") == [] and os.listdir(run / "queue" / "pending") == []
    for rec in lines:
        steps = read_lines(run / rec["traj"] / "traj.jsonl") if rec["steps"] else []
        assert [st["step"] for st in steps] == list(range(rec["steps"])), rec
        assert rec["outcome"] != "error" or rec["stop_reason"] in ("env_error", "model_error", "eval_error", "timeout")
    injected = sum((p.faults for p in proxies), Counter())
    assert injected["http_500"] and injected["drop_before"] + injected["drop_after"], injected
    report = {"injected": dict(injected), "requests": sum(sum(p.requests.values()) for p in proxies),
              "attempts": len(lines), "pairs": len(final),
              "pairs_ending_as_errors": sum(x["outcome"] == "error" for x in final.values()),
              "attempts_by_stop_reason": dict(Counter(x["stop_reason"] for x in lines))}
    print("chaos:", json.dumps(report))


def test_text_agent_through_fleet_on_cuas_agentgym_server(fleet):
    """The repo's AgentGym config as a user runs it: the webarena text agent, held to WebArena's grammar
    by guided decoding on real vLLM, plays real MiniWoB++ through cua's own AgentGym WebArena routes."""
    work, fleet_file, _ = fleet
    r = run_cua("rollout", str(ROOT / "configs" / "agentgym-webarena.yaml"), "--fleet", str(fleet_file),
                "--set", f"run.results_dir={work}/results-agentgym", "--set", "model.retries=1", timeout=600)
    assert r.returncode == 0, r.stderr
    (run,) = (work / "results-agentgym").iterdir()
    final = _final(run)
    assert len(final) == 8 and all(rec["outcome"] != "error" for rec in final.values()), final
    steps = [s for rec in final.values() for s in read_lines(run / rec["traj"] / "traj.jsonl")]
    assert steps and all(s["screenshot"] is None and "OBJECTIVE:" in s["observation"] for s in steps)
    # Guided answers always parse, unless model.max_tokens cut one short of its grammar's end.
    assert all(t["finish_reason"] == "length" for s in steps for t in s.get("failed_tries", [])), steps
    assert all(s["commands"][0].startswith("```") for s in steps if s["action"]), steps
    seconds = sorted(sum(s["timings"].values()) for s in steps)
    print(f"agentgym: {len(steps)} steps, median {seconds[len(seconds) // 2]:.2f} s per step, "
          f"success {sum(rec['outcome'] == 'success' for rec in final.values())}/8")


@pytest.mark.stops_tiny_vllm
def test_stop_models_leaves_no_process(fleet):
    work, fleet_file, _ = fleet
    doc = json.loads(fleet_file.read_text())
    pgids = set(doc["pgids"])
    r = run_cua("stop-models", "--fleet", str(fleet_file), timeout=120)
    assert r.returncode == 0, r.stderr
    assert not fleet_file.exists()
    assert not psutil.pid_exists(doc["supervisor_pid"]) or \
        psutil.Process(doc["supervisor_pid"]).status() == psutil.STATUS_ZOMBIE
    left = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) in pgids:
                left.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    assert left == []


def test_server_dying_at_start_fails_fast_with_command_and_log(tmp_path):
    fleet_file = tmp_path / "fleet.json"
    start = time.monotonic()
    r = run_cua("start-models", "--cpu", "1", "--model", str(tmp_path / "no-such-model"),
                "--fleet", str(fleet_file), "--base-port", "8390", timeout=300)
    assert r.returncode == 1
    assert "exited with code" in r.stderr and "command:" in r.stderr and "no-such-model" in r.stderr
    assert "last lines of" in r.stderr
    assert time.monotonic() - start < 120, "must not wait for the ready timeout"
    assert not fleet_file.exists()
