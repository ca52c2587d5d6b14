"""`cua watch`'s web server: the pages, their JSON, noVNC's files, each page's screen stream, and a
person's takeover of an episode.

Every URL starts with a token made for this server (`/<token>/...`); without it there is nothing
but 404. The screen streams go through the rollout's relay (`screens.sock` in the run folder,
rollout/screens.py), which alone holds the env servers' token: this server never sees it. A
takeover is a wish written in the attempt's folder (runfolder/takeover.py); the server renews the
holds it made while it runs, and gives them back when it stops, so no episode waits for a person
who has gone.
"""

import hmac
import json
import mimetypes
import os
import secrets
import socket
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from .._util import websocket as ws
from ..envserver.desktop.guest.ports import splice
from ..envserver.desktop.sockets import SocketFolder
from ..rollout.screens import HEAD_MAX, ask_upgrade, forwarded
from ..rollout.screens import SOCKET as RELAY_SOCKET
from ..runfolder import takeover
from ..runfolder.confined import Refused, confine, confined_dir, run_root
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

    def __init__(self, run: str, host: str = "127.0.0.1", port: int = 0, novnc: Path | None = None,
                 demo: bool = False):
        self.root = run_root(run)
        self.demo = demo  # the run is a person's demonstration (cua demo): nothing to give back
        self.name = os.path.basename(self.root)
        self.token = secrets.token_urlsafe(18)
        self.novnc = novnc
        self._episodes: tuple[float, list[eps.Watched]] = (0.0, [])
        self.holds: set[str] = set()  # the attempt folders (relative) this server asked to hold
        self.told_ended = threading.Event()  # a page has been told that its episode ended
        self._lock = threading.Lock()
        self._stop = threading.Event()
        super().__init__((host, port), _Handler)
        threading.Thread(target=self._renew, daemon=True, name="holds").start()

    def url(self, episode: eps.Watched | None = None) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/{self.token}/" + (f"e/{episode.key}" if episode else "")

    def take(self, episode: eps.Watched, state: str) -> str | None:
        """Write a person's wish for the episode (takeover.STATES); why not, or None."""
        if state not in takeover.STATES:
            return f"a takeover's state is one of {', '.join(takeover.STATES)}"
        if self.demo and state == takeover.RETURN:
            return "a demonstration has no agent to give the desktop back to: end it"
        try:
            folder = confined_dir(self.root, episode.traj)
            if not os.path.isdir(folder):
                return "the episode has no folder yet: wait for its first step"
            with self._lock:
                takeover.set_wish(folder, state)
                (self.holds.add if state == takeover.HOLD else self.holds.discard)(episode.traj)
        except Refused as e:
            return f"its folder {e}"
        except OSError as e:
            return f"cannot write the wish: {e.strerror}"
        return None

    def _renew(self) -> None:
        while not self._stop.wait(takeover.RENEW_S):
            with self._lock:
                for rel in list(self.holds):
                    try:
                        takeover.renew(confined_dir(self.root, rel))
                    except (Refused, OSError):
                        self.holds.discard(rel)

    def server_close(self) -> None:
        """Stop serving, and give back every desktop still held through this server."""
        self._stop.set()
        with self._lock:
            for rel in self.holds:
                try:
                    folder = confined_dir(self.root, rel)
                    if takeover.wish(folder) == takeover.HOLD:
                        takeover.set_wish(folder, takeover.RETURN)
                except (Refused, OSError):
                    pass
            self.holds.clear()
        super().server_close()

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
                return self._send(200, episode_page(episode.key, episode.task_id, episode.traj, server.demo),
                                  "text/html; charset=utf-8")
            if parts[2] == "state.json":
                if episode is None:
                    server.told_ended.set()
                return self._json(self._state(episode))
            if parts[2] == "vnc":
                return self._screen(episode, parse_qs(urlsplit(self.path).query).get("control") == ["1"])
        self._send(404, b"not found\n", "text/plain")

    def do_POST(self):
        """POST <token>/e/<key>/takeover {"state": ...}: a person's wish for a running episode."""
        server: WatchServer = self.server
        token, _, rest = urlsplit(self.path).path.lstrip("/").partition("/")
        self.close_connection = True  # the body is read only when everything else is right
        parts = rest.split("/")
        if not hmac.compare_digest(token.encode(), server.token.encode()) or len(parts) != 3 \
                or parts[0] != "e" or parts[2] != "takeover":
            return self._send(404, b"not found\n", "text/plain")
        episode = next((e for e in server.episodes() if e.key == parts[1]), None)
        if episode is None:
            return self._send(404, b"no such episode runs now\n", "text/plain")
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > 4096:
            return self._send(400, b"a body of up to 4096 bytes\n", "text/plain")
        try:
            state = json.loads(self.rfile.read(int(length))).get("state")
        except (ValueError, AttributeError, RecursionError):
            state = None
        if problem := server.take(episode, state if type(state) is str else ""):
            return self._send(409, f"{problem}\n".encode(), "text/plain")
        self._json(self._state(episode))

    def _state(self, episode: eps.Watched | None) -> dict:
        if episode is None:
            return {"running": False}
        root = self.server.root
        try:
            folder = confined_dir(root, episode.traj)
            wish, held = takeover.wish(folder), takeover.held(folder)
        except (Refused, OSError):
            wish, held = None, False
        return {"running": True, "task_id": episode.task_id, "traj": episode.traj, "takeover": wish,
                "held": held and wish == takeover.HOLD, "instruction": eps.instruction(root, episode),
                **eps.progress(root, episode)}

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

    def _screen(self, episode: eps.Watched | None, control: bool) -> None:
        if episode is None:
            return self._send(404, b"no such episode runs now\n", "text/plain")
        if problem := ws.upgrade_problem(self.headers):
            return self._send(400, f"{problem}\n".encode(), "text/plain")
        try:
            relay, head = _ask_relay(self.server.root, episode, self.headers, control)
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


def _ask_relay(root: str, episode: eps.Watched, headers, control: bool) -> tuple[socket.socket, bytes]:
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
        query = f"server={quote(episode.server, safe='')}&id={quote(episode.desktop_id, safe='')}"
        lines = [f"GET /vnc?{query}{'&control=1' if control else ''} HTTP/1.1",
                 "Host: rollout", *forwarded(headers)]
        head = ask_upgrade(conn, lines, "the relay did not answer")
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
