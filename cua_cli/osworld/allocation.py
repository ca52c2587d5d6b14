"""A client of DART-GUI's desktop allocation protocol ("GUI-Docker-Env"): one fresh desktop per
episode from one or more servers, tried in order, each skipped while its quota is full.

    GET    /tokens                 {token: {"current", "limit", ...}}
    POST   /start_emulator         {"data": {"emulator_id", "server_port", ...}} once the desktop answers
    DELETE /emulators/{id}         (POST /stop_emulator {"emulator_id"} on servers without it)

cua's own `cua env-server --backend desktop` speaks it too, and so does the list allocator a
rollout starts for a fixed list of desktops. The desktop's in-VM API is then at the server's
host and the desktop's `server_port`.
"""

import time
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from .._util.budget import Budget
from .._util.httpclient import BadStatus, Client, HttpError
from .._util.retry import describe, pause
from .._util.text import clip
from ..errors import EnvError

TOKENS_TIMEOUT_S = 10.0   # DART's own client gives /tokens this long
STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Allocation:
    server: str        # the allocation server's base URL
    desktop_id: str    # its emulator_id
    api: str           # the desktop's in-VM API: http://host:server_port
    apps: dict = field(default_factory=dict)  # its apps' published ports: {"chromium"|"vlc": http://host:port}


class Allocator:
    def __init__(self, servers: list[str], token: str | None, start_timeout_s: float = 330.0,
                 wait_s: float = 300.0):
        self.servers = [s.rstrip("/") for s in servers]
        self.token = token
        self.http = Client(token)
        self.start_timeout_s = start_timeout_s  # a server answers once the desktop does (DART: up to 300 s)
        self.wait_s = wait_s                    # how long to wait while every server is full

    def allocate(self, budget: Budget) -> Allocation:
        """A new desktop from the first server with room; waits (up to wait_s) while all are full."""
        deadline = time.monotonic() + self.wait_s
        delay = 0.5
        while True:
            problems: list[str] = []
            full: list[str] = []  # servers with no room now (every desktop leased, or the host short)
            for server in self.servers:
                got = self._try(server, budget, problems, full)
                if got is not None:
                    return got
            if time.monotonic() > deadline or not full:
                raise EnvError("allocate desktop: " + "; ".join(problems + full))
            pause(delay, budget.should_stop, budget.deadline)
            delay = min(delay * 1.5, 5.0)

    def _try(self, server: str, budget: Budget, problems: list, full: list) -> Allocation | None:
        if not self._has_room(server, budget, problems, full):
            return None
        try:
            r = self.http.post(f"{server}/start_emulator", budget.timeout(self.start_timeout_s, step=False),
                               json={"token": self.token} if self.token else {})
        except HttpError as e:
            problems.append(f"{server}: {describe(e)}")
            return None
        if r.status == 429:  # cua's server says why: every desktop leased, or the host short of memory or disk
            reason = _message(r)
            full.append(f"{server}: full" + (f" ({clip(reason, 200)})" if reason else ""))
            return None
        if r.status != 200:
            problems.append(f"{server}: start_emulator answered {r.status}: {clip(r.text, 200)}")
            return None
        try:
            data = r.json()["data"]
            desktop_id, port = data["emulator_id"], data["server_port"]
        except (ValueError, RecursionError, KeyError, TypeError):
            problems.append(f"{server}: start_emulator answered without data.emulator_id and data.server_port: "
                            f"{clip(r.text, 200)}")
            return None
        if not isinstance(desktop_id, str) or isinstance(port, bool) or not isinstance(port, int):
            problems.append(f"{server}: start_emulator answered an emulator_id or server_port of the wrong type")
            return None
        api = data.get("api")  # cua's list allocator says where each desktop of its list is
        if not (isinstance(api, str) and api.startswith(("http://", "https://"))):
            api = f"http://{_host(urlsplit(server).hostname or '127.0.0.1')}:{port}"
        return Allocation(server, desktop_id, api.rstrip("/"), _apps(data, urlsplit(api).hostname or "127.0.0.1"))

    def _has_room(self, server: str, budget: Budget, problems: list, full: list) -> bool:
        """As DART's client: a server whose /tokens has no entry for our token, or a full one, is skipped."""
        try:
            r = self.http.get(f"{server}/tokens", budget.timeout(TOKENS_TIMEOUT_S))
            r.raise_for_status()
            entry = r.json().get(self.token or "") if isinstance(r.json(), dict) else None
        except (HttpError, ValueError, RecursionError) as e:
            problems.append(f"{server}: /tokens: {describe(e) if isinstance(e, HttpError) else 'not JSON'}")
            return False
        if not isinstance(entry, dict):
            problems.append(f"{server}: /tokens has no entry for this token")
            return False
        current, limit = entry.get("current"), entry.get("limit")
        if isinstance(current, int) and isinstance(limit, int) and current >= limit:
            full.append(f"{server}: full")
            return False
        return True

    def release(self, server: str, desktop_id: str, budget: Budget) -> None:
        """Give a desktop back; EnvError if the server would not take it."""
        timeout = budget.timeout(STOP_TIMEOUT_S)
        try:
            r = self.http.request("DELETE", f"{server}/emulators/{quote(desktop_id, safe='')}", timeout)
            if r.status in (404, 405):  # servers without DELETE: DART's client falls back to this
                r = self.http.post(f"{server}/stop_emulator", timeout, json={"emulator_id": desktop_id})
            if r.status == 404:
                return  # already gone: nothing is held
            r.raise_for_status()
        except HttpError as e:
            status = e.response.status if isinstance(e, BadStatus) else None
            raise EnvError(f"release desktop {desktop_id} on {server}: {describe(e)}"
                           + (f" (HTTP {status})" if status else "")) from e


def _message(r) -> str | None:
    try:
        body = r.json()
    except (ValueError, RecursionError):
        return None
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else None


def _apps(data: dict, host: str) -> dict:
    """Where the desktop publishes Chrome's debugging port and VLC's web interface, as start_emulator
    says (`chromium_port`, `vlc_port`; getters and setup steps that need them fail without)."""
    apps = {}
    for key, app in (("chromium_port", "chromium"), ("vlc_port", "vlc")):
        port = data.get(key)
        if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
            apps[app] = f"http://{_host(host)}:{port}"
    return apps


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
