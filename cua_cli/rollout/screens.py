"""The screens of a run's desktops, for `cua watch`: a relay the rollout serves on `screens.sock` in
the run folder while it runs.

Only the rollout holds the env servers' token (it makes the local desktops' own), and it never leaves
the process: a viewer asks this socket for a desktop the run holds now (leases.jsonl) on one of the
run's own servers, and the relay opens the desktop's screen on that server (GET /emulators/{id}/vnc,
a WebSocket) with the token, then carries the stream both ways untouched. The pointer and keys go
along (`control=1`) only for a desktop a person has taken over and its agent has let go of
(runfolder/takeover.py). The socket is the user's alone (mode 0600), like the rest of the run's
files that matter.
"""

import os
import re
import shutil
import socket
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from socketserver import ThreadingMixIn, UnixStreamServer
from urllib.parse import parse_qsl, urlsplit

from .._util import websocket as ws
from .._util.diag import warn
from ..envserver.desktop.guest.ports import splice
from ..envserver.desktop.sockets import SocketFolder
from ..runfolder import takeover
from ..runfolder.confined import Refused, confine, run_root
from ..runfolder.jsonl import read_lines
from ..runfolder.leases import LEASES, held

SOCKET = "screens.sock"
DESKTOP_ID = re.compile(r"[0-9A-Za-z_.-]{1,128}")
CONNECT_TIMEOUT_S = 15.0
HEAD_MAX = 16 << 10
FORWARDED = ("Upgrade", "Connection", "Sec-WebSocket-Version", "Sec-WebSocket-Key", "Sec-WebSocket-Protocol")


class _Server(ThreadingMixIn, UnixStreamServer):
    daemon_threads = True


class ScreenRelay:
    """Serves `<run>/screens.sock` in a thread until `close`."""

    def __init__(self, run_path: Path, servers: list[str], token: str | None):
        self.run_path = Path(run_path)
        self.servers = {s.rstrip("/") for s in servers if s}
        self.token = token
        # Bound in a private folder, then moved in: nobody else can connect in between.
        private = Path(tempfile.mkdtemp(prefix=".screens-", dir=self.run_path))
        folder = SocketFolder(private)
        try:
            self._server = _Server(folder.path(SOCKET), _Handler)
            try:
                os.chmod(private / SOCKET, 0o600)
                os.replace(private / SOCKET, self.run_path / SOCKET)
            except OSError:
                self._server.server_close()
                raise
        finally:
            folder.close()
            shutil.rmtree(private, ignore_errors=True)
        self._server.relay = self
        threading.Thread(target=self._server.serve_forever, args=(0.2,), daemon=True, name="screens").start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        try:
            os.unlink(self.run_path / SOCKET)
        except FileNotFoundError:
            pass

    def desktop(self, server: str, desktop_id: str, control: bool) -> tuple[int, str] | None:
        """Why the run cannot show this desktop now, or hand over its pointer and keys (`control`): only
        to a person who took its episode over, once its agent has let go. (HTTP status, why), or None."""
        if not DESKTOP_ID.fullmatch(desktop_id):
            return 404, "a desktop id is letters, digits, '.', '_' and '-'"
        if server.rstrip("/") not in self.servers:
            return 404, f"{server[:200]} is not one of this run's env servers"
        leases = self.run_path / LEASES
        now = held(read_lines(leases, warn=False)) if leases.exists() else []  # a line being written is no lease yet
        lease = next((r for r in now if r["server"] == server and r["id"] == desktop_id), None)
        if lease is None:
            return 404, "the run holds no such desktop now (its episode has ended)"
        if control:
            try:
                folder = confine(run_root(self.run_path), lease.get("traj"))
            except Refused:
                return 403, "the desktop's episode has no folder to take it over in"
            if takeover.wish(folder) != takeover.HOLD or not takeover.held(folder):
                return 403, "nobody holds this desktop: take its episode over first, and wait for its agent to let go"
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = CONNECT_TIMEOUT_S

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        relay = self.server.relay
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query))
        server, desktop_id, control = query.get("server", ""), query.get("id", ""), query.get("control") == "1"
        if url.path != "/vnc":
            return self._fail(404, "no such route: GET /vnc?server=URL&id=ID[&control=1]")
        if problem := ws.upgrade_problem(self.headers):
            return self._fail(400, problem)
        if refused := relay.desktop(server, desktop_id, control):
            return self._fail(*refused)
        try:
            upstream, head = _open_screen(server, desktop_id, relay.token, self.headers, control)
        except (OSError, ValueError) as e:
            return self._fail(502, f"{server[:200]}: {e}")
        if not head.startswith(b"HTTP/1.1 101 "):
            upstream.close()
            status, _, rest = head.partition(b"\r\n")
            body = rest.partition(b"\r\n\r\n")[2]
            return self._fail(502, f"{server[:200]} answered {status.decode('latin-1')[9:60]}: "
                                   f"{body.decode('utf-8', 'replace')[:300]}")
        self.close_connection = True
        self.connection.settimeout(None)
        try:
            self.connection.sendall(head)  # with the first frames, if they came along
        except OSError:
            upstream.close()
            return
        splice(self.connection, upstream)

    def _fail(self, status: int, message: str) -> None:
        body = (message + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


def live_screens(run_path: Path, servers: list[str], token: str | None) -> ScreenRelay | None:
    """The run's relay, or None with a warning when the run folder cannot hold its socket: the run goes on
    without a live view."""
    try:
        return ScreenRelay(run_path, servers, token)
    except OSError as e:
        warn(f"{run_path}: no live view of its desktops (`cua watch`): {e}")
        return None


def ask_upgrade(conn: socket.socket, lines: list[str], silence: str) -> bytes:
    """Send a request's head on `conn`; the head of the answer, with whatever came after it in the same
    reads. ValueError(`silence`) when the answer ends or grows past HEAD_MAX before its head does."""
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        if not chunk or len(head) > HEAD_MAX:
            raise ValueError(silence)
        head += chunk
    return head


def forwarded(headers) -> list[str]:
    """The viewer's WebSocket headers, as lines of a request cua sends on: one line each, or left out."""
    return [f"{name}: {value}" for name in FORWARDED
            if (value := headers.get(name)) and not any(c in value for c in "\r\n\0")]


def _open_screen(server: str, desktop_id: str, token: str | None, headers,
                 control: bool) -> tuple[socket.socket, bytes]:
    """A connection to the desktop's screen route, and the head of the server's answer (a 101, or an
    error whose body the viewer sees); the token goes in our request only."""
    url = urlsplit(server)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError("not an http(s) URL")
    port = url.port or (443 if url.scheme == "https" else 80)
    conn = socket.create_connection((url.hostname, port), timeout=CONNECT_TIMEOUT_S)
    try:
        if url.scheme == "https":
            conn = ssl.create_default_context().wrap_socket(conn, server_hostname=url.hostname)
        query = "?control=1" if control else ""
        lines = [f"GET {url.path.rstrip('/')}/emulators/{desktop_id}/vnc{query} HTTP/1.1", f"Host: {url.netloc}"]
        lines += forwarded(headers)
        if token:
            lines.append(f"Authorization: Bearer {token}")
        head = ask_upgrade(conn, lines, "no answer to the screen's WebSocket upgrade")
    except BaseException:
        conn.close()
        raise
    conn.settimeout(None)
    return conn, head
