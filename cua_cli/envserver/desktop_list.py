"""A fixed list of running desktops (VMs a user started, a cloud pool) served through DART's
allocation protocol, so runners get them exactly as they get DART's or cua's own desktops.

A rollout runs one in a thread on 127.0.0.1 (`env.osworld.desktops`). Each allocation takes a
free desktop, checks it (a screenshot and a command must answer) and runs the list's reset
command on it; a desktop that fails the check twice is put aside for the rest of the run. A
released desktop is simply free again: without a reset command, what the last episode left is
what the next one finds (the user's choice).
"""

import json
import secrets
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .._util.budget import Budget
from .._util.diag import warn
from ..errors import CuaError
from ..osworld.desktop_api import ApiSettings, DesktopAPI

CHECK_TIMEOUT_S = 30.0
RESET_TIMEOUT_S = 300.0
STRIKES = 2  # failed checks before a desktop is put aside
OSWORLD_CHROMIUM_PORT, OSWORLD_VLC_PORT = 9222, 8080  # where an OSWorld VM publishes them (its README)


class DesktopList:
    def __init__(self, urls: list[str], reset: list[str] | None, token: str):
        self.urls, self.reset, self.token = urls, reset, token
        self.free = list(range(len(urls)))
        self.held: dict[str, int] = {}         # emulator id -> index into urls
        self.strikes = [0] * len(urls)
        self.lock = threading.Lock()

    def usable(self) -> int:
        return sum(1 for s in self.strikes if s < STRIKES)

    def start(self) -> tuple[int, dict]:
        """(status, body) of start_emulator: a checked, reset desktop, or 429 while none is free."""
        while True:
            with self.lock:
                if not self.free:
                    return (429 if self.usable() else 503), {"message": "no desktop is free" if self.usable()
                                                             else "every desktop failed its checks", "code": 429}
                i = self.free.pop(0)
            problem = self._prepare(i)
            with self.lock:
                if problem is None:
                    desktop_id = str(uuid.uuid4())
                    self.held[desktop_id] = i
                    url = urlsplit(self.urls[i])
                    port = url.port or (443 if url.scheme == "https" else 80)
                    # "api": where the desktop is (DART's servers have it on their own host, at server_port);
                    # an OSWorld VM publishes Chrome's debugging port and VLC's web interface on its host
                    return 200, {"message": "Emulator started successfully", "code": 0,
                                 "data": {"emulator_id": desktop_id, "server_port": port, "api": self.urls[i],
                                          "chromium_port": OSWORLD_CHROMIUM_PORT, "vlc_port": OSWORLD_VLC_PORT,
                                          "token": self.token}}
                self.strikes[i] += 1
                if self.strikes[i] < STRIKES:
                    self.free.append(i)
                else:
                    warn(f"desktop {self.urls[i]} failed its check {STRIKES} times ({problem}); put aside")

    def _prepare(self, i: int) -> str | None:
        """Why desktop `i` cannot be handed out, or None once it answered and was reset."""
        api = DesktopAPI(ApiSettings(self.urls[i], CHECK_TIMEOUT_S, retries=0))
        try:
            api.screenshot(Budget(CHECK_TIMEOUT_S))
            if api.execute(["true"], Budget(CHECK_TIMEOUT_S)).get("returncode") != 0:
                return "a command failed"
            if self.reset:
                result = api.execute(self.reset, Budget(RESET_TIMEOUT_S), setup=True)
                if result.get("returncode") != 0:
                    return f"the reset command failed: {str(result.get('error'))[:200]}"
        except CuaError as e:
            return str(e)
        return None

    def stop(self, desktop_id: str) -> tuple[int, dict]:
        with self.lock:
            i = self.held.pop(desktop_id, None)
            if i is None:
                return 404, {"message": "no such emulator", "code": 404}
            self.free.append(i)
        return 200, {"message": "Emulator stopped", "code": 0}


class ListServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, desktops: DesktopList):
        self.desktops = desktops
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers, body are 2 writes: avoid 40 ms delayed-ACK stalls

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if secrets.compare_digest(given.encode(), self.server.desktops.token.encode()):
            return True
        self._answer(401, {"message": "invalid token", "code": 401})
        return False

    def do_GET(self):
        if not self._authorized():
            return
        d = self.server.desktops
        if self.path == "/tokens":
            with d.lock:
                entry = {"current": len(d.held), "limit": d.usable(), "emulator_count": len(d.held)}
            return self._answer(200, {d.token: entry})
        self._answer(404, {"message": "no such route", "code": 404})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self._authorized():
            return
        if self.path == "/start_emulator":
            return self._answer(*self.server.desktops.start())
        self._answer(404, {"message": "no such route", "code": 404})

    def do_DELETE(self):
        if not self._authorized():
            return
        if self.path.startswith("/emulators/"):
            return self._answer(*self.server.desktops.stop(self.path.rsplit("/", 1)[1]))
        self._answer(404, {"message": "no such route", "code": 404})
