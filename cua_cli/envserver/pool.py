"""The env server's pool of MiniWoB browsers, shared by both protocols it speaks: each
session is one browser locked to one episode, released on request or when idle."""

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from cua_cli.envserver.miniwob_backend import MiniWobBrowser

log = logging.getLogger(__name__)

MAX_EPISODE_TIME = 3600.0  # seconds
MAX_SEED = 2**53 - 1  # larger seeds are not exact as the JavaScript numbers MiniWoB seeds with
ENV_CLUSTER = "env-cluster"  # the kind of session the /server/* routes make and see


class ErrorReply(Exception):
    """Answer the request with this status (4xx: the client's mistake, 503: busy) and message."""

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
                raise ErrorReply(503, "env server is shutting down")
            if len(self._sessions) + self._starting >= self.max_envs:
                raise ErrorReply(503, f"all {self.max_envs} envs busy")
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
                raise ErrorReply(503, "env server is shutting down")
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
                raise ErrorReply(404, f"unknown server id {server_id!r}")
            try:
                return action(session)
            finally:
                session.last_used = time.monotonic()

    def release(self, server_id: str, kind: str = ENV_CLUSTER) -> None:
        session = self._get(server_id, kind)
        with session.lock:  # waits for an in-flight action to finish
            if session.released:
                raise ErrorReply(404, f"unknown server id {server_id!r}")
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
            except ErrorReply:
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
            raise ErrorReply(404, f"unknown server id {server_id!r}")
        return session
