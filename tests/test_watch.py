"""`cua watch`'s parts apart from a desktop: the WebSocket frames a viewer sends, what the run folder
says is running, the watch server's token and files, and the rollout's relay, which opens a screen
only for a desktop its run holds on one of its own servers (the real screen in a real browser:
test_watch_live.py)."""

import base64
import http.client
import json
import os
import socket
import struct
import threading
import time
import urllib.parse

import pytest
from helpers.cli import run_cua
from hypothesis import given
from hypothesis import strategies as st

from cua_cli._util import websocket as ws
from cua_cli.rollout.screens import ScreenRelay, forwarded
from cua_cli.runfolder import takeover
from cua_cli.runfolder.leases import held_record, record, released_record
from cua_cli.runfolder.writer import traj_rel
from cua_cli.watch import episodes as eps
from cua_cli.watch.server import WatchServer


def client_frame(opcode: int, payload: bytes, mask: bytes = b"\x01\x02\x03\x04", fin: bool = True) -> bytes:
    """A frame as a browser sends it (masked)."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def reader(data: bytes):
    pos = 0

    def read(n):
        nonlocal pos
        pos += n
        return data[pos - n:pos]
    return read


def test_the_accept_value_is_rfc_6455s():
    assert ws.accept_value("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # the RFC's own example


@given(payloads=st.lists(st.binary(max_size=70_000), min_size=1, max_size=4), mask=st.binary(min_size=4, max_size=4))
def test_a_clients_frames_read_back_whole(payloads, mask):
    read = reader(b"".join(client_frame(ws.BINARY, p, mask) for p in payloads))
    assert [ws.read_frame(read) for _ in payloads] == [(ws.BINARY, p) for p in payloads]
    with pytest.raises(EOFError):
        ws.read_frame(read)


@given(data=st.binary(max_size=300))
def test_any_bytes_are_a_frame_a_protocol_error_or_the_streams_end(data):
    read = reader(data)
    try:
        while True:
            opcode, payload = ws.read_frame(read)
            assert opcode in (ws.CONTINUATION, ws.TEXT, ws.BINARY, ws.CLOSE, ws.PING, ws.PONG)
    except (ws.ProtocolError, EOFError):
        pass


@pytest.mark.parametrize("frame, code", [
    (client_frame(ws.BINARY, b"x")[:1] + bytes([1]) + b"x", ws.PROTOCOL_ERROR),     # not masked
    (bytes([0x82 | 0x40]) + client_frame(ws.BINARY, b"x")[1:], ws.PROTOCOL_ERROR),  # a reserved bit
    (client_frame(ws.PING, b"p" * 126), ws.PROTOCOL_ERROR),                         # a long control frame
    (client_frame(ws.CLOSE, b"", fin=False), ws.PROTOCOL_ERROR),                    # a fragmented one
    (bytes([0x82, 0x80 | 127]) + struct.pack("!Q", ws.MAX_PAYLOAD + 1), ws.TOO_BIG),
    (bytes([0x83, 0x80]) + b"mask", ws.PROTOCOL_ERROR),                             # opcode 3
])
def test_frames_a_client_may_not_send_are_protocol_errors(frame, code):
    with pytest.raises(ws.ProtocolError) as e:
        ws.read_frame(reader(frame))
    assert e.value.code == code


KEY = base64.b64encode(b"k" * 16).decode()
UPGRADE = {"Upgrade": "websocket", "Connection": "keep-alive, Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": KEY}


@pytest.mark.parametrize("change, problem", [
    ({}, None), ({"Upgrade": "h2c"}, "Upgrade: websocket"), ({"Connection": "close"}, "Connection: Upgrade"),
    ({"Sec-WebSocket-Version": "8"}, "version 13"), ({"Sec-WebSocket-Key": "c2hvcnQ="}, "16 bytes"),
    ({"Sec-WebSocket-Key": "not base64!"}, "16 bytes")])
def test_an_upgrade_is_checked_header_by_header(change, problem):
    found = ws.upgrade_problem({**UPGRADE, **change})
    assert (found is None) if problem is None else (problem in found)


def test_the_handshake_answers_the_key_and_takes_binary_only_when_offered():
    reply = ws.handshake_reply({**UPGRADE, "Sec-WebSocket-Protocol": "chat, binary"}).decode()
    assert reply.startswith("HTTP/1.1 101 ") and f"Sec-WebSocket-Accept: {ws.accept_value(KEY)}" in reply
    assert "Sec-WebSocket-Protocol: binary" in reply
    assert "Sec-WebSocket-Protocol" not in ws.handshake_reply(UPGRADE).decode()


# -- the run folder -------------------------------------------------------------------------------

SERVER = "http://127.0.0.1:9"  # the discard port: nothing of these tests ever connects there


def make_run(tmp_path, leases=(), name="run-1"):
    run = tmp_path / name
    run.mkdir()
    (run / "run.json").write_text("{}")
    for rec in leases:
        record(run, rec)
    return run


def desktop(task, sample=0, attempt=0, desktop_id="d1", server=SERVER):
    return held_record(server, desktop_id, api="http://127.0.0.1:1", task_id=task, traj=traj_rel(task, sample, attempt))


def test_running_episodes_are_the_desktops_held_now(tmp_path):
    text_env = held_record(SERVER, "t1", protocol="env-cluster", task_id="text", traj=traj_rel("text", 0, 0))
    run = make_run(tmp_path, [desktop("a", desktop_id="d1"), desktop("b", 1, desktop_id="d2"), text_env,
                              released_record(SERVER, "d1"), desktop("a", 0, 1, desktop_id="d3")])
    with open(run / "leases.jsonl", "a") as f:
        f.write('{"lease": "half a line')  # a line being written
    found = eps.running(str(run))
    assert [(e.task_id, e.desktop_id, e.sample_attempt) for e in found] == [("b", "d2", (1, 0)), ("a", "d3", (0, 1))]
    assert len({e.key for e in found}) == 2 and all(len(e.key) == 12 for e in found)


def test_a_linked_leases_file_is_refused_and_a_missing_one_is_nothing_running(tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(json.dumps(desktop("secret")) + "\n")
    run = make_run(tmp_path)
    assert eps.running(str(run)) == []
    (run / "leases.jsonl").symlink_to(outside)
    with pytest.raises(eps.Refused):
        eps.running(str(run))


def test_an_episode_is_named_by_task_task_sample_or_task_sample_attempt(tmp_path):
    run = make_run(tmp_path, [desktop("a/b", 0, 0, "d1"), desktop("a/b", 1, 0, "d2"), desktop("a/b", 1, 1, "d3")])
    found = eps.running(str(run))
    ids = lambda wanted: [e.desktop_id for e in eps.find(found, wanted)]  # noqa: E731
    assert ids("a/b") == ["d1", "d2", "d3"]
    assert ids("a/b/1") == ["d2", "d3"] and ids("a/b/1/1") == ["d3"] and ids("a/b/0/0") == ["d1"]
    assert ids(found[1].key) == ["d2"] and ids("a") == [] and ids("a/b/7") == [] and ids("zzz/1/2/3") == []


def test_progress_is_the_last_complete_step_and_the_instruction_comes_from_the_claim(tmp_path):
    run = make_run(tmp_path, [desktop("a")])
    (episode,) = eps.running(str(run))
    assert eps.progress(str(run), episode)["steps"] == 0 and eps.instruction(str(run), episode) is None
    folder = run / episode.traj
    folder.mkdir(parents=True)
    steps = [{"step": i, "thought": f"thought {i}", "response": "x" * 9000, "action": [{"type": "click", "x": i}]}
             for i in range(3)]
    (folder / "traj.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps) + '{"step": 3, "thou')
    p = eps.progress(str(run), episode)
    assert p["steps"] == 3 and p["thought"] == "thought 2" and json.loads(p["action"]) == [{"type": "click", "x": 2}]
    assert len(p["response"]) == eps.TEXT_MAX and p["error"] is None
    claimed = run / "queue" / "claimed"
    claimed.mkdir(parents=True)
    (claimed / "x.json").write_text(json.dumps({"task_id": "a", "sample": 0, "attempt": 0, "instruction": "Do it."}))
    (claimed / "y.json").write_text(json.dumps({"task_id": "a", "sample": 1, "instruction": "another sample"}))
    assert eps.instruction(str(run), episode) == "Do it."


# -- the watch server -----------------------------------------------------------------------------

@pytest.fixture
def watch_server(tmp_path):
    novnc = tmp_path / "novnc"
    (novnc / "core").mkdir(parents=True)
    (novnc / "core" / "rfb.js").write_text("export default class RFB {}")
    (tmp_path / "secret.txt").write_text("not for the page")
    run = make_run(tmp_path, [desktop("task-a")])
    server = WatchServer(str(run), "127.0.0.1", 0, novnc)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def get(url, headers=None):
    """(status, headers, body) of a GET; http.client, as urllib would replace a Connection: Upgrade."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", parts.path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


def test_every_url_needs_the_servers_token(watch_server):
    base = watch_server.url()
    status, headers, page = get(base)
    assert status == 200 and b"cua watch" in page and headers["Referrer-Policy"] == "no-referrer"
    root = base.rsplit("/", 2)[0]
    for path in ("/", "/episodes.json", "/novnc/core/rfb.js", f"/{watch_server.token[:-1]}/episodes.json",
                 f"/x{watch_server.token}/"):
        assert get(root + path)[0] == 404, path
    (episode,) = json.loads(get(base + "episodes.json")[2])
    assert episode["task_id"] == "task-a" and episode["steps"] == 0
    status, _, page = get(base + "e/" + episode["key"])
    assert status == 200 and b"task-a" in page and b'import RFB from "../novnc/core/rfb.js"' in page


def test_novncs_files_are_served_and_nothing_beside_them(watch_server):
    base = watch_server.url()
    status, headers, body = get(base + "novnc/core/rfb.js")
    assert status == 200 and headers["Content-Type"] == "text/javascript" and b"class RFB" in body
    for path in ("novnc/core/../../secret.txt", "novnc/core/%2e%2e/%2e%2e/secret.txt", "novnc/../secret.txt",
                 "novnc/core/missing.js", "novnc/app/ui.js", "novnc/"):
        assert get(base + path)[0] == 404, path


def test_an_episode_that_ended_says_so_and_its_screen_is_404(watch_server):
    base = watch_server.url()
    (episode,) = eps.running(watch_server.root)
    state = json.loads(get(f"{base}e/{episode.key}/state.json")[2])
    assert state["running"] is True and state["task_id"] == "task-a"
    record(watch_server.root, released_record(SERVER, "d1"))
    watch_server._episodes = (0.0, [])  # as if its short cache had expired
    assert json.loads(get(f"{base}e/{episode.key}/state.json")[2]) == {"running": False}
    assert get(f"{base}e/{episode.key}")[0] == 404
    assert get(f"{base}e/{episode.key}/vnc", UPGRADE)[0] == 404


def test_a_screen_without_the_rollouts_relay_is_503_naming_it(watch_server):
    (episode,) = eps.running(watch_server.root)
    status, _, body = get(f"{watch_server.url()}e/{episode.key}/vnc", UPGRADE)
    assert status == 503 and b"screens.sock" in body
    assert get(f"{watch_server.url()}e/{episode.key}/vnc")[0] == 400  # not an upgrade


# -- the rollout's relay --------------------------------------------------------------------------

class Listener:
    """A TCP server that records what each connection sent it, and answers nothing."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.got: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data and (chunk := conn.recv(4096)):
                    data += chunk
                self.got.append(data)
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 21\r\n\r\n{\"message\": \"nope\"}\n\n")
            except OSError:
                pass
            conn.close()


def ask_relay(run, query, headers=UPGRADE) -> bytes:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(30)
    conn.connect(str(run / "screens.sock"))
    conn.sendall((f"GET /vnc?{query} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                  + "\r\n").encode())
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    conn.close()
    return data


def test_the_relay_opens_only_the_runs_own_desktops_and_the_token_goes_only_to_its_servers(tmp_path):
    ours, other = Listener(), Listener()
    run = make_run(tmp_path, [desktop("a", desktop_id="d1", server=ours.url),
                              desktop("b", desktop_id="d2", server=other.url)])
    relay = ScreenRelay(run, [ours.url], "the-env-token")
    try:
        assert oct(os.stat(run / "screens.sock").st_mode & 0o777) == "0o600"
        assert not [p for p in run.iterdir() if p.name.startswith(".screens-")]
        refused = {
            f"server={other.url}&id=d2": b"not one of this run's env servers",  # in leases.jsonl, not in the config
            f"server={ours.url}&id=d9": b"holds no such desktop",
            f"server={ours.url}&id=..%2Fstop_all_emulators": b"a desktop id is",
        }
        for query, why in refused.items():
            answer = ask_relay(run, query)
            assert answer.startswith(b"HTTP/1.1 404") and why in answer, answer
        assert ask_relay(run, f"server={ours.url}&id=d1", {"Upgrade": "websocket"}).startswith(b"HTTP/1.1 400")
        folder = run / traj_rel("a", 0, 0)
        folder.mkdir(parents=True)
        takeover.set_wish(folder, "hold")  # asked for, but the agent has not let go yet
        for _ in range(2):
            answer = ask_relay(run, f"server={ours.url}&id=d1&control=1")
            assert answer.startswith(b"HTTP/1.1 403") and b"nobody holds this desktop" in answer, answer
            takeover.set_wish(folder, "return")
            takeover.set_held(folder, True)  # let go of, but given back since
        assert other.got == [] and ours.got == []
        answer = ask_relay(run, f"server={ours.url}&id=d1")  # the server's own refusal comes back, named
        assert answer.startswith(b"HTTP/1.1 502") and b"404 Not Found" in answer and b"nope" in answer
        (sent,) = ours.got
        assert sent.startswith(b"GET /emulators/d1/vnc HTTP/1.1\r\n") and b"Authorization: Bearer the-env-token" in sent
        assert f"Sec-WebSocket-Key: {KEY}".encode() in sent and b"the-env-token" not in answer
        takeover.set_wish(folder, "hold")  # held by a person now: the pointer and keys go along
        assert ask_relay(run, f"server={ours.url}&id=d1&control=1").startswith(b"HTTP/1.1 502")
        assert ours.got[-1].startswith(b"GET /emulators/d1/vnc?control=1 HTTP/1.1\r\n")
    finally:
        relay.close()
        ours.sock.close()
        other.sock.close()
    assert not (run / "screens.sock").exists()


def test_cua_watch_names_what_it_cannot_watch(tmp_path):
    run = make_run(tmp_path, [desktop("a", 0, 0, "d1"), desktop("a", 1, 0, "d2")])
    for args, message in [((str(tmp_path),), "not a run folder"),
                          ((str(run), "zzz"), "no such episode runs on a desktop now; running:\n  a/0/0\n  a/1/0"),
                          ((str(run), "a"), "names 2 running episodes: give TASK/SAMPLE/ATTEMPT"),
                          ((str(run), "--takeover"), "--takeover: name the EPISODE to take over"),
                          ((str(run), "a/1/0", "--takeover"), "the episode has no folder yet")]:
        r = run_cua("watch", *args, "--no-browser", timeout=60)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    (run / "leases.jsonl").rename(tmp_path / "leases.jsonl")
    (run / "leases.jsonl").symlink_to(tmp_path / "leases.jsonl")
    r = run_cua("watch", str(run), "--no-browser", timeout=60)
    assert r.returncode == 2 and "leases.jsonl is a link" in r.stderr


def test_a_viewers_header_cannot_add_a_line_to_the_request_cua_sends_on():
    sent = forwarded({**UPGRADE, "Sec-WebSocket-Protocol": "binary\r\nAuthorization: Bearer stolen",
                      "Sec-WebSocket-Version": "13\n"})
    assert sent == ["Upgrade: websocket", "Connection: keep-alive, Upgrade", f"Sec-WebSocket-Key: {KEY}"]


# -- a person's takeover --------------------------------------------------------------------------

def test_a_wish_is_read_only_from_a_small_regular_file_and_a_stale_hold_is_given_back(tmp_path):
    folder = tmp_path / "attempt"
    folder.mkdir()
    assert takeover.wish(folder) is None
    takeover.set_wish(folder, "hold")
    assert takeover.wish(folder) == "hold"
    assert takeover.wish(folder, now=time.time() + takeover.STALE_S + 1) == "return"  # its viewer went away
    takeover.renew(folder)
    assert takeover.wish(folder) == "hold"
    for state in ("return", "finished", "fail", "abandon"):
        takeover.set_wish(folder, state)
        assert takeover.wish(folder) == state
    with pytest.raises(ValueError):
        takeover.set_wish(folder, "explode")
    (folder / takeover.WISH).unlink()
    (folder / takeover.WISH).symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text('{"state": "hold"}')
    assert takeover.wish(folder) is None  # never read through a link
    (folder / takeover.WISH).unlink()
    os.mkfifo(folder / takeover.WISH)
    assert takeover.wish(folder) is None  # nor waited on
    assert not takeover.held(folder)
    takeover.set_held(folder, True)
    assert takeover.held(folder)
    takeover.set_held(folder, False)
    takeover.set_held(folder, False)
    assert not takeover.held(folder)


@given(content=st.one_of(st.binary(max_size=5000), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["state", "at", "x"]), inner,
                                                                max_size=3), max_leaves=10).map(
    lambda v: json.dumps(v).encode())))
def test_any_file_is_a_known_wish_or_none(content, tmp_path_factory):
    folder = tmp_path_factory.mktemp("attempt")
    (folder / takeover.WISH).write_bytes(content)
    assert takeover.wish(folder) in (None, *takeover.STATES)


def post(url, body):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("POST", parts.path, body=body)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_the_page_takes_an_episode_over_and_the_server_gives_it_back_when_it_stops(watch_server):
    base = watch_server.url()
    (episode,) = eps.running(watch_server.root)
    url = f"{base}e/{episode.key}/takeover"
    status, body = post(url, b'{"state": "hold"}')
    assert status == 409 and b"no folder yet" in body  # before the episode's first step
    folder = os.path.join(watch_server.root, episode.traj)
    os.makedirs(folder)
    for bad in (b'{"state": "explode"}', b"[1, 2]", b"not json", b'{"state": ["hold"]}'):
        assert post(url, bad)[0] == 409, bad
    assert post(url.replace(watch_server.token, "x" * len(watch_server.token)), b'{"state": "hold"}')[0] == 404
    assert post(f"{base}e/nosuchkey/takeover", b'{"state": "hold"}')[0] == 404
    assert takeover.wish(folder) is None
    status, body = post(url, b'{"state": "hold"}')
    state = json.loads(body)
    assert status == 200 and state["takeover"] == "hold" and state["held"] is False  # the agent still plays
    takeover.set_held(folder, True)  # the runner lets go
    assert json.loads(get(f"{base}e/{episode.key}/state.json")[2])["held"] is True
    status, _, body = get(f"{base}e/{episode.key}/vnc?control=1", UPGRADE)
    assert status == 503 and b"screens.sock" in body
    watch_server.server_close()
    assert takeover.wish(folder) == "return"  # nobody waits on a person who has gone
