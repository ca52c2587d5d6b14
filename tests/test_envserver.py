"""End-to-end tests: real Chromium, real HTTP on 127.0.0.1."""

import asyncio
import io
import json
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from http.client import HTTPConnection

import pytest
import requests
from helpers.envserver import UNSET_TOKEN_ENV, start_env_server, stop_env_server
from PIL import Image


@pytest.fixture(scope="module")
def env():
    server, url = start_env_server(max_envs=2, token_env=UNSET_TOKEN_ENV)
    http = requests.Session()  # keep-alive across calls
    yield server, url, http
    http.close()
    stop_env_server(server)


def allocate(url, http, task, seed, **config):
    r = http.post(f"{url}/server/getAvailableAndLock",
                  json={"task_id": f"t-{task}", "os": "miniwob",
                        "config": {"miniwob": task, "seed": seed, **config}})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def execute(url, http, server_id, action):
    return http.post(f"{url}/server/execute/{server_id}", json={"action": action})


def evaluate(url, http, server_id):
    r = http.post(f"{url}/server/evaluate/{server_id}", json={"func": "ignored"})
    assert r.status_code == 200, r.text
    return r.json()["data"]


def center(server, server_id, selector):
    """Centre of a page element, in screenshot pixels (read from the real DOM)."""
    js = ("var r = document.querySelector(arguments[0]).getBoundingClientRect();"
          "return [r.x + r.width / 2, r.y + r.height / 2];")
    return server.pool.use(server_id, lambda b: b.driver.execute_script(js, selector))


def release(url, http, server_id):
    r = http.post(f"{url}/server/release/{server_id}")
    assert r.status_code == 200 and r.json() == {"data": {"released": server_id}}


@pytest.mark.slow  # the env server's headless Chromium
def test_click_right_button_succeeds(env):
    server, url, http = env
    data = allocate(url, http, "click-test-2", 0)
    sid = data["server_id"]
    assert data["instruction"] == "Click button ONE."

    shot = execute(url, http, sid, "screenshot")
    assert shot.status_code == 200 and shot.headers["Content-Type"] == "image/png"
    assert Image.open(io.BytesIO(shot.content)).size == (160, 210)

    listed = http.get(f"{url}/server/list").json()["data"]
    assert {"server_id": sid, "task_id": "t-click-test-2", "env": "miniwob/click-test-2"}.items() \
        <= next(s for s in listed if s["server_id"] == sid).items()

    x, y = center(server, sid, "#subbtn")  # the button the instruction names
    r = execute(url, http, sid, f"import pyautogui\npyautogui.click({x}, {y})")
    assert r.json() == {"data": {"done": True, "reward": 1.0}}
    assert evaluate(url, http, sid) == {"result": 1.0, "reward": 1.0}
    release(url, http, sid)
    assert sid not in [s["server_id"] for s in http.get(f"{url}/server/list").json()["data"]]


@pytest.mark.slow  # the env server's headless Chromium
def test_empty_then_wrong_click_fails(env):
    server, url, http = env
    sid = allocate(url, http, "click-test-2", 1)["server_id"]
    r = execute(url, http, sid, "pyautogui.click(80, 20)")  # on the instruction text
    assert r.json() == {"data": {"done": False, "reward": 0.0}}
    assert evaluate(url, http, sid) == {"result": 0.0, "reward": 0.0}

    x, y = center(server, sid, "#subbtn2")
    assert execute(url, http, sid, f"pyautogui.click({x}, {y})").json()["data"]["done"] is True
    assert evaluate(url, http, sid) == {"result": 0.0, "reward": -1.0}
    # Clicking after the episode ended must not start a new one.
    x, y = center(server, sid, "#subbtn")
    assert execute(url, http, sid, f"pyautogui.click({x}, {y})").json()["data"] == {"done": True, "reward": -1.0}
    release(url, http, sid)


@pytest.mark.slow  # the env server's headless Chromium
def test_enter_text(env):
    server, url, http = env
    data = allocate(url, http, "enter-text", 3)
    sid = data["server_id"]
    word = re.search(r'"(.+)"', data["instruction"]).group(1)
    (fx, fy), (sx, sy) = center(server, sid, "#tt"), center(server, sid, "#subbtn")
    code = (f"pyautogui.click({fx}, {fy})\npyautogui.write('junk')\n"
            f"pyautogui.hotkey('ctrl', 'a')\npyautogui.press('backspace')\n"
            f"pyautogui.write({word!r})\npyautogui.click({sx}, {sy})")
    assert execute(url, http, sid, code).json()["data"]["done"] is True
    assert evaluate(url, http, sid)["result"] == 1.0
    release(url, http, sid)


@pytest.mark.slow  # the env server's headless Chromium
def test_drag(env):
    server, url, http = env
    sid = allocate(url, http, "drag-box", 5)["server_id"]
    (ax, ay), (bx, by) = center(server, sid, "#draggableSmall"), center(server, sid, "#draggableLarge")
    sx, sy = center(server, sid, "#subbtn")
    code = f"pyautogui.moveTo({ax}, {ay})\npyautogui.dragTo({bx}, {by}, duration=0.2)\npyautogui.click({sx}, {sy})"
    assert execute(url, http, sid, code).json()["data"] == {"done": True, "reward": 1.0}
    release(url, http, sid)


@pytest.mark.slow  # the env server's headless Chromium
def test_bad_requests(env):
    server, url, http = env
    sid = allocate(url, http, "click-test", 0)["server_id"]

    r = execute(url, http, sid, "import os\nos.system('true')")
    assert r.status_code == 400 and "import os" in r.json()["error"]
    r = execute(url, http, sid, "__import__('os').system('x')")
    assert r.status_code == 400 and "__import__" in r.json()["error"]
    assert execute(url, http, sid, "DONE").json() == {"data": {"done": False, "reward": 0.0}}
    assert execute(url, http, sid, "WAIT").status_code == 200
    r = http.post(f"{url}/server/execute/{sid}", json={"nothing": 1})
    assert r.status_code == 400

    for call in ("execute", "evaluate", "release"):
        r = http.post(f"{url}/server/{call}/nope", json={"action": "screenshot"})
        assert r.status_code == 404 and "nope" in r.json()["error"]
    assert http.get(f"{url}/server/nothing").status_code == 404
    r = http.post(f"{url}/server/getAvailableAndLock", json={"config": {"miniwob": "no-such-task", "seed": 0}})
    assert r.status_code == 400 and "no-such-task" in r.json()["error"]
    r = http.post(f"{url}/server/getAvailableAndLock", json={"config": {"miniwob": "click-test", "seed": "x"}})
    assert r.status_code == 400

    release(url, http, sid)
    assert http.post(f"{url}/server/release/{sid}").status_code == 404


@pytest.mark.slow  # the env server's headless Chromium
def test_refused_program_runs_none_of_its_commands(env, monkeypatch, caplog):
    server, url, http = env
    sid = allocate(url, http, "click-test-2", 0)["server_id"]
    x, y = center(server, sid, "#subbtn")  # clicking it would end the episode with reward 1
    r = execute(url, http, sid, f"pyautogui.click({x}, {y})\npyautogui.scroll(1e999)")
    assert r.status_code == 400 and "line 2" in r.json()["error"] and "1e999" in r.json()["error"]
    r = execute(url, http, sid, "pyautogui.click(1e999, 5)")
    assert r.status_code == 400 and "1e999" in r.json()["error"]
    assert execute(url, http, sid, "DONE").json() == {"data": {"done": False, "reward": 0.0}}
    assert evaluate(url, http, sid) == {"result": 0.0, "reward": 0.0}

    # A fault of the server, even a ValueError, is a 500 with one line; the traceback is only logged.
    def fault():
        raise ValueError("boom\nsecond line")

    monkeypatch.setattr(server.pool.use(sid, lambda b: b), "screenshot_png", fault)
    with caplog.at_level(logging.ERROR, logger="cua_cli.envserver.server"):
        r = execute(url, http, sid, "screenshot")
    assert r.status_code == 500 and r.json() == {"error": "ValueError: boom"}
    assert any(rec.exc_info for rec in caplog.records)
    monkeypatch.undo()

    r = execute(url, http, sid, f"pyautogui.click({x}, {y})")  # the click itself was fine
    assert r.json() == {"data": {"done": True, "reward": 1.0}}
    release(url, http, sid)


@pytest.mark.slow  # the env server's headless Chromium
@pytest.mark.parametrize(
    "body, message",
    [
        ('{"config": ', "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
        ('{"config": {"miniwob": "click-test", "seed": ' + "9" * 5_000 + "}}", "not valid JSON"),
        ('["click-test"]', "config must be"),
        ('{"config": {"miniwob": 5}}', "config must be"),
        ('{"task_id": {"a": [1]}, "config": {"miniwob": "click-test", "seed": 0}}', "task_id"),
        ('{"config": {"miniwob": "click-test", "seed": 1e30}}', "seed"),
        ('{"config": {"miniwob": "click-test", "seed": 1000000000000000000000000000000}}', "seed"),
        ('{"config": {"miniwob": "click-test", "seed": true}}', "seed"),
        ('{"config": {"miniwob": "click-test", "seed": 0, "episode_max_time": NaN}}', "episode_max_time"),
        ('{"config": {"miniwob": "click-test", "seed": 0, "episode_max_time": Infinity}}', "episode_max_time"),
        ('{"config": {"miniwob": "flight.x", "seed": 0}}', "FlightWoB"),
        ('{"config": {"miniwob": "' + "x" * 100_000 + '", "seed": 0}}', "unknown MiniWoB task"),
    ],
)
def test_bad_allocations_are_refused(env, body, message):
    server, url, http = env
    r = http.post(f"{url}/server/getAvailableAndLock", data=body.encode(),
                  headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and message in r.json()["error"] and len(r.json()["error"]) < 300


@pytest.mark.slow  # the env server's headless Chromium
@pytest.mark.parametrize("length, status", [("-5", 400), ("abc", 400), ("1e3", 400), ("9" * 5_000, 413)])
def test_bad_content_length_is_refused(env, length, status):
    server, url, http = env
    conn = HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)  # requests sets it right
    try:
        conn.putrequest("POST", "/server/execute/nope")
        conn.putheader("Content-Length", length)
        conn.endheaders(b'{"action": "DONE"}')
        r = conn.getresponse()
        assert r.status == status and json.loads(r.read())["error"]
    finally:
        conn.close()


@pytest.mark.slow  # the env server's headless Chromium
def test_a_client_that_goes_away_mid_request_is_no_error(env, capsys, caplog):
    # A runner killed mid-request (a node lost under a Ray actor) leaves its request half-done.
    server, url, http = env
    sid = allocate(url, http, "click-test", 0)["server_id"]
    body = json.dumps({"action": "screenshot"}).encode()
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            s = socket.create_connection(server.server_address[:2])
            s.sendall(f"POST /server/execute/{sid} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # a reset: the screenshot's answer has nowhere to go
        time.sleep(1.0)
    assert execute(url, http, sid, "screenshot").status_code == 200  # the env serves on
    release(url, http, sid)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow  # the env server's headless Chromium
def test_capacity():
    server, url = start_env_server(max_envs=1, token_env=UNSET_TOKEN_ENV)
    try:
        http = requests.Session()
        sid = allocate(url, http, "click-test", 0)["server_id"]
        r = http.post(f"{url}/server/getAvailableAndLock", json={"config": {"miniwob": "click-test", "seed": 1}})
        assert r.status_code == 503 and "all 1 envs busy" in r.json()["error"]
        release(url, http, sid)
        sid = allocate(url, http, "click-test-2", 1)["server_id"]  # reuses the idle browser
        assert execute(url, http, sid, "screenshot").status_code == 200
        release(url, http, sid)
    finally:
        stop_env_server(server)


@pytest.mark.slow  # the env server's headless Chromium
def test_an_env_nobody_uses_is_released_for_its_lost_client():
    # A client whose allocation answer was lost never releases: the server must, or the env is gone for good.
    server, url = start_env_server(max_envs=1, token_env=UNSET_TOKEN_ENV, idle_timeout_s=1.0)
    try:
        http = requests.Session()
        sid = allocate(url, http, "click-test", 0)["server_id"]
        assert execute(url, http, sid, "screenshot").status_code == 200
        deadline = time.monotonic() + 20
        while http.get(f"{url}/server/list").json()["data"]:
            assert time.monotonic() < deadline, "the idle env was never released"
            time.sleep(0.2)
        assert execute(url, http, sid, "screenshot").status_code == 404
        sid = allocate(url, http, "click-test", 1)["server_id"]  # the env is free again
        release(url, http, sid)
    finally:
        stop_env_server(server)


def test_token(monkeypatch):
    monkeypatch.setenv("CUA_TEST_TOKEN", "tok")
    server, url = start_env_server(token_env="CUA_TEST_TOKEN")
    try:
        assert requests.get(f"{url}/server/list").status_code == 401
        assert requests.get(f"{url}/server/list", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert requests.get(f"{url}/server/list", headers={"Authorization": "Bearer tok"}).json() == {"data": []}
        assert requests.get(f"{url}/server/list", headers={"Authorization": "tok"}).status_code == 200
    finally:
        stop_env_server(server)


def test_serve_prints_port_and_stops_on_sigterm():
    env = {k: v for k, v in os.environ.items() if k != "CUA_ENV_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cua_cli.envserver.server import serve; serve(port=0)"],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = proc.stdout.readline()
        match = re.fullmatch(r"cua env-server listening on (http://127\.0\.0\.1:\d+)\n", line)
        assert match, line
        assert requests.get(f"{match.group(1)}/server/list").json() == {"data": []}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow  # the env server's headless Chromium
def test_leaving_the_task_page_ends_the_episode_as_failed(env):
    server, url, http = env
    sid = allocate(url, http, "click-test", 0)["server_id"]
    # What a "back" key or gesture of the agent does: the task page is gone.
    server.pool.use(sid, lambda b: b.driver.get("about:blank"))
    r = execute(url, http, sid, "pyautogui.hscroll(-5, x=159, y=60)")
    assert r.status_code == 200 and r.json()["data"] == {"done": True, "reward": -1.0}
    assert evaluate(url, http, sid) == {"result": 0.0, "reward": -1.0}
    release(url, http, sid)
    # the browser is reused and reloads the task
    sid = allocate(url, http, "click-test", 1)["server_id"]
    assert execute(url, http, sid, "pyautogui.click(1, 1)").json()["data"]["done"] is False
    release(url, http, sid)


def test_backend_can_press_every_key_the_subset_names():
    # A key the parser accepts but the browser cannot press would be a 500 mid-program.
    from cua_cli.envserver.miniwob_backend import KEYS
    from cua_cli.pyautogui_vocab import KEY_NAMES
    assert KEY_NAMES <= set(KEYS)


def test_an_env_a_lost_runner_held_is_listed_and_given_back_by_envs_gc(env, tmp_path):
    """The env-cluster protocol's envs are leased in the run folder as desktops are: one whose runner
    died with it (no release) is found by `cua envs list` and released by `cua envs gc`."""
    from helpers.cli import run_cua

    from cua_cli._util.budget import Budget
    from cua_cli.envs.env_cluster import ClusterEnv, EnvSettings
    from cua_cli.runfolder.leases import held_record, still_held
    from cua_cli.runfolder.writer import RunDir, traj_rel
    from cua_cli.tasks import task_from_dict

    server, url, _ = env
    run = RunDir.create(tmp_path / "results", "lost", {"env": {"url": url}})
    item = {"task_id": "lost/one", "domain": "click-test", "sample": 0, "attempt": 0,
            "config": {"miniwob": "click-test", "seed": 1}, "evaluator": {"func": "miniwob_reward"}}
    session = asyncio.run(ClusterEnv(EnvSettings(url)).allocate(task_from_dict(item), Budget(60.0), run.traj(item)))
    (held,) = still_held(run.path)
    assert held["protocol"] == "env-cluster" and held["id"] == session.server_id
    assert held["traj"] == traj_rel("lost/one", 0, 0)
    assert session.server_id in {s["server_id"] for s in server.pool.sessions()}
    # A record of an env the server no longer knows (expired, or given back by hand) counts as given back.
    run.traj({**item, "attempt": 1}).lease(held_record(url, "no-such-env", protocol="env-cluster"))
    listed = run_cua("envs", "list", str(run.path))
    assert listed.returncode == 0 and session.server_id in listed.stdout and "no-such-env" in listed.stdout
    gc = run_cua("envs", "gc", str(run.path))
    assert gc.returncode == 0, gc.stderr
    assert still_held(run.path) == [] and server.pool.sessions() == []
