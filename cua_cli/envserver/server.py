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
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence

from cua_cli._util.signals import serve_until_stopped
from cua_cli.envserver.agentgym_webarena import WebArenaRoutes
from cua_cli.envserver.miniwob_backend import DEFAULT_EPISODE_MAX_TIME, MiniWobBrowser, check_task
from cua_cli.envserver.pool import MAX_EPISODE_TIME, MAX_SEED, EnvPool, ErrorReply
from cua_cli.envserver.pyautogui_subset import DisallowedCode, parse_code

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
SESSION_PATH = re.compile(r"^/server/(execute|evaluate|release)/([^/]+)$")


class EnvServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], pool: EnvPool, token: str, verbose: bool, agentgym):
        self.pool = pool
        self.agentgym = agentgym  # AgentGym's WebArena routes (agentgym_webarena.WebArenaRoutes)
        self.token = token
        self.verbose = verbose
        self._next_expiry = 0.0
        super().__init__(address, EnvHandler)

    def service_actions(self) -> None:
        # serve_forever calls this between polls; expiry runs on a thread so accepting never waits.
        if self.pool.idle_timeout_s and time.monotonic() >= self._next_expiry:
            self._next_expiry = time.monotonic() + min(30.0, self.pool.idle_timeout_s / 4)
            threading.Thread(target=self.pool.expire_idle, daemon=True).start()

    def close_all(self) -> None:
        self.pool.close_all()


class EnvHandler(BaseHTTPRequestHandler):
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
        except ErrorReply as e:
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
            raise ErrorReply(404, f"no such endpoint {path}")
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
            raise ErrorReply(400, 'config must be {"miniwob": "<task name>", "seed": <int>}')
        task, seed = config["miniwob"], config.get("seed", 0)
        max_time = config.get("episode_max_time", DEFAULT_EPISODE_MAX_TIME)
        task_id = body.get("task_id")
        if task_id is not None and not isinstance(task_id, str):
            raise ErrorReply(400, "task_id must be a string")
        if not isinstance(seed, int) or isinstance(seed, bool) or not -MAX_SEED <= seed <= MAX_SEED:
            raise ErrorReply(400, "seed must be an integer in [-(2**53 - 1), 2**53 - 1]")
        if isinstance(max_time, bool) or not isinstance(max_time, (int, float)) \
                or not 0 < max_time <= MAX_EPISODE_TIME:  # NaN fails the comparison too
            raise ErrorReply(400, f"episode_max_time must be in (0, {MAX_EPISODE_TIME:g}] seconds")
        try:
            check_task(task)
        except ValueError as e:
            raise ErrorReply(400, str(e)) from None
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
            raise ErrorReply(400, 'body must be {"action": "<screenshot | WAIT | DONE | FAIL | code>"}')
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
            raise ErrorReply(411, "send a Content-Length, not a chunked body")
        digits = (self.headers.get("Content-Length") or "0").lstrip("0") or "0"
        if not (digits.isascii() and digits.isdigit()):
            self.close_connection = True  # where the body ends is unknown
            raise ErrorReply(400, "Content-Length must be a non-negative integer")
        # Length first: int() refuses thousands of digits.
        if len(digits) > len(str(MAX_BODY_BYTES)) or int(digits) > MAX_BODY_BYTES:
            self.close_connection = True
            raise ErrorReply(413, f"body larger than {MAX_BODY_BYTES} bytes")
        length = int(digits)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            raise ErrorReply(400, "body is not valid JSON") from None

    def _authorize(self) -> None:
        token = self.server.token
        if not token:
            return
        given = self.headers.get("Authorization", "").strip()
        if given[:7].lower() == "bearer ":
            given = given[7:].strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise ErrorReply(401, "missing or wrong Authorization token")

    @staticmethod
    def _expect(method: str, allowed: str) -> None:
        if method != allowed:
            raise ErrorReply(405, f"use {allowed}")

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
    token = os.environ.get(token_env, "") if token_env else ""
    pool = EnvPool(max_envs, idle_timeout_s)
    return EnvServer((host, port), pool, token, verbose, WebArenaRoutes(pool, agentgym_tasks, agentgym_seeds))


def serve(host: str = "127.0.0.1", **options) -> None:
    """Serve until a stop signal (SIGINT, SIGTERM, SIGHUP), then quit all browsers. Prints the listening URL first.
    `options` are make_server's."""
    server = make_server(host, **options)

    def announce():
        print(f"cua env-server listening on http://{host}:{server.server_address[1]}", flush=True)
        if server.agentgym.size:
            print(f"AgentGym WebArena routes serve idx 0-{server.agentgym.size - 1}", flush=True)

    try:
        serve_until_stopped(server, announce)
    finally:
        server.server_close()
        server.close_all()
