"""`cua watch`'s web server: the pages, their JSON, noVNC's files, and each page's screen stream.

Every URL starts with a token made for this server (`/<token>/...`); without it there is nothing
but 404. The screen streams go through the rollout's relay (`screens.sock` in the run folder,
rollout/screens.py), which alone holds the env servers' token: this server never sees it.
"""

import hmac
import json
import mimetypes
import os
import secrets
import socket
import stat
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urlsplit

from .._util import websocket as ws
from ..envserver.desktop.guest.ports import splice
from ..envserver.desktop.sockets import SocketFolder
from ..rollout.screens import HEAD_MAX, forwarded
from ..rollout.screens import SOCKET as RELAY_SOCKET
from ..runfolder.confined import Refused, confine, run_root
from . import episodes as eps
from .page import episode_page, index_page

NOVNC_DIRS = ("/usr/share/novnc",)  # Debian's novnc
NOVNC_PARTS = ("core", "vendor")      # what its RFB module imports
EPISODES_TTL_S = 0.5                  # leases.jsonl is read at most this often for all the pages


def novnc_dir() -> Path | None:
    for d in NOVNC_DIRS:
        if (Path(d) / "core" / "rfb.js").is_file():
            return Path(d)
    return None


class WatchServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, run: str, host: str = "127.0.0.1", port: int = 0, novnc: Path | None = None):
        self.root = run_root(run)
        self.name = os.path.basename(self.root)
        self.token = secrets.token_urlsafe(18)
        self.novnc = novnc
        self._episodes: tuple[float, list[eps.Watched]] = (0.0, [])
        super().__init__((host, port), _Handler)

    def url(self, episode: eps.Watched | None = None) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/{self.token}/" + (f"e/{episode.key}" if episode else "")

    def episodes(self) -> list[eps.Watched]:
        at, known = self._episodes
        if time.monotonic() - at > EPISODES_TTL_S:
            try:
                known = eps.running(self.root)
            except Refused:
                known = []
            self._episodes = (time.monotonic(), known)
        return known


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        server: WatchServer = self.server
        path = urlsplit(self.path).path
        token, _, rest = path.lstrip("/").partition("/")
        if not hmac.compare_digest(token.encode(), server.token.encode()):
            return self._send(404, b"not found\n", "text/plain")
        parts = rest.split("/")
        if rest == "":
            return self._send(200, index_page(server.name), "text/html; charset=utf-8")
        if rest == "episodes.json":
            root = server.root
            return self._json([{"key": e.key, "task_id": e.task_id, "traj": e.traj, "since": e.since,
                                "steps": eps.progress(root, e)["steps"]} for e in server.episodes()])
        if parts[0] == "novnc":
            return self._novnc(parts[1:])
        if parts[0] == "e" and len(parts) in (2, 3):
            episode = next((e for e in server.episodes() if e.key == parts[1]), None)
            if len(parts) == 2:
                if episode is None:
                    return self._send(404, b"no such episode runs now\n", "text/plain")
                return self._send(200, episode_page(episode.key, episode.task_id, episode.traj),
                                  "text/html; charset=utf-8")
            if parts[2] == "state.json":
                return self._json(self._state(episode))
            if parts[2] == "vnc":
                return self._screen(episode)
        self._send(404, b"not found\n", "text/plain")

    def _state(self, episode: eps.Watched | None) -> dict:
        if episode is None:
            return {"running": False}
        root = self.server.root
        return {"running": True, "task_id": episode.task_id, "traj": episode.traj,
                "instruction": eps.instruction(root, episode), **eps.progress(root, episode)}

    def _novnc(self, parts: list[str]) -> None:
        base = self.server.novnc
        if base is None or not parts or parts[0] not in NOVNC_PARTS:
            return self._send(404, b"not found\n", "text/plain")
        try:
            path = confine(str(base), "/".join(parts))
            data = Path(path).read_bytes() if Path(path).is_file() else None
        except (Refused, OSError):
            data = None
        if data is None:
            return self._send(404, b"not found\n", "text/plain")
        kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
        kind = "text/javascript" if path.endswith(".js") else kind  # an ES module is not run as anything else
        self._send(200, data, kind, cache=True)

    def _screen(self, episode: eps.Watched | None) -> None:
        if episode is None:
            return self._send(404, b"no such episode runs now\n", "text/plain")
        if problem := ws.upgrade_problem(self.headers):
            return self._send(400, f"{problem}\n".encode(), "text/plain")
        try:
            relay, head = _ask_relay(self.server.root, episode, self.headers)
        except (OSError, Refused, ValueError) as e:
            return self._send(503, f"the run's rollout does not show its screens now: {e}\n".encode(), "text/plain")
        self.close_connection = True
        self.connection.settimeout(None)
        try:
            self.connection.sendall(head)
        except OSError:
            relay.close()
            return
        if head.startswith(b"HTTP/1.1 101 "):
            splice(self.connection, relay)
        else:
            relay.close()

    def _json(self, obj) -> None:
        self._send(200, json.dumps(obj).encode(), "application/json")

    def _send(self, status: int, body: bytes, kind: str, cache: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
        self.send_header("Referrer-Policy", "no-referrer")  # the token is in the URL: it goes nowhere else
        self.end_headers()
        self.wfile.write(body)


def _ask_relay(root: str, episode: eps.Watched, headers) -> tuple[socket.socket, bytes]:
    """A connection to the rollout's relay asking for the episode's screen, and the head of its answer
    (with whatever came after it): a 101 to pass on as it is, or an error to show."""
    path = confine(root, RELAY_SOCKET)
    if not stat.S_ISSOCK(os.lstat(path).st_mode):
        raise Refused(f"{RELAY_SOCKET} is not a socket")
    folder = SocketFolder(root)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(30)
        conn.connect(folder.path(RELAY_SOCKET))
        lines = [f"GET /vnc?server={quote(episode.server, safe='')}&id={quote(episode.desktop_id, safe='')} HTTP/1.1",
                 "Host: rollout", *forwarded(headers)]
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk or len(head) > HEAD_MAX:
                raise ValueError("the relay did not answer")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101 "):  # the error's body too, for the page's console
            while len(head) < HEAD_MAX and (chunk := conn.recv(4096)):
                head += chunk
    except BaseException:
        conn.close()
        raise
    finally:
        folder.close()
    conn.settimeout(None)
    return conn, head
