"""HTTP server speaking the env-cluster protocol, backed by MiniWoB browsers.

POST /server/getAvailableAndLock   {"task_id", "os", "config": {"miniwob", "seed"}}
POST /server/execute/{id}          {"action": "screenshot" | "WAIT" | "DONE" | "FAIL" | <pyautogui code>}
POST /server/evaluate/{id}         (evaluator object, ignored)
POST /server/release/{id}
GET  /server/list
Responses are {"data": ...} or {"error": message}; screenshots are raw PNG.
A client's mistake is a 4xx with a short message, and a program (code action) is
parsed and checked whole before any of it runs. 500 means a fault of the server;
its traceback goes to the server's log only.

The same server also speaks AgentGym's WebArena protocol (agentgym_webarena.py);
both protocols share one pool of browsers, so --max-envs bounds them together.
"""

import hmac
import json
import logging
import os
import re
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

from cua_cli.envserver.miniwob_backend import DEFAULT_EPISODE_MAX_TIME, MiniWobBrowser, check_task
from cua_cli.envserver.pyautogui_subset import DisallowedCode, parse_code
from cua_cli.signals import STOP_SIGNALS

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
MAX_EPISODE_TIME = 3600.0  # seconds
MAX_SEED = 2**53 - 1  # larger seeds are not exact as the JavaScript numbers MiniWoB seeds with
SESSION_PATH = re.compile(r"^/server/(execute|evaluate|release)/([^/]+)$")
ENV_CLUSTER = "env-cluster"  # the kind of session the /server/* routes make and see


class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Session:
    server_id: str
    task_id: Any
    env: str
    browser: MiniWobBrowser
    kind: str = ENV_CLUSTER  # the protocol that made it; the other protocol's routes never see it
    state: Any = None  # what that protocol keeps between requests (an AgentGym episode)
    created_at: float = field(default_factory=time.time)
    lock: threading.Lock = field(default_factory=threading.Lock)  # selenium is not thread-safe
    released: bool = False
    last_used: float = field(default_factory=time.monotonic)


def _close_quietly(browser: MiniWobBrowser) -> None:
    try:
        browser.close()
    except Exception as e:  # a dead browser cannot be closed twice; nothing else to do
        log.warning("closing browser failed: %s", e)


class EnvPool:
    """At most max_envs browsers: busy ones belong to a session; released ones
    stay idle and are reused by the next allocation (a launch costs ~1 s)."""

    def __init__(self, max_envs: int, idle_timeout_s: float = 0.0):
        if max_envs < 1:
            raise ValueError("max_envs must be at least 1")
        self.max_envs = max_envs
        # A client whose allocation answer was lost never releases that env: after
        # this long without a request, a session is released for it (0: never).
        self.idle_timeout_s = idle_timeout_s
        self._lock = threading.Lock()
        self._started = threading.Condition(self._lock)  # notified when an allocation is through
        self._sessions: dict[str, Session] = {}
        self._idle: list[MiniWobBrowser] = []
        self._starting = 0  # allocations whose browser is being launched or reset
        self._closed = False

    def allocate(self, task_id: Any, task: str, seed: int, episode_max_time: float) -> tuple[Session, str]:
        """Lock a browser showing a new episode of `task` (a name check_task accepts)."""
        return self.open(uuid.uuid4().hex, ENV_CLUSTER, f"miniwob/{task}",
                         lambda b: b.reset(task, seed, episode_max_time), task_id, task)

    def open(self, server_id: str, kind: str, env: str, start: Callable[[MiniWobBrowser], Any],
             task_id: Any = None, task: str | None = None) -> tuple[Session, Any]:
        """Lock a browser for a new session, run start(browser) on it; (session, what start returned)."""
        with self._lock:
            if self._closed:
                raise HTTPError(503, "env server is shutting down")
            if len(self._sessions) + self._starting >= self.max_envs:
                raise HTTPError(503, f"all {self.max_envs} envs busy")
            # Prefer a browser already showing this task: no page load needed.
            browser = next((b for b in self._idle if task and b.task == task), None)
            browser = browser or (self._idle[-1] if self._idle else None)
            if browser:
                self._idle.remove(browser)
            self._starting += 1
        # Until `_starting` counts this allocation out, close_all() waits for it: a
        # browser it cannot see yet must still be quit before the server exits.
        try:
            try:
                browser = browser or MiniWobBrowser()
                started = start(browser)
            except BaseException:
                if browser:
                    _close_quietly(browser)
                raise
            session = Session(server_id, task_id, env, browser, kind)
            with self._lock:
                closed = self._closed
                if not closed:
                    self._sessions[session.server_id] = session
            if closed:
                _close_quietly(browser)
                raise HTTPError(503, "env server is shutting down")
            return session, started
        finally:
            with self._lock:
                self._starting -= 1
                self._started.notify_all()

    def use(self, server_id: str, action: Callable[[MiniWobBrowser], Any]) -> Any:
        """Run action(browser) while holding the session's lock."""
        return self.use_session(server_id, lambda s: action(s.browser))

    def use_session(self, server_id: str, action: Callable[[Session], Any], kind: str = ENV_CLUSTER) -> Any:
        """Run action(session) while holding the session's lock."""
        session = self._get(server_id, kind)
        with session.lock:
            if session.released:
                raise HTTPError(404, f"unknown server id {server_id!r}")
            try:
                return action(session)
            finally:
                session.last_used = time.monotonic()

    def release(self, server_id: str, kind: str = ENV_CLUSTER) -> None:
        session = self._get(server_id, kind)
        with session.lock:  # waits for an in-flight action to finish
            if session.released:
                raise HTTPError(404, f"unknown server id {server_id!r}")
            session.released = True
            try:
                session.browser.stop()
                reusable = True
            except Exception:  # crashed browser: do not reuse
                reusable = False
        with self._lock:
            if self._sessions.pop(server_id, None) is None:
                return  # close_all() already quit it
            if reusable:
                self._idle.append(session.browser)
                return
        _close_quietly(session.browser)

    def expire_idle(self) -> None:
        """Release the sessions nobody has used for `idle_timeout_s`."""
        deadline = time.monotonic() - self.idle_timeout_s
        with self._lock:
            idle = [(sid, s.kind) for sid, s in self._sessions.items() if s.last_used < deadline]
        for sid, kind in idle:
            try:
                self.release(sid, kind)
                log.warning("released env %s: no request for %.0f s", sid, self.idle_timeout_s)
            except HTTPError:
                pass  # released meanwhile

    def sessions(self, kind: str = ENV_CLUSTER) -> list[dict]:
        """The live sessions of one kind; service_id is server_id under the name DART's client reads."""
        with self._lock:
            sessions = list(self._sessions.values())
        return [
            {"server_id": s.server_id, "service_id": s.server_id, "created_at": s.created_at,
             "task_id": s.task_id, "env": s.env}
            for s in sessions
            if not s.released and s.kind == kind
        ]

    def close_all(self, wait_s: float = 60.0) -> None:
        """Quit every browser, busy, idle or being started; later allocations get 503."""
        with self._lock:
            self._closed = True
            browsers = [s.browser for s in self._sessions.values()] + self._idle
            self._sessions.clear()
            self._idle.clear()
        # In parallel: each quit takes a fraction of a second.
        threads = [threading.Thread(target=_close_quietly, args=(b,)) for b in browsers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with self._lock:  # allocations under way quit their own browser once they see `_closed`
            self._started.wait_for(lambda: self._starting == 0, timeout=wait_s)

    def _get(self, server_id: str, kind: str) -> Session:
        with self._lock:
            session = self._sessions.get(server_id)
        if session is None or session.kind != kind:
            raise HTTPError(404, f"unknown server id {server_id!r}")
        return session


class EnvServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], pool: EnvPool, token: str, verbose: bool, agentgym):
        self.pool = pool
        self.agentgym = agentgym  # AgentGym's WebArena routes (agentgym_webarena.WebArenaRoutes)
        self.token = token
        self.verbose = verbose
        self._next_expiry = 0.0
        super().__init__(address, Handler)

    def service_actions(self) -> None:
        # serve_forever calls this between polls; expiry runs on a thread so accepting never waits.
        if self.pool.idle_timeout_s and time.monotonic() >= self._next_expiry:
            self._next_expiry = time.monotonic() + min(30.0, self.pool.idle_timeout_s / 4)
            threading.Thread(target=self.pool.expire_idle, daemon=True).start()

    def close_all(self) -> None:
        self.pool.close_all()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response has Content-Length
    timeout = 300  # drop idle keep-alive connections eventually
    disable_nagle_algorithm = True  # headers, body are 2 writes: avoid 40 ms delayed-ACK stalls
    server: EnvServer

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def log_message(self, format, *args):
        if self.server.verbose:
            super().log_message(format, *args)

    def _handle(self, method: str) -> None:
        try:
            self._answer(method)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-request (e.g. its runner died): nobody to tell

    def _answer(self, method: str) -> None:
        try:
            body = self._read_body()  # read first so the connection stays usable on errors
            self._authorize()
            path, _, query = self.path.partition("?")
            if path in self.server.agentgym.routes:
                self._send(*self.server.agentgym.handle(method, path, query, body))
                return
            result = self._route(method, path, body)
            if isinstance(result, bytes):
                self._send(200, result, "image/png")
            else:
                self._send_json(200, {"data": result})
        except HTTPError as e:
            self._send_json(e.status, {"error": str(e)})
        except DisallowedCode as e:
            self._send_json(400, {"error": str(e)})
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as e:
            log.exception("%s %s failed", method, self.path)
            first_line = (str(e).strip().splitlines() or [""])[0]
            self._send_json(500, {"error": f"{type(e).__name__}: {first_line}"})

    def _route(self, method: str, path: str, body: Any) -> Any:
        pool = self.server.pool
        if path == "/server/list":
            self._expect(method, "GET")
            return pool.sessions()
        if path == "/server/getAvailableAndLock":
            self._expect(method, "POST")
            return self._allocate(body)
        match = SESSION_PATH.match(path)
        if not match:
            raise HTTPError(404, f"no such endpoint {path}")
        self._expect(method, "POST")
        call, server_id = match.groups()
        if call == "execute":
            return self._execute(server_id, body)
        if call == "evaluate":
            done, reward = pool.use(server_id, lambda b: b.status())
            reward = reward if done else 0.0
            return {"result": 1.0 if reward > 0 else 0.0, "reward": reward}
        pool.release(server_id)
        return {"released": server_id}

    def _allocate(self, body: Any) -> dict:
        config = body.get("config") if isinstance(body, dict) else None
        if not isinstance(config, dict) or not isinstance(config.get("miniwob"), str):
            raise HTTPError(400, 'config must be {"miniwob": "<task name>", "seed": <int>}')
        task, seed = config["miniwob"], config.get("seed", 0)
        max_time = config.get("episode_max_time", DEFAULT_EPISODE_MAX_TIME)
        task_id = body.get("task_id")
        if task_id is not None and not isinstance(task_id, str):
            raise HTTPError(400, "task_id must be a string")
        if not isinstance(seed, int) or isinstance(seed, bool) or not -MAX_SEED <= seed <= MAX_SEED:
            raise HTTPError(400, "seed must be an integer in [-(2**53 - 1), 2**53 - 1]")
        if isinstance(max_time, bool) or not isinstance(max_time, (int, float)) \
                or not 0 < max_time <= MAX_EPISODE_TIME:  # NaN fails the comparison too
            raise HTTPError(400, f"episode_max_time must be in (0, {MAX_EPISODE_TIME:g}] seconds")
        try:
            check_task(task)
        except ValueError as e:
            raise HTTPError(400, str(e)) from None
        session, instruction = self.server.pool.allocate(task_id, task, seed, float(max_time))
        return {
            "server_id": session.server_id,
            "instruction": instruction,
            "env": session.env,
            "seed": seed,
            "screen": {"width": MiniWobBrowser.width, "height": MiniWobBrowser.height},
        }

    def _execute(self, server_id: str, body: Any) -> Any:
        action = body.get("action") if isinstance(body, dict) else None
        if not isinstance(action, str):
            raise HTTPError(400, 'body must be {"action": "<screenshot | WAIT | DONE | FAIL | code>"}')
        pool = self.server.pool
        action = action.strip()
        if action == "screenshot":
            return pool.use(server_id, lambda b: b.screenshot_png())
        if action == "WAIT":
            pool.use(server_id, lambda b: None)  # 404 before sleeping
            time.sleep(1.0)
            commands = []
        elif action in ("DONE", "FAIL"):
            commands = []
        else:
            commands = parse_code(action)  # all of it, so a refusal comes before any command runs

        def run(browser: MiniWobBrowser) -> tuple[bool, float]:
            browser.perform(commands)
            return browser.status()

        done, reward = pool.use(server_id, run)
        return {"done": done, "reward": reward}

    def _read_body(self) -> Any:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise HTTPError(411, "send a Content-Length, not a chunked body")
        digits = (self.headers.get("Content-Length") or "0").lstrip("0") or "0"
        if not (digits.isascii() and digits.isdigit()):
            self.close_connection = True  # where the body ends is unknown
            raise HTTPError(400, "Content-Length must be a non-negative integer")
        # Length first: int() refuses thousands of digits.
        if len(digits) > len(str(MAX_BODY_BYTES)) or int(digits) > MAX_BODY_BYTES:
            self.close_connection = True
            raise HTTPError(413, f"body larger than {MAX_BODY_BYTES} bytes")
        length = int(digits)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            raise HTTPError(400, "body is not valid JSON") from None

    def _authorize(self) -> None:
        token = self.server.token
        if not token:
            return
        given = self.headers.get("Authorization", "").strip()
        if given[:7].lower() == "bearer ":
            given = given[7:].strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPError(401, "missing or wrong Authorization token")

    @staticmethod
    def _expect(method: str, allowed: str) -> None:
        if method != allowed:
            raise HTTPError(405, f"use {allowed}")

    def _send_json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def make_server(
    host: str = "127.0.0.1",
    port: int = 0,
    max_envs: int = 4,
    token_env: str = "CUA_ENV_TOKEN",
    verbose: bool = False,
    idle_timeout_s: float = 0.0,
    agentgym_tasks: Sequence[str] = (),
    agentgym_seeds: Sequence[range] = (range(100),),
) -> EnvServer:
    """Bind the server (not yet serving); port 0 picks a free port (server.server_address[1]).
    AgentGym's WebArena routes serve (task, seed) pairs of agentgym_tasks x agentgym_seeds (none: off)."""
    # Imported here: that module builds on this one.
    from cua_cli.envserver.agentgym_webarena import WebArenaRoutes

    token = os.environ.get(token_env, "") if token_env else ""
    pool = EnvPool(max_envs, idle_timeout_s)
    return EnvServer((host, port), pool, token, verbose, WebArenaRoutes(pool, agentgym_tasks, agentgym_seeds))


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    max_envs: int = 4,
    token_env: str = "CUA_ENV_TOKEN",
    verbose: bool = False,
    idle_timeout_s: float = 0.0,
    agentgym_tasks: Sequence[str] = (),
    agentgym_seeds: Sequence[range] = (range(100),),
) -> None:
    """Serve until a stop signal (SIGINT, SIGTERM, SIGHUP), then quit all browsers. Prints the listening URL first."""
    server = make_server(host, port, max_envs, token_env, verbose, idle_timeout_s, agentgym_tasks, agentgym_seeds)

    def on_signal(signum, frame):
        # shutdown() waits for serve_forever() to return, so it must run on another thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    print(f"cua env-server listening on http://{host}:{server.server_address[1]}", flush=True)
    if server.agentgym.size:
        print(f"AgentGym WebArena routes serve idx 0-{server.agentgym.size - 1}", flush=True)
    try:
        server.serve_forever()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.server_close()
        server.close_all()
