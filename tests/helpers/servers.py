"""Servers on loopback that answer too slowly, wrongly or as scripted, for the HTTP client, deadline
and bad-answer tests; and the two bases every loopback test server here is built on
(`RawSocketServer` for raw bytes, `LoopbackHTTPServer` for HTTP, which faultproxy.py uses too).

`RawServer` answers each request with the next scripted bytes.

`drip` holds a connection with an answer that never ends, each kind a way
HTTP allows an answer to go on: headers, interim `100 Continue` answers, a
body, one-byte chunks, trailers. Each step of it comes quickly, so no single
read ever waits long: only a deadline on the whole request ends it.

`ModelStandIn` is an OpenAI-compatible chat server and `ClusterStandIn` an
env-cluster server (DART's protocol, a 1x1 screenshot); each answers well
until told to drip (`.drip = kind`, on the paths under `.drip_on`) or, the model, to answer a given body.
"""

import io
import json
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image as PILImage

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
_CHUNKED = _OK + b"Transfer-Encoding: chunked\r\n\r\n"
# kind -> (what is sent at once, what is sent again and again)
DRIPS = {
    "head": (_OK + b"X-Slow: ", b"a"),                                   # a header line that never ends
    "continue": (b"", b"HTTP/1.1 100 Continue\r\n\r\n"),                  # interim answers, no final one
    "body": (_OK + b"Content-Length: 100000000\r\n\r\n", b" "),          # a byte at a time
    "chunks": (_CHUNKED, b"1\r\n \r\n"),                                 # one-byte chunks, no last chunk
    "trailers": (_CHUNKED + b"2\r\n{}\r\n0\r\n", b"X-Trailer: t\r\n"),   # trailers, no empty line
}


def drip(sock: socket.socket, kind: str, stop: threading.Event, gap: float = 0.02) -> None:
    """Send the `kind` of endless answer on `sock` until the client goes away or `stop` is set."""
    prefix, unit = DRIPS[kind]
    try:
        sock.sendall(prefix)
        while not stop.wait(gap):
            sock.sendall(unit)
    except OSError:  # the client gave up: what its deadline is for
        pass


def read_request(sock: socket.socket, buf: bytes = b"") -> tuple[bytes, bytes] | None:
    """One request's head and body from `sock` (after what `buf` already holds); (request, the bytes
    read past it), or None when the client closed first."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return None
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    n = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
              if line.lower().startswith(b"content-length:")), 0)
    while len(body) < n:
        data = sock.recv(65536)
        if not data:
            return None
        body += data
    return head + b"\r\n\r\n" + body[:n], body[n:]


class RawSocketServer:
    """A raw-socket server on loopback: each connection is served by `answer(conn)` in its own thread.

    Counts the connections opened and the ones it has closed. Subclasses set their own state before
    calling `super().__init__()`, which starts accepting.
    """

    def __init__(self):
        self.connections = 0
        self.closed = 0  # connections this server has closed
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            self.answer(conn)
        finally:
            conn.close()
            self.closed += 1

    def answer(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RawServer(RawSocketServer):
    """Answers each request with the next scripted bytes; `None` closes the connection without answering.

    Records every request as it arrived, and how many connections were opened.
    """

    def __init__(self, answers, close_after=False):
        self.answers = list(answers)
        self.close_after = close_after
        self.requests: list[bytes] = []
        super().__init__()

    def answer(self, conn):
        buf = b""
        while self.answers:
            got = read_request(conn, buf)
            if got is None:
                return
            request, buf = got
            self.requests.append(request)
            answer = self.answers.pop(0)
            if answer is None:
                return
            conn.sendall(answer)
            if self.close_after:
                return


class DripServer(RawSocketServer):
    """A raw-socket server that reads each request and answers it with the `kind` of endless answer.

    It gives up after `give_up_s` (closing the connection), so a client
    without a whole-request deadline fails a test instead of hanging it.
    """

    def __init__(self, kind: str, give_up_s: float = 15.0):
        self.kind = kind
        self.requests = 0
        self.stop = threading.Event()
        self._give_up_s = give_up_s
        super().__init__()

    def answer(self, conn):
        if read_request(conn) is None:
            return
        self.requests += 1
        timer = threading.Timer(self._give_up_s, self.stop.set)
        timer.daemon = True
        timer.start()
        drip(conn, self.kind, self.stop)

    def close(self):
        self.stop.set()
        super().close()


class LoopbackHTTPServer:
    """A ThreadingHTTPServer on loopback, serving while in a `with` block: each GET or POST is counted
    by path in `requests`, its body read, and handed to `serve(handler, method, body)`."""

    def __init__(self, address: str = "127.0.0.1"):
        self.requests = Counter()     # path -> how many arrived
        self._stop = threading.Event()  # set when the server stops: what a held request waits on
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((address, 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://{address}:{self.server.server_address[1]}"

    def __enter__(self):
        # a short poll: shutdown() waits for it, at the end of every `with`
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def count(self, counter: Counter, key) -> None:
        with self._lock:
            counter[key] += 1

    def serve(self, handler: BaseHTTPRequestHandler, method: str, body: bytes) -> None:
        raise NotImplementedError

    @staticmethod
    def reply(handler: BaseHTTPRequestHandler, status: int, ctype: str, data: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _handler(self):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers, body are 2 writes: avoid 40 ms delayed-ACK stalls

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def _serve(self, method):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.count(owner.requests, self.path)
                owner.serve(self, method, body)

        return Handler


class _StandIn(LoopbackHTTPServer):
    """A loopback HTTP server whose `answer` method serves each request, unless told to drip."""

    def __init__(self):
        super().__init__()
        self.drip: str | None = None  # a DRIPS kind: requests get that endless answer...
        self.drip_on = "/"            # ... when their path starts with this

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        raise NotImplementedError

    def serve(self, handler, method, body):
        if self.drip and handler.path.startswith(self.drip_on):
            handler.close_connection = True
            return drip(handler.connection, self.drip, self._stop)
        status, data = self.answer(method, handler.path, body)
        self.reply(handler, status, "application/json", data)


def completion(content) -> bytes:
    """A chat completion whose one choice says `content`."""
    return json.dumps({"id": "c", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}).encode()


class ModelStandIn(_StandIn):
    """/v1/chat/completions answers `body` (a chat completion saying `text` unless set) with `status`."""

    def __init__(self, text: str = "Thought: done.\nAction: finished(content='ok')"):
        super().__init__()
        self.body = completion(text)
        self.status = 200

    def answer(self, method, path, body):
        if path.endswith("/models"):
            return 200, json.dumps({"object": "list", "data": [{"id": "m", "owned_by": "standin"}]}).encode()
        return self.status, self.body


def _png() -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (1, 1)).save(out, "PNG")
    return out.getvalue()


class ClusterStandIn(_StandIn):
    """The env-cluster protocol: every allocation gets a new env, each answers a 1x1 screenshot,
    takes any action and scores 0. `live` holds the envs allocated and not released."""

    PNG = _png()

    def __init__(self):
        super().__init__()
        self.live: set[str] = set()
        self._ids = iter(range(1 << 30))

    def answer(self, method, path, body):
        data = None
        if path == "/server/getAvailableAndLock":
            with self._lock:
                data = {"server_id": f"env-{next(self._ids)}"}
                self.live.add(data["server_id"])
        elif path.startswith("/server/execute/"):
            if json.loads(body).get("action") == "screenshot":
                return 200, self.PNG
            data = {}
        elif path.startswith("/server/evaluate/"):
            data = {"result": 0.0}
        elif path.startswith("/server/release/"):
            with self._lock:
                self.live.discard(path.rsplit("/", 1)[1])
        return 200, json.dumps({"data": data}).encode()
