"""cua's desktop server speaks DART's allocation protocol: the token is checked, the quota holds
(429), an allocation answers once the desktop's /screenshot does, and a release leaves no process
of the desktop behind, even after its executor was killed with SIGKILL. A warm pool answers at once."""

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from helpers.desktops import needs_desktops, png_size, request, run
from helpers.waiting import wait_for

from cua_cli.envserver.desktop import make_server

pytestmark = [needs_desktops, pytest.mark.slow]
TOKEN = "test-token-" + os.urandom(4).hex()


@pytest.fixture
def server(monkeypatch, request_limit=2):
    monkeypatch.setenv("CUA_TEST_DESKTOP_TOKEN", TOKEN)
    servers = []

    def start(max_desktops=2, warm=0):
        s = make_server("127.0.0.1", 0, "CUA_TEST_DESKTOP_TOKEN", max_desktops, (1280, 720), warm)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
        return s, f"http://127.0.0.1:{s.server_address[1]}"
    yield start
    for s in servers:
        s.shutdown()
        s.server_close()
        s.close_all()
        assert not s.workdir.exists()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def call(url, path, method="GET", body=None, headers=AUTH):
    status, _, raw = request(url + path, method, body, headers=headers)
    return status, json.loads(raw)


def test_a_missing_token_is_401_and_another_403(server):
    _, url = server()
    assert call(url, "/start_emulator", "POST", {}, headers={})[0] == 401
    assert call(url, "/start_emulator", "POST", {}, headers={"Authorization": "Bearer nope"})[0] == 403
    assert call(url, "/tokens", headers={})[0] == 401
    status, tokens = call(url, "/tokens")
    assert status == 200 and tokens == {TOKEN: {"current": 0, "limit": 2, "emulator_count": 0}}
    assert call(url, "/ping", headers={})[0] == 200


def test_allocate_screenshot_release_leaves_no_process_and_quota_is_429(server):
    srv, url = server(max_desktops=1)
    status, answer = call(url, "/start_emulator", "POST", {"token": TOKEN}, headers={})  # token in the body
    assert status == 200 and answer["code"] == 0 and answer["message"] == "Emulator started successfully"
    data = answer["data"]
    assert set(data) >= {"emulator_id", "server_port", "vnc_port", "chromium_port", "vlc_port", "token"}
    desk = f"http://127.0.0.1:{data['server_port']}"
    shot = request(desk + "/screenshot")
    assert shot[0] == 200 and png_size(shot[2]) == (1280, 720)
    assert call(url, "/start_emulator", "POST", {})[0] == 429
    assert call(url, "/tokens")[1][TOKEN]["current"] == 1
    listed = call(url, "/emulators")[1]["data"]
    assert [e["emulator_id"] for e in listed] == [data["emulator_id"]]
    assert call(url, f"/emulator_status/{data['emulator_id']}")[1]["data"]["status"] == "running"
    sandbox = srv.pool.get(data["emulator_id"]).desktop.sandbox
    assert sandbox.processes()
    status, answer = call(url, f"/emulators/{data['emulator_id']}", "DELETE")
    assert status == 200 and answer["code"] == 0
    assert sandbox.processes() == []
    assert not sandbox.dir.exists()
    assert call(url, f"/emulators/{data['emulator_id']}", "DELETE")[0] == 404
    assert call(url, "/stop_emulator", "POST", {"emulator_id": data["emulator_id"]})[0] == 404
    assert call(url, "/start_emulator", "POST", {})[0] == 200  # the slot is free again


def test_release_after_the_executor_is_killed_leaves_no_process(server):
    srv, url = server(max_desktops=1)
    data = call(url, "/start_emulator", "POST", {})[1]["data"]
    desk = f"http://127.0.0.1:{data['server_port']}"
    run(desk, "sleep 300 >/dev/null 2>&1 &", shell=True)  # an app the desktop started
    sandbox = srv.pool.get(data["emulator_id"]).desktop.sandbox
    host_pid = next(p for p in sandbox.processes() if b"executor.py" in Path(f"/proc/{p}/cmdline").read_bytes())
    os.kill(host_pid, signal.SIGKILL)
    assert request(desk + "/screenshot")[0] == 503
    assert call(url, "/stop_emulator", "POST", {"emulator_id": data["emulator_id"]})[0] == 200
    assert sandbox.processes() == []


def test_a_warm_desktop_answers_at_once_and_is_replaced(server):
    srv, url = server(max_desktops=2, warm=1)
    assert srv.pool.wait_warm(1, timeout=60)
    t0 = time.monotonic()
    status, answer = call(url, "/start_emulator", "POST", {})
    assert status == 200 and time.monotonic() - t0 < 1.0
    desk = f"http://127.0.0.1:{answer['data']['server_port']}"
    assert request(desk + "/screenshot")[0] == 200
    assert srv.pool.wait_warm(1, timeout=60)  # refilled in the background
    stopped = call(url, "/stop_all_emulators", "POST", {})[1]["data"]["stopped"]
    assert stopped == [answer["data"]["emulator_id"]]
    assert call(url, "/emulators")[1]["data"] == []


def test_concurrent_allocations_respect_the_quota(server):
    _, url = server(max_desktops=1)
    barrier, statuses = threading.Barrier(3), []

    def claim():
        barrier.wait()
        statuses.append(call(url, "/start_emulator", "POST", {})[0])
    threads = [threading.Thread(target=claim) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 429, 429]


def test_a_desktop_whose_client_gave_up_waiting_is_released_not_leased_for_ever(server):
    """A client that times out on /start_emulator never learns the desktop's id, so it can never give
    it back: the server releases it instead of holding the slot until the server stops."""
    s, url = server(max_desktops=1)
    body = b"{}"
    with socket.create_connection(s.server_address) as sock:
        sock.sendall(b"POST /start_emulator HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_for(lambda: s.pool.counts()["leased"] + s.pool._reserved > 0, 30, "the desktop is being started")
    # the client hung up while its desktop started
    wait_for(lambda: s.pool.counts()["leased"] == 0 and s.pool._reserved == 0, 300,
             "the desktop nobody waits for is released")
    status, answer = call(url, "/start_emulator", "POST", {})  # the one slot is free again
    assert status == 200, answer
    assert call(url, "/tokens")[1][TOKEN]["current"] == 1
