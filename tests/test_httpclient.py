"""cua's HTTP/1.1 clients against real sockets on loopback: framing, keep-alive, failures, hostile answers.

Each test runs with the blocking client and with the event loop's (`AsyncClient`, its requests run to
their end on a loop of the test's own).
"""

import asyncio
import json
import socket
import time

import pytest
from helpers.servers import DRIPS, DripServer, RawServer
from helpers.waiting import wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cua_cli._util.httpclient import AsyncClient, BadStatus, NoAnswer, Unreachable
from cua_cli._util.httpclient import Client as BlockingClient
from cua_cli._util.interrupt import Interrupt
from cua_cli.errors import Stopped


class _OnALoop:
    """The AsyncClient called as the blocking one is: each request awaited on one loop of its own."""

    def __init__(self, *args, **kwargs):
        self.client, self.loop = AsyncClient(*args, **kwargs), asyncio.new_event_loop()

    def get(self, *args, **kwargs):
        return self.loop.run_until_complete(self.client.get(*args, **kwargs))

    def post(self, *args, **kwargs):
        return self.loop.run_until_complete(self.client.post(*args, **kwargs))

    def close(self):
        for links in self.client._idle.values():
            for link in links:
                link.close()
        self.loop.run_until_complete(asyncio.sleep(0))  # the transports' close callbacks
        self.loop.close()


@pytest.fixture(params=["blocking", "event_loop"])
def Client(request):  # noqa: N802 - stands for the class the tests construct
    if request.param == "blocking":
        yield BlockingClient
        return
    made = []

    def make(*args, **kwargs):
        made.append(_OnALoop(*args, **kwargs))
        return made[-1]

    yield make
    for client in made:
        client.close()


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra + \
        b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_answers_framed_every_way_http_allows_are_read_whole(Client):
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


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error(Client):
    server = RawServer([_ok(b"1"), _ok(b"2")], close_after=True)  # like a keep-alive timeout
    http = Client()
    try:
        assert http.post(f"{server.url}/a", 5).content == b"1"
        wait_for(lambda: server.closed == 1, 60, "the server to close the idle connection")
        assert http.post(f"{server.url}/a", 5).content == b"2"
        assert server.connections == 2
    finally:
        server.close()


def test_failures_say_whether_the_server_can_have_seen_the_request(Client):
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


def test_errors_come_back_as_answers_and_raise_only_when_asked(Client):
    server = RawServer([b"HTTP/1.1 503 Busy\r\nContent-Length: 17\r\n\r\n{\"error\": \"full\"}"])
    try:
        r = Client().post(f"{server.url}/a", 5)
        assert r.status == 503 and not r.ok and r.json() == {"error": "full"}
        with pytest.raises(BadStatus) as e:
            r.raise_for_status()
        assert e.value.response is r
    finally:
        server.close()


def test_the_request_line_cannot_be_split_by_what_a_server_sent_us(Client):
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


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=2000),
                 st.builds(lambda head, body: head + b"\r\n\r\n" + body,
                           st.sampled_from([b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999",
                                            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked",
                                            b"HTTP/1.1 200 OK\r\nContent-Length: -1",
                                            b"HTTP/1.1 2000 OK", b"HTTP/1.1 200 OK\r\nno colon",
                                            b"HTTP/1.1 200 OK\r\nContent-Length: \xd9\xa3"]),
                           st.binary(max_size=200))))
def test_any_bytes_a_server_answers_give_an_answer_or_no_answer_never_a_crash(Client, answer):
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
def test_an_answer_that_never_ends_is_cut_at_the_requests_deadline(Client, kind):
    """Each byte comes quickly, so no single read waits long: the timeout bounds the whole request."""
    with DripServer(kind) as server:
        http = Client()
        start = time.monotonic()
        with pytest.raises(NoAnswer) as e:
            http.post(f"{server.url}/a", 0.5, json={"q": 1})
        assert e.value.timed_out and time.monotonic() - start < 5  # generous: the machine may be loaded
        assert server.requests == 1


def test_after_a_timed_out_request_the_next_one_gets_its_own_deadline_and_connection(Client):
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
def test_a_host_name_no_resolver_takes_is_unreachable_not_a_crash(Client, host):
    with pytest.raises(Unreachable):
        Client().get(f"http://{host}:80/x", 5)


def test_on_the_event_loop_a_stop_ends_a_request_the_server_holds_at_once():
    """The interrupt cancels the wait: the request ends as Stopped long before its 60 s timeout, and its
    connection (its answer may still come) is never used again."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(4)  # connections complete in the backlog; nothing is ever read or answered
    url = f"http://127.0.0.1:{held.getsockname()[1]}/a"

    async def stopped_while_waiting():
        client, interrupt = AsyncClient(), Interrupt()
        asyncio.get_running_loop().call_later(0.2, interrupt.set)
        start = time.monotonic()
        with pytest.raises(Stopped):
            await client.post(url, 60, json={"q": 1}, interrupt=interrupt)
        assert not any(client._idle.values())
        with pytest.raises(Stopped):  # already set: nothing more is sent
            await client.post(url, 60, interrupt=interrupt)
        return time.monotonic() - start

    try:
        assert asyncio.run(stopped_while_waiting()) < 10  # generous: a loaded machine
    finally:
        held.close()


def test_on_the_event_loop_requests_at_once_each_get_a_connection_and_later_ones_reuse_them():
    n = 12
    server = RawServer([_ok(b"%d" % i) for i in range(3 * n)])

    async def rounds():
        client = AsyncClient()
        first = await asyncio.gather(*(client.get(f"{server.url}/a", 10) for _ in range(n)))
        again = await asyncio.gather(*(client.get(f"{server.url}/a", 10) for _ in range(n)))
        return first + again

    try:
        answers = asyncio.run(rounds())
        assert sorted(int(r.content) for r in answers) == list(range(2 * n))  # each answer read once, whole
        assert server.connections == n
    finally:
        server.close()
