"""HTTP/1.1 to env and model servers: kept-alive connections, little CPU per request.

Runners make a few requests per step for every episode in flight, so the
client's own cost is the harness's cost. Measured on this project's 2-core
machine with 250 KB screenshots (scripts/bench_rollout.py): `requests`
spends about 0.5 ms of CPU per request, urllib3 alone 0.13 ms, most of it
in http.client's email-based header parser; this client about 0.05 ms. It
speaks only what cua needs: one request at a time per connection,
Content-Length or chunked answers, no redirects, no proxies from the
environment (a bearer token goes only to the server it was configured for).

Two clients share the request head and the answer's reader (`_Reader`, fed
bytes as they come, so it does no I/O of its own): `Client` blocks and keeps
one connection per thread and server; `AsyncClient` runs on an event loop
(the runners'), with a pool of idle connections per server, each an asyncio
protocol whose bytes go straight to the reader.

Failures say what a retry must know: `Unreachable` (no connection was
opened, so the server never saw the request), `NoAnswer` (the request went
out and may have been acted on, but no whole answer came back), `BadStatus`
(an answer of 400 or above), and for the callers that read the answer,
`BadAnswer` (a whole answer that is not what the protocol answers).

A request's `timeout` is a deadline for all of it: connecting, sending, every
read, interim answers and trailers. A server that answers a byte at a time
holds it no longer than one that does not answer. The blocking client gives
each socket operation what is left (one settimeout before each send or recv
that waits); the event loop's sets one timer per request. An AsyncClient
request given an `interrupt` (interrupt.py) ends as errors.Stopped the moment
it is set. The name lookup of a host name is the system resolver's and is not
bounded.
"""

import asyncio
import base64
import json as jsonlib
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

from .interrupt import Interrupt, wait

MAX_HEAD = 64 * 1024          # status line and headers
MAX_BODY = 256 * 1024 * 1024  # no answer cua reads is anywhere near this
_PATH_SAFE = "/:@!$&'()*+,;=-._~%?"  # what may stay as is in a request target
SMALL_BODY = 16 * 1024        # sent in one write with the head; a larger one is not copied to join it
FRESH_S = 0.05                # an idle connection younger than this is reused without a poll


class HttpError(Exception):
    pass


class Unreachable(HttpError):
    """No connection was opened: the server cannot have seen the request."""


class NoAnswer(HttpError):
    """The request went out (or may have) but no whole answer came back."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class BadAnswer(HttpError):
    """A whole answer came back, but it is not what the protocol answers (a caller's judgement)."""


class BadStatus(HttpError):
    def __init__(self, response: "Response"):
        super().__init__(f"HTTP {response.status}")
        self.response = response


@dataclass
class Response:
    method: str
    url: str
    status: int
    content: bytes
    headers: dict  # lower-case names

    @property
    def ok(self) -> bool:
        return self.status < 400

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return jsonlib.loads(self.content)

    def raise_for_status(self) -> None:
        if self.status >= 400:
            raise BadStatus(self)


class _Malformed(Exception):
    pass


def _auth(token: str | None, basic: tuple[str, str] | None) -> str:
    """The Authorization header line: `token` a bearer token; `basic` (user, password) of HTTP basic auth."""
    if token and (not token.isascii() or any(c in token for c in "\r\n")):
        raise ValueError("a bearer token must be ASCII without line breaks")
    if basic is not None:
        pair = base64.b64encode(f"{basic[0]}:{basic[1]}".encode("utf-8")).decode("ascii")
        return f"Authorization: Basic {pair}\r\n"
    return f"Authorization: Bearer {token}\r\n" if token else ""


def _prepare(method: str, url: str, auth: str, json, data: bytes | list[bytes] | None, params: dict | None,
             content_type: str) -> tuple:
    """(the URL split, the request's head, its body: bytes, or the list of pieces it was given in)."""
    u = urlsplit(url)
    target = quote(u.path or "/", safe=_PATH_SAFE) + (f"?{quote(u.query, safe=_PATH_SAFE)}" if u.query else "")
    if params:
        target += ("&" if "?" in target else "?") + urlencode(params)
    if json is not None:
        data = jsonlib.dumps(json).encode()
    body = data or b""
    if any(c in content_type for c in "\r\n"):
        raise ValueError("a content type must be one line")
    length = len(body) if isinstance(body, bytes) else sum(map(len, body))
    head = (f"{method} {target} HTTP/1.1\r\nHost: {u.netloc}\r\n{auth}"
            f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n")
    if not head.isascii():  # only the host can be: the target is percent-encoded
        raise Unreachable(f"cannot address {u.netloc!r}: not an ASCII host name")
    return u, head.encode("ascii"), body


def _port(u) -> int:
    return u.port or (443 if u.scheme == "https" else 80)


class Client:
    """One per env or model provider; threads share it, each with its own connections."""

    def __init__(self, token: str | None = None, basic: tuple[str, str] | None = None):
        """`token`: a bearer token; `basic`: (user, password) of HTTP basic auth (VLC's web interface)."""
        self.auth = _auth(token, basic)
        self._local = threading.local()

    def get(self, url: str, timeout: float, params: dict | None = None) -> Response:
        return self.request("GET", url, timeout, params=params)

    def post(self, url: str, timeout: float, json=None, data: bytes | None = None) -> Response:
        return self.request("POST", url, timeout, json=json, data=data)

    def request(self, method: str, url: str, timeout: float, json=None, data: bytes | None = None,
                params: dict | None = None, content_type: str = "application/json") -> Response:
        """Send one request; any status comes back as a Response. `data` is sent as JSON unless
        `content_type` says otherwise (a form, for servers that read only forms)."""
        u, head, body = _prepare(method, url, self.auth, json, data, params, content_type)
        deadline = time.monotonic() + timeout
        conn = self._connection(u)
        if not conn.usable():
            conn.open(deadline)
        try:
            conn.deadline = deadline
            conn.send(head)
            if body:
                conn.send(body)
            status, headers, content = conn.read_response()
        except TimeoutError:
            conn.close()
            raise NoAnswer("timed out", timed_out=True) from None
        except _Malformed as e:
            conn.close()
            raise NoAnswer(f"malformed answer ({e})") from None
        except OSError as e:
            conn.close()
            raise NoAnswer(f"connection lost ({type(e).__name__})") from None
        return Response(method, url, status, content, headers)

    def _connection(self, u) -> "_Connection":
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        key = (u.scheme, u.hostname, u.port)
        if key not in conns:
            conns[key] = _Connection(u.scheme, u.hostname or "", _port(u))
        return conns[key]


class _Reader:
    """One answer read from the bytes as they come: `answer()` is a generator that yields how many bytes
    it would like next whenever it has too few, and is sent the next bytes (b"" once the stream has
    ended); it returns (status, headers, content, whether the connection may be kept). Bytes past the
    answer stay in `buf`."""

    def __init__(self):
        self.buf = b""

    def answer(self):
        while True:
            while (end := self.buf.find(b"\r\n\r\n")) < 0:
                if len(self.buf) > MAX_HEAD:
                    raise _Malformed("headers too long")
                yield from self._fill(len(self.buf) + 1)
            head, self.buf = self.buf[:end].decode("latin-1"), self.buf[end + 4:]
            lines = head.split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not (
                    len(parts[1]) == 3 and parts[1].isdigit() and parts[1].isascii()):
                raise _Malformed(f"status line {lines[0][:80]!r}")
            status = int(parts[1])
            headers = {}
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                if not colon:
                    raise _Malformed(f"header line {line[:80]!r}")
                headers[name.strip().lower()] = value.strip()
            if 100 <= status < 200:
                continue  # an interim answer: the real one follows
            break
        keep = parts[0] == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if status in (204, 304):
            content = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            content = yield from self._chunked()
        elif "content-length" in headers:
            n = headers["content-length"]
            if not (n.isdigit() and n.isascii() and int(n) <= MAX_BODY):
                raise _Malformed(f"content-length {n[:40]!r}")
            content = yield from self._take(int(n))
        else:  # delimited by the end of the connection
            yield from self._fill_to_close()
            content, self.buf, keep = self.buf, b"", False
        return status, headers, content, keep

    def _fill(self, need: int):
        """Until at least `need` bytes are buffered."""
        parts, have = [self.buf], len(self.buf)
        while have < need:
            chunk = yield min(max(65536, need - have), 1 << 20)  # no huge buffer on a claimed length
            if not chunk:
                raise _Malformed("the server closed the connection")
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)

    def _take(self, n: int):
        yield from self._fill(n)
        if len(self.buf) == n:  # the usual case for a body: no second copy
            out, self.buf = self.buf, b""
        else:
            out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self, limit: int):
        while (end := self.buf.find(b"\r\n")) < 0:
            if len(self.buf) > limit:
                raise _Malformed("line too long")
            yield from self._fill(len(self.buf) + 1)
        line, self.buf = self.buf[:end], self.buf[end + 2:]
        return line

    def _chunked(self):
        chunks, total = [], 0
        while True:
            size = (yield from self._line(1024)).split(b";", 1)[0].strip()
            if not size or len(size) > 16 or size.strip(b"0123456789abcdefABCDEF"):
                raise _Malformed(f"chunk size {size[:40]!r}")
            n = int(size, 16)
            total += n
            if total > MAX_BODY:
                raise _Malformed("answer too large")
            if n == 0:
                while (yield from self._line(MAX_HEAD)):  # trailers, up to the empty line
                    pass
                return b"".join(chunks)
            chunks.append((yield from self._take(n)))
            if (yield from self._take(2)) != b"\r\n":
                raise _Malformed("chunk not followed by CRLF")

    def _fill_to_close(self):
        parts, have = [self.buf], len(self.buf)
        while chunk := (yield 65536):
            parts.append(chunk)
            have += len(chunk)
            if have > MAX_BODY:
                raise _Malformed("answer too large")
        self.buf = b"".join(parts)


class _Connection(_Reader):
    """A blocking connection: each read waits for what is left of the request's deadline."""

    def __init__(self, scheme: str, host: str, port: int):
        super().__init__()
        self.scheme, self.host, self.port = scheme, host, port
        self.sock: socket.socket | None = None
        self.deadline = 0.0  # time.monotonic() by which the current request ends

    def usable(self) -> bool:
        """Open, and not closed by the server while idle (a kept-alive connection may be)."""
        if self.sock is None:
            return False
        if self.buf:  # bytes past the last answer: the connection is out of step
            self.close()
            return False
        poll = select.poll()
        poll.register(self.sock, select.POLLIN)
        if poll.poll(0):  # the server's close, or bytes nobody asked for: start afresh
            self.close()
            return False
        return True

    def open(self, deadline: float) -> None:
        """Connect, and for https shake hands, by `deadline`; each address of the host gets what is left."""
        sock = error = None
        try:
            for family, kind, proto, _, address in socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM):
                sock = socket.socket(family, kind, proto)
                try:
                    sock.settimeout(_left(deadline))
                    sock.connect(address)
                    break
                except OSError as e:
                    sock.close()
                    sock, error = None, e
            if sock is None:
                raise error
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # head and body go out at once
            if self.scheme == "https":
                sock.settimeout(_left(deadline))  # the whole handshake: ssl keeps one deadline for it
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except (OSError, UnicodeError) as e:  # UnicodeError: a host name IDNA refuses (an empty or long label)
            if sock is not None:
                sock.close()
            raise Unreachable(f"connection failed ({type(e).__name__})") from None
        self.sock, self.buf = sock, b""

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock, self.buf = None, b""

    def send(self, data: bytes) -> None:
        """sendall, by the deadline: ssl's sendall would give each of its sends the whole timeout."""
        with memoryview(data) as view:
            sent = 0
            while sent < len(view):
                self.sock.settimeout(_left(self.deadline))
                sent += self.sock.send(view[sent:])

    def read_response(self) -> tuple[int, dict, bytes]:
        reading = self.answer()
        try:
            want = next(reading)
            while True:
                self.sock.settimeout(_left(self.deadline))
                want = reading.send(self.sock.recv(want))
        except StopIteration as done:
            status, headers, content, keep = done.value
        finally:
            reading.close()
        if not keep:
            self.close()
        return status, headers, content


class AsyncClient:
    """Client's twin on an event loop: one per env or model provider, used from one loop at a time; a
    request takes an idle connection to its server, or opens one, and gives it back after a whole answer."""

    def __init__(self, token: str | None = None, basic: tuple[str, str] | None = None):
        self.auth = _auth(token, basic)
        self._idle: dict[tuple, list[_Link]] = {}
        self._tls: ssl.SSLContext | None = None

    async def get(self, url: str, timeout: float, params: dict | None = None,
                  interrupt: Interrupt | None = None) -> Response:
        return await self.request("GET", url, timeout, params=params, interrupt=interrupt)

    async def post(self, url: str, timeout: float, json=None, data: bytes | list[bytes] | None = None,
                   interrupt: Interrupt | None = None) -> Response:
        return await self.request("POST", url, timeout, json=json, data=data, interrupt=interrupt)

    async def request(self, method: str, url: str, timeout: float, json=None, data: bytes | list[bytes] | None = None,
                      params: dict | None = None, content_type: str = "application/json",
                      interrupt: Interrupt | None = None) -> Response:
        """As Client.request; `data` may also be a list of pieces, sent as they are, never joined (a
        large body's copy saved). errors.Stopped once `interrupt` is set."""
        u, head, body = _prepare(method, url, self.auth, json, data, params, content_type)
        deadline = time.monotonic() + timeout
        key = (u.scheme, u.hostname, u.port)
        link = await self._link(key, u, deadline, interrupt)
        try:
            status, headers, content, keep = await link.exchange(head, body, deadline, interrupt)
        except BaseException as e:  # the rest of that answer may still come: the connection is out of step
            link.close()
            if isinstance(e, TimeoutError):
                raise NoAnswer("timed out", timed_out=True) from None
            if isinstance(e, _Malformed):
                raise NoAnswer(f"malformed answer ({e})") from None
            if isinstance(e, OSError):
                raise NoAnswer(f"connection lost ({type(e).__name__})") from None
            raise  # Stopped, or the task cancelled
        if keep and not link.buf and not link.closed:
            link.idle_since = time.monotonic()
            self._idle.setdefault(key, []).append(link)
        else:
            link.close()
        return Response(method, url, status, content, headers)

    async def _link(self, key: tuple, u, deadline: float, interrupt: Interrupt | None) -> "_Link":
        loop = asyncio.get_running_loop()
        idle = self._idle.get(key, [])
        while idle:
            link = idle.pop()
            if link.loop is loop and link.usable():
                return link
            link.close()
        link = _Link(loop)
        tls = None
        if u.scheme == "https":
            tls = self._tls = self._tls or ssl.create_default_context()
        connecting = asyncio.ensure_future(loop.create_connection(
            lambda: link, u.hostname or "", _port(u), ssl=tls, server_hostname=u.hostname if tls else None))
        try:
            await wait(connecting, deadline, interrupt)
        except (OSError, UnicodeError, TimeoutError) as e:
            raise Unreachable(f"connection failed ({type(e).__name__})") from None
        return link  # with TCP_NODELAY, as asyncio sets it on every TCP transport


class _Link(_Reader, asyncio.Protocol):
    """A connection on the event loop: what arrives goes to the reader of the answer awaited, if any."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        super().__init__()
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reading = None   # the reader's generator while an answer is awaited
        self.answered: asyncio.Future | None = None
        self.poll = None      # of its socket, for a close unseen while it was idle
        self.idle_since = 0.0

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.reading is None:  # bytes nobody asked for: out of step
            self.close()
        else:
            self._feed(data)

    def eof_received(self) -> bool:
        if self.reading is not None:
            self._feed(b"")
        self.close()
        return False

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.reading is not None:
            if exc is None:
                self._feed(b"")
            else:
                self._end(exception=exc if isinstance(exc, OSError) else ConnectionError(str(exc)))

    def usable(self) -> bool:
        """Open, and not closed by the server while idle: its close may still wait in the socket, unseen by
        the loop (a request queued behind others), as may bytes nobody asked for. A connection idle for a
        moment only is taken as it is: no server closes one that soon (the poll is a system call)."""
        if self.closed:
            return False
        if time.monotonic() - self.idle_since < FRESH_S:
            return True
        if self.poll is None:
            self.poll = select.poll()
            self.poll.register(self.transport.get_extra_info("socket").fileno(), select.POLLIN)
        return not self.poll.poll(0)

    def close(self) -> None:
        self.closed = True
        if self.reading is not None:
            self.reading.close()
            self.reading = None
        if self.transport is not None:
            try:
                self.transport.close()
            except RuntimeError:  # its loop has closed (a client used by one asyncio.run, then another)
                pass

    async def exchange(self, head: bytes, body: bytes | list[bytes], deadline: float,
                       interrupt: Interrupt | None) -> tuple:
        """Send the request; the answer as the reader returns it."""
        self.reading, self.answered = self.answer(), self.loop.create_future()
        next(self.reading)
        if isinstance(body, bytes) and len(body) < SMALL_BODY:
            self.transport.write(head + body)
        else:  # no copy of a large body: pieces go out together as they are (uvloop: one writev)
            self.transport.writelines([head, body] if isinstance(body, bytes) else [head, *body])
        return await wait(self.answered, deadline, interrupt)

    def _feed(self, data: bytes) -> None:
        try:
            self.reading.send(data)
        except StopIteration as done:
            self._end(result=done.value)
        except _Malformed as e:
            self._end(exception=e)

    def _end(self, result=None, exception=None) -> None:
        self.reading.close()
        self.reading = None
        if not self.answered.done():
            if exception is None:
                self.answered.set_result(result)
            else:
                self.answered.set_exception(exception)


def _left(deadline: float) -> float:
    """What is left until `deadline`, for the next socket operation; TimeoutError once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
