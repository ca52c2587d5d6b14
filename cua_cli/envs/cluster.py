"""Client of the env-cluster protocol (DART's env service, and `cua env-server`).

One EnvCluster is shared by a process's runner threads; each episode gets
its own EnvSession. Requests go through a per-thread HTTP session so
connections are kept alive.
"""

import math
import threading
import time
from dataclasses import dataclass

import requests

from ..errors import ActionRefused, InfraError, Stopped, TaskRefused
from ..retry import describe, with_retries

# How an env says "I understood the request and it is invalid" (an action, a task's config).
REFUSED = (400, 422)


@dataclass
class EnvSettings:
    url: str
    token: str | None = None
    os: str = "linux"
    timeout_s: float = 60.0
    retries: int = 3
    allocate_wait_s: float = 300.0


class EnvCluster:
    def __init__(self, settings: EnvSettings):
        self.s = settings
        self.base = settings.url.rstrip("/")
        self._local = threading.local()

    def _http(self) -> requests.Session:
        if not hasattr(self._local, "http"):
            http = requests.Session()
            if self.s.token:
                http.headers["Authorization"] = f"Bearer {self.s.token}"
            self._local.http = http
        return self._local.http

    def _post(self, path: str, body, timeout: float) -> requests.Response:
        r = self._http().post(f"{self.base}{path}", json=body, timeout=timeout)
        r.raise_for_status()
        return r

    def allocate(self, task_id: str, config: dict, should_stop, timeout: float) -> "EnvSession":
        """Lock an env for the task, waiting while the cluster is full (HTTP 503)."""
        deadline = time.monotonic() + self.s.allocate_wait_s
        body = {"task_id": task_id, "os": self.s.os, "config": config}
        delay = 0.5
        while True:
            try:
                data = with_retries(lambda: _data(self._post("/server/getAvailableAndLock", body, timeout)),
                                    self.s.retries, "allocate env", should_stop)
                if not isinstance(data, dict) or not isinstance(data.get("server_id"), (str, int)):
                    raise InfraError("allocate env: the answer's data has no server_id")
                return EnvSession(self, str(data["server_id"]), data)
            except InfraError as e:
                status = _status(e)
                if status in REFUSED:  # the task's config is wrong for this env: no retry will change that
                    raise TaskRefused(f"allocate env: {describe(e.__cause__)}") from None
                if status != 503 or time.monotonic() > deadline:
                    raise
            if should_stop():
                raise Stopped()
            time.sleep(delay)
            delay = min(delay * 1.5, 5.0)


class EnvSession:
    """One allocated env: screenshot, act, evaluate, release."""

    def __init__(self, cluster: EnvCluster, server_id: str, data: dict):
        self.c = cluster
        self.server_id = server_id
        self.data = data
        instruction = data.get("instruction")
        self.instruction = instruction if isinstance(instruction, str) else None

    def _call(self, what: str, path: str, body, timeout: float, should_stop, idempotent=True) -> requests.Response:
        return with_retries(lambda: self.c._post(f"{path}/{self.server_id}", body, timeout),
                            self.c.s.retries, what, should_stop, idempotent=idempotent)

    def screenshot(self, timeout: float, should_stop) -> bytes:
        r = self._call("screenshot", "/server/execute", {"action": "screenshot"}, timeout, should_stop)
        if not r.content.startswith(b"\x89PNG"):
            raise InfraError(f"screenshot: env answered {r.headers.get('Content-Type')}, not a PNG")
        return r.content

    def execute(self, command: str, timeout: float, should_stop):
        """Run one action; ActionRefused when the env rejects it as invalid.

        Retried only when the request never reached the env: repeating a
        click that may have landed would change the episode.
        """
        try:
            r = self._call("execute", "/server/execute", {"action": command}, timeout, should_stop, idempotent=False)
        except InfraError as e:
            if _status(e) in REFUSED:
                raise ActionRefused(describe(e.__cause__)) from None
            raise
        return _data(r)

    def evaluate(self, evaluator: dict, timeout: float, should_stop) -> tuple[float, float]:
        """(result, raw reward) of the ended episode; a result that is not a finite number is the env's fault."""
        data = _data(self._call("evaluate", "/server/evaluate", evaluator, timeout, should_stop))
        result = data.get("result") if isinstance(data, dict) else None
        reward = data.get("reward", result) if isinstance(data, dict) else None
        for name, value in (("result", result), ("reward", reward)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InfraError(f"evaluate: {name} is not a finite number: {str(value)[:100]}")
        return float(result), float(reward)

    def release(self, timeout: float) -> None:
        self._call("release", "/server/release", {}, timeout, lambda: False)


def _status(e: InfraError) -> int | None:
    """The HTTP status the env answered with, when an answer is what failed."""
    return e.__cause__.response.status_code if isinstance(e.__cause__, requests.HTTPError) else None


def _data(r: requests.Response):
    """The `data` of a JSON answer. Messages quote the raw text, not a repr of
    what was parsed: a hostile answer nests deep enough to break repr."""
    try:
        payload = r.json()
    except (ValueError, RecursionError):
        raise InfraError(f"{r.request.method} {r.url}: answer is not JSON: {r.text!r}") from None
    if not isinstance(payload, dict) or "data" not in payload:
        raise InfraError(f"{r.request.method} {r.url}: answer has no 'data': {r.text!r}")
    return payload["data"]
