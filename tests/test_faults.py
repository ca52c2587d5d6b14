"""Faults of the env and of cua's own parent, against the real built-in MiniWoB
env server behind a fault-injecting proxy: an action the env refuses is the
agent's failure, an env that fails mid-step loses no step, a request that never
reached the env may be retried, and an orphaned rollout cleans up after itself."""

import io
import json
import os
import signal
import socket
import struct
import subprocess
import threading

import psutil
import pytest
from helpers.cli import CUA, start_cua
from helpers.faultproxy import FaultProxy
from helpers.net import free_port
from helpers.waiting import wait_for
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from cua_cli._util.httpclient import Client
from cua_cli._util.png import SIGNATURE as PNG_SIGNATURE
from cua_cli._util.retry import with_retries
from cua_cli.envs.env_cluster import _image_size
from cua_cli.errors import EnvError, InfraError
from cua_cli.rollout.envserver_process import EnvServerProcess
from cua_cli.runfolder.jsonl import read_lines

TOKEN = "s3cr3t-Tok3n-0123456789abcdef"


@pytest.fixture(scope="module")
def env_server(tmp_path_factory):
    server = EnvServerProcess(max_envs=2, port=0, token_env=None, log_path=tmp_path_factory.mktemp("env") / "env.log")
    url = server.start()
    yield url
    server.stop()


def _is_action(body: bytes) -> bool:
    return b'"screenshot"' not in body


def _rollout(tmp_path, env_url, tasks="{kind: miniwob, miniwob: {names: [click-test], seeds: [0]}}"):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"""
run: {{name: faults, results_dir: {tmp_path}/results}}
tasks: {tasks}
env: {{url: "{env_url}", token_env: FAULT_TOKEN, retries: 1}}
model: {{provider: random, seed: 3}}
agent: {{parse_retries: 1}}
runner: {{num_envs: 1, max_steps: 3, max_attempts: 2}}
""")
    r = subprocess.run([*CUA, "rollout", str(cfg)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, FAULT_TOKEN=TOKEN))
    (run,) = (tmp_path / "results").iterdir()
    return r, run


def _attempts(run):
    return sorted(read_lines(run / "episodes.jsonl"), key=lambda r: r["attempt"])


def _check_steps(run, rec):
    """An attempt's traj.jsonl has exactly one line per step it counted."""
    lines = read_lines(run / rec["traj"] / "traj.jsonl") if rec["steps"] else []
    assert [s["step"] for s in lines] == list(range(rec["steps"])), rec
    return lines


@pytest.mark.slow  # rollouts on the env server's headless Chromium
def test_refused_action_is_the_agents_failure_not_an_env_error(env_server, tmp_path):
    def policy(method, path, body):
        return ("status", 400, "unknown key 'capslock'") if "/execute/" in path and _is_action(body) else "pass"

    with FaultProxy(env_server, policy) as proxy:
        r, run = _rollout(tmp_path, proxy.url)
    assert r.returncode == 0, r.stderr
    (rec,) = _attempts(run)  # one attempt: the queue does not retry the agent's mistake
    assert rec["outcome"] == "failure" and rec["stop_reason"] == "action_refused", rec
    assert rec["score"] == 0.0 and rec["error"] is None
    (step,) = _check_steps(run, rec)
    assert "unknown key 'capslock'" in step["error"] and step["action"] and step["commands"]
    (earlier,) = step["failed_tries"]  # parse_retries: 1 -> asked twice
    assert earlier["response"] and "refused" in earlier["error"] and step["parse_retries"] == 1
    assert proxy.faults["http_400"] == 2


@pytest.mark.slow  # rollouts on the env server's headless Chromium
def test_env_failing_mid_step_keeps_the_step_and_masks_the_whole_secret(env_server, tmp_path):
    failed = threading.Event()

    def policy(method, path, body):
        if "/execute/" in path and _is_action(body) and not failed.is_set():
            failed.set()  # the env breaks on the first action, with the token deep in its message
            return ("status", 500, "x" * 290 + f" token={TOKEN} " + "y" * 3000)
        return "pass"

    with FaultProxy(env_server, policy) as proxy:
        r, run = _rollout(tmp_path, proxy.url)
    assert r.returncode == 0, r.stderr
    first, second = _attempts(run)
    assert first["outcome"] == "error" and first["stop_reason"] == "env_error" and first["steps"] == 1
    (step,) = _check_steps(run, first)
    assert step["response"] and step["action"] and step["commands"], "the model's answer survives the env failure"
    assert "HTTP 500" in step["error"] and "HTTP 500" in first["error"]
    assert second["outcome"] in ("success", "failure") and second["attempt"] == 1
    _check_steps(run, second)
    for f in run.rglob("*"):
        if f.is_file() and f.suffix != ".png":
            assert TOKEN[:8].encode() not in f.read_bytes(), f"part of the secret leaked into {f}"
    assert proxy.faults["http_500"] == 1


@pytest.mark.slow  # rollouts on the env server's headless Chromium
def test_task_the_env_refuses_ends_at_once_as_bad_task(env_server, tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"task_id": "nope", "config": {"miniwob": "no-such-task"}}) + "\n")
    r, run = _rollout(tmp_path, env_server, "{kind: jsonl, jsonl: tasks.jsonl}")
    assert r.returncode == 0, r.stderr
    (rec,) = _attempts(run)  # not retried: the env will refuse it every time
    assert rec["outcome"] == "error" and rec["stop_reason"] == "bad_task" and "no-such-task" in rec["error"]
    assert os.listdir(run / "queue" / "failed") == ["nope__0.json"]


def test_only_requests_that_never_reached_the_server_are_retried_for_actions():
    calls = []
    http = Client()

    def post(url):
        calls.append(url)
        return http.post(url, 5, json={"action": "pyautogui.click(1, 1)"})

    # Connection refused: the server never saw the request, so even an action may be sent again.
    url = f"http://127.0.0.1:{free_port()}/server/execute/x"
    with pytest.raises(InfraError):
        with_retries(lambda: post(url), 2, "execute", base_delay=0.01, idempotent=False)
    assert len(calls) == 3

    # A server that reads the request and hangs up may have acted on it: never repeated.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def hang_up():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    calls.clear()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/server/execute/x"
    try:
        with pytest.raises(InfraError):
            with_retries(lambda: post(url), 2, "execute", base_delay=0.01, idempotent=False)
        assert len(calls) == 1
        calls.clear()
        with pytest.raises(InfraError):  # the same failure on a request that may repeat is retried
            with_retries(lambda: post(url), 2, "screenshot", base_delay=0.01)
        assert len(calls) == 3
    finally:
        listener.close()


@pytest.mark.slow  # a whole rollout on real MiniWoB++ (Chromium), killed and resumed
def test_killed_rollout_leaves_no_orphans_and_resumes_cleanly(tmp_path):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"""
run: {{name: orphans, results_dir: {tmp_path}/results}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test-2, click-button], seeds: [0, 1, 2, 3, 4, 5]}}}}
env: {{url: local, local: {{max_envs: 2}}}}
model: {{provider: random, seed: 1}}
runner: {{num_envs: 2, max_steps: 8}}
""")
    p = start_cua("rollout", str(cfg), stdout=subprocess.DEVNULL, text=False)
    children = []
    try:
        wait_for(lambda: (tmp_path / "results").exists() and any(
            (d / "episodes.jsonl").exists() for d in (tmp_path / "results").iterdir()), 120, "a first episode")
        children = psutil.Process(p.pid).children(recursive=True)
        names = {c.name() for c in children}
        assert any("chrom" in n for n in names), names  # the env server's browsers are among them
        os.kill(p.pid, signal.SIGKILL)  # only the rollout itself, as the OOM killer would
        p.wait(10)
        gone, alive = psutil.wait_procs(children, timeout=60)
        assert not alive, f"left running after the rollout died: {[(c.pid, c.name()) for c in alive]}"
    finally:
        for proc in [psutil.Process(p.pid), *children] if p.poll() is None else children:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
    (run,) = (tmp_path / "results").iterdir()
    assert os.listdir(run / "queue" / "claimed") == [], "orphaned runners hand their claims back"
    r = subprocess.run([*CUA, "rollout", str(cfg), "--resume", str(run)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    scheduled = {(s["task_id"], s["sample"]) for s in read_lines(run / "scheduled.jsonl")}
    finals = {}
    for rec in read_lines(run / "episodes.jsonl"):
        finals[(rec["task_id"], rec["sample"])] = max(rec["attempt"], finals.get((rec["task_id"], rec["sample"]), -1))
    assert set(finals) == scheduled and len(scheduled) == 12
    assert os.listdir(run / "queue" / "claimed") == [] and os.listdir(run / "queue" / "pending") == []
    assert json.loads((run / "run.json").read_text())["run_id"] == run.name


@pytest.mark.slow  # a long property run
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_a_screenshot_size_comes_from_a_checked_png_header_or_is_an_env_error(junk, width, height):
    header = PNG_SIGNATURE + b"\x00\x00\x00\x0dIHDR" + struct.pack(">II", width, height)
    for data in (junk, PNG_SIGNATURE + junk, header + junk):
        try:
            w, h = _image_size(data)
        except EnvError:
            continue
        assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR" and (w, h) == struct.unpack(">II", data[16:24])
        assert 0 < w <= 32768 and 0 < h <= 32768
    png = io.BytesIO()
    PILImage.new("RGB", (1920, 1080)).save(png, "PNG")
    assert _image_size(png.getvalue()) == (1920, 1080)
