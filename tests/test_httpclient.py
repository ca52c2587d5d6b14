"""cua's HTTP/1.1 client against real sockets on loopback: framing, keep-alive, failures, hostile answers."""

import json
import socket
import time

import pytest
from helpers.servers import DRIPS, DripServer, RawServer
from helpers.waiting import wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cua_cli._util.httpclient import BadStatus, Client, NoAnswer, Unreachable


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra + \
        b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_answers_framed_every_way_http_allows_are_read_whole():
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"4;ext=1\r\n{\"a\"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n")
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + _ok(b'{"b": 2}')
    server = RawServer([_ok(b'{"x": 1}'), chunked, interim, b"HTTP/1.1 204 No Content\r\n\r\n",
                        b"HTTP/1.0 200 OK\r\n\r\n" + b"z" * 300_000])
    http = Client()
    try:
        assert http.post(f"{server.url}/a", 5, json={"q": 1}).json() == {"x": 1}
        assert http.post(f"{server.url}/a", 5).json() == {"a": 1}
        assert http.post(f"{server.url}/a", 5).json() == {"b": 2}
        assert http.post(f"{server.url}/a", 5).content == b""
        assert http.get(f"{server.url}/a", 5).content == b"z" * 300_000  # ends with the connection
        assert server.connections == 1  # kept alive until the server chose to close
    finally:
        server.close()


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error():
    server = RawServer([_ok(b"1"), _ok(b"2")], close_after=True)  # like a keep-alive timeout
    http = Client()
    try:
        assert http.post(f"{server.url}/a", 5).content == b"1"
        wait_for(lambda: server.closed == 1, 60, "the server to close the idle connection")
        assert http.post(f"{server.url}/a", 5).content == b"2"
        assert server.connections == 2
    finally:
        server.close()


def test_failures_say_whether_the_server_can_have_seen_the_request():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(Unreachable):
        Client().post(f"http://127.0.0.1:{port}/a", 5)

    server = RawServer([None])  # reads the request, hangs up
    try:
        with pytest.raises(NoAnswer) as e:
            Client().post(f"{server.url}/a", 5, json={"action": "click"})
        assert not e.value.timed_out and len(server.requests) == 1
    finally:
        server.close()

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        with pytest.raises(NoAnswer) as e:
            Client().post(f"http://127.0.0.1:{silent.getsockname()[1]}/a", 0.3)
        assert e.value.timed_out
    finally:
        silent.close()


def test_errors_come_back_as_answers_and_raise_only_when_asked():
    server = RawServer([b"HTTP/1.1 503 Busy\r\nContent-Length: 17\r\n\r\n{\"error\": \"full\"}"])
    try:
        r = Client().post(f"{server.url}/a", 5)
        assert r.status == 503 and not r.ok and r.json() == {"error": "full"}
        with pytest.raises(BadStatus) as e:
            r.raise_for_status()
        assert e.value.response is r
    finally:
        server.close()


def test_the_request_line_cannot_be_split_by_what_a_server_sent_us():
    server = RawServer([_ok(b"{}")])
    try:
        hostile_id = "1 HTTP/1.1\r\nX-Injected: yes\r\n\r\nGET /other"
        Client("tok-123").post(f"{server.url}/server/execute/{hostile_id}", 5, json={"action": "screenshot"})
        head = server.requests[0].split(b"\r\n\r\n")[0].split(b"\r\n")
        method, target, version = head[0].split(b" ")  # one request line: the id's spaces are escaped
        assert (method, version) == (b"POST", b"HTTP/1.1") and target.startswith(b"/server/execute/1%20HTTP")
        assert not any(line.startswith(b"X-Injected") for line in head) and len(server.requests) == 1
        assert b"Authorization: Bearer tok-123" in head
        assert json.loads(server.requests[0].split(b"\r\n\r\n", 1)[1]) == {"action": "screenshot"}
    finally:
        server.close()
    with pytest.raises(ValueError):
        Client("tok\r\nX-Evil: 1")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=2000),
                 st.builds(lambda head, body: head + b"\r\n\r\n" + body,
                           st.sampled_from([b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999",
                                            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked",
                                            b"HTTP/1.1 200 OK\r\nContent-Length: -1",
                                            b"HTTP/1.1 2000 OK", b"HTTP/1.1 200 OK\r\nno colon",
                                            b"HTTP/1.1 200 OK\r\nContent-Length: \xd9\xa3"]),
                           st.binary(max_size=200))))
def test_any_bytes_a_server_answers_give_an_answer_or_no_answer_never_a_crash(answer):
    server = RawServer([answer], close_after=True)
    try:
        start = time.monotonic()
        try:
            r = Client().post(f"{server.url}/a", 2)
            assert isinstance(r.status, int) and 100 <= r.status <= 999 and isinstance(r.content, bytes)
        except NoAnswer:
            pass
        assert time.monotonic() - start < 12  # never held long past its 2 s timeout (generous: a loaded machine)
    finally:
        server.close()


@pytest.mark.parametrize("kind", sorted(DRIPS))
def test_an_answer_that_never_ends_is_cut_at_the_requests_deadline(kind):
    """Each byte comes quickly, so no single read waits long: the timeout bounds the whole request."""
    with DripServer(kind) as server:
        http = Client()
        start = time.monotonic()
        with pytest.raises(NoAnswer) as e:
            http.post(f"{server.url}/a", 0.5, json={"q": 1})
        assert e.value.timed_out and time.monotonic() - start < 5  # generous: the machine may be loaded
        assert server.requests == 1


def test_after_a_timed_out_request_the_next_one_gets_its_own_deadline_and_connection():
    """The timed-out connection is out of step (the rest of that answer may still come): never reused."""
    server = RawServer([_ok(b"1")])
    with DripServer("chunks") as slow:
        http = Client()
        with pytest.raises(NoAnswer):
            http.post(f"{slow.url}/a", 0.3)
        with pytest.raises(NoAnswer) as e:  # a new request, a new deadline: it too waits its 0.3 s
            http.post(f"{slow.url}/a", 0.3)
        assert e.value.timed_out and slow.requests == 2
    try:
        assert http.post(f"{server.url}/a", 5).content == b"1"
    finally:
        server.close()


@pytest.mark.parametrize("host", ["a" * 64 + ".example", "a..b", ".", "xn--"])
def test_a_host_name_no_resolver_takes_is_unreachable_not_a_crash(host):
    with pytest.raises(Unreachable):
        Client().get(f"http://{host}:80/x", 5)
