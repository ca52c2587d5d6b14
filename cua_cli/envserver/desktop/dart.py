"""DART-GUI's desktop allocation protocol ("GUI-Docker-Env") on the env server's main port, so DART's
own RemoteDockerProvider (and cua's osworld client) can allocate cua desktops.

GET /tokens  POST /start_emulator  DELETE /emulators/{id}  POST /stop_emulator  GET /emulators
GET /emulator_status/{id}  GET /ping  GET /status  POST /stop_all_emulators

and cua's own: GET /emulators/{id}/vnc, a WebSocket carrying the desktop's screen (view-only RFB, as
noVNC speaks it; with ?control=1 the viewer's pointer and keys too) to whoever holds the desktop's
token: `cua watch` reaches desktops through it, so no VNC port is opened on any host.

The bearer token (Authorization header, or "token" in the JSON body or the query, as DART's server
accepts) is compared with the one read from the environment: none given is 401, another is 403.
Replies are {"message", "code", "data"}; an error's code is its HTTP status (429 when full).
"""

import hmac
import re
from pathlib import Path

from cua_cli._util import websocket as ws
from cua_cli.envserver.desktop.httpbase import APIHandler, HTTPReply
from cua_cli.envserver.desktop.pool import PoolFull
from cua_cli.envserver.desktop.screen_share import bridge, open_screen

EMULATOR = re.compile(r"^/(emulators|emulator_status)/([0-9a-fA-F-]{1,64})$")
SCREEN = re.compile(r"^/emulators/([0-9a-fA-F-]{1,64})/vnc$")


def _fail(status: int, message: str) -> HTTPReply:
    return HTTPReply(status, {"message": message, "code": status})


def _ok(data=None, message: str = "ok") -> HTTPReply:
    return HTTPReply(200, {"message": message, "code": 0, "data": data})


class DartHandler(APIHandler):
    max_body = 1 << 20

    def route(self, method: str, path: str, fields: dict, files: dict) -> None:
        if path == "/ping":
            raise _ok({"pong": True}, "pong")
        token = self._authorize(fields)
        pool = self.server.pool
        if path == "/tokens" and method == "GET":
            mine = [lease for lease in list(pool.leases.values()) if lease.token == token]
            raise HTTPReply(200, {token: {"current": len(mine), "limit": pool.limit, "emulator_count": len(mine)}})
        if path == "/status" and method == "GET":
            raise _ok(pool.counts())
        if path == "/start_emulator" and method == "POST":
            try:
                lease = pool.allocate(token)
            except PoolFull as e:
                raise _fail(429, str(e)) from None
            except Exception as e:  # noqa: BLE001 - a desktop that failed to start is DART's 500
                raise _fail(500, f"desktop failed to start: {e}") from None
            if self.client_gone():  # it gave up waiting and never learns the id: nobody would ever release it
                pool.release(lease.desktop.id)
                self.close_connection = True
                return
            raise _ok(self._describe(lease, token), "Emulator started successfully")
        if path == "/emulators" and method == "GET":
            raise _ok([self._describe(lease, token) for lease in list(pool.leases.values()) if lease.token == token])
        if path == "/stop_emulator" and method == "POST":
            self._stop(str(fields.get("emulator_id", "")), token)
        if path == "/stop_all_emulators" and method == "POST":
            ids = [i for i, lease in list(pool.leases.items()) if lease.token == token]
            for i in ids:
                pool.release(i)
            raise _ok({"stopped": ids}, f"Stopped {len(ids)} emulators")
        screen = SCREEN.match(path)
        if screen and method == "GET":
            self._watch(screen.group(1), token, self.query().get("control") == "1")
            return
        match = EMULATOR.match(path)
        if match and match.group(1) == "emulators" and method == "DELETE":
            self._stop(match.group(2), token)
        if match and match.group(1) == "emulator_status" and method == "GET":
            lease = pool.get(match.group(2))
            if lease is None or lease.token != token:
                raise _fail(404, "no such emulator")
            alive = lease.desktop.sandbox.alive()
            raise _ok({**self._describe(lease, token), "status": "running" if alive else "exited"})
        raise _fail(404 if not (match or screen) and path not in ROUTES else 405, f"no route {method} {path}")

    def _watch(self, emulator_id: str, token: str, control: bool) -> None:
        """The desktop's screen, until the viewer or the desktop goes. The token's holder may run any code
        on the desktop already: its pointer and keys (`control`) give it nothing more."""
        lease = self.server.pool.get(emulator_id)
        if lease is None or lease.token != token:
            raise _fail(404, "no such emulator")
        if problem := ws.upgrade_problem(self.headers):
            raise _fail(400, f"/emulators/{emulator_id}/vnc is a WebSocket: {problem}")
        try:
            inside = open_screen(Path(lease.desktop.sandbox.socket_path).parent, control)
        except OSError as e:
            raise _fail(503, f"the desktop's screen cannot be watched now: {e}") from None
        self.close_connection = True  # the connection is the stream's now
        try:
            self.connection.settimeout(None)  # a viewer of a still screen sends nothing for as long as it lasts
            self.connection.sendall(ws.handshake_reply(self.headers))
        except OSError:
            inside.close()
            return
        bridge(self.rfile.read, self.connection, inside)

    def _stop(self, emulator_id: str, token: str) -> None:
        lease = self.server.pool.get(emulator_id)
        if lease is None or lease.token != token:
            raise _fail(404, "no such emulator")
        self.server.pool.release(emulator_id)
        raise _ok({"emulator_id": emulator_id}, "Emulator stopped successfully")

    @staticmethod
    def _describe(lease, token: str) -> dict:
        d = lease.desktop
        # No VNC, Chrome or VLC port is forwarded out of a desktop (it has no network): null.
        return {"emulator_id": d.id, "server_port": d.port, "vnc_port": None,
                "chromium_port": d.published.ports["chromium"], "vlc_port": d.published.ports["vlc"], "token": token,
                "start_time": lease.started_at}

    def _authorize(self, fields: dict) -> str:
        given = self.headers.get("Authorization", "").strip()
        if given[:7].lower() == "bearer ":
            given = given[7:].strip()
        given = given or str(fields.get("token") or "") or self.query().get("token", "")
        if not given:
            raise _fail(401, "missing token")
        if not hmac.compare_digest(given.encode(), self.server.token.encode()):
            raise _fail(403, "invalid token")
        return given


ROUTES = {"/tokens", "/status", "/start_emulator", "/emulators", "/stop_emulator", "/stop_all_emulators", "/ping"}
