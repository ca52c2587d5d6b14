"""The env-cluster protocol (DART's env service, and `cua env-server`): an Env kind.

One ClusterEnv is shared by the episodes of a runner's event loop; each
episode gets its own ClusterSession. Actions travel as pyautogui code that cua
generates from the structured actions (`actions.to_command`), never model text.
Requests go through cua's event-loop HTTP client, which keeps idle connections
alive for the next request to the same server.
"""

import asyncio
import math
import time
from dataclasses import dataclass

from .._util.budget import Budget
from .._util.httpclient import AsyncClient, BadStatus, Response
from .._util.interrupt import sleep
from .._util.png import SIGNATURE, png_size
from .._util.retry import describe, with_retries_async
from .._util.text import clip
from ..actions import to_command
from ..errors import ActionRefused, EnvError, EvalError, InfraError, TaskRefused
from ..runfolder.leases import ENV_CLUSTER, held_record, released_record
from ..tasks import Task
from . import Evaluation, Observation, StepResult

MAX_SIDE = 32768  # pixels: beyond any screen, and what a downstream image decoder may be asked to hold

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


class ClusterEnv:
    def __init__(self, settings: EnvSettings):
        self.s = settings
        self.base = settings.url.rstrip("/")
        self.http = AsyncClient(settings.token)

    @classmethod
    def from_config(cls, cfg, url: str, secrets: dict) -> "ClusterEnv":
        e = cfg.env
        return cls(EnvSettings(url, secrets.get("env"), e.os, e.timeout_s, e.retries, e.allocate_wait_s))

    async def _post(self, path: str, body, budget: Budget, interruptible: bool = True) -> Response:
        r = await self.http.post(f"{self.base}{path}", budget.timeout(self.s.timeout_s), json=body,
                                 interrupt=budget.interrupt if interruptible else None)
        r.raise_for_status()
        return r

    async def allocate(self, task: Task, budget: Budget, leases=None) -> "ClusterSession":
        """Lock an env for the task, waiting while the cluster is full (HTTP 503)."""
        deadline = time.monotonic() + self.s.allocate_wait_s
        body = {"task_id": task.task_id, "os": self.s.os, "config": task.config}
        delay = 0.5
        while True:
            try:
                # Never cut short by a stop: an env the server locked for an answer nobody read would be
                # held until the server's own idle timeout (a stop still ends the waits between tries).
                data = _data(await with_retries_async(
                    lambda: self._post("/server/getAvailableAndLock", body, budget, interruptible=False),
                    self.s.retries, "allocate env", budget, error=EnvError))
                if not isinstance(data, dict) or not isinstance(data.get("server_id"), (str, int)):
                    raise EnvError("allocate env: the answer's data has no server_id")
                session = ClusterSession(self, str(data["server_id"]), data, task, leases)
                if leases is not None:  # before it is used: a runner lost mid-episode leaves it findable
                    leases.lease(held_record(self.base, session.server_id, protocol=ENV_CLUSTER,
                                             task_id=task.task_id))
                return session
            except EnvError as e:
                status = _status(e)
                if status in REFUSED:  # the task's config is wrong for this env: no retry will change that
                    raise TaskRefused(f"allocate env: {describe(e.__cause__)}") from None
                if status != 503 or time.monotonic() > deadline:
                    raise
            await sleep(delay, budget.interrupt, budget.deadline)
            delay = min(delay * 1.5, 5.0)


class ClusterSession:
    """One allocated env: observe, act, evaluate, release."""
    setup_s = 0.0  # the cluster resets the env inside its allocation: all of it counts as allocate

    def __init__(self, cluster: ClusterEnv, server_id: str, data: dict, task: Task, leases=None):
        self.c = cluster
        self.server_id = server_id
        self.task = task
        self.leases = leases
        instruction = data.get("instruction")
        self.instruction = instruction if isinstance(instruction, str) else None

    async def _call(self, what: str, path: str, body, budget: Budget, idempotent=True, error=EnvError) -> Response:
        return await with_retries_async(lambda: self.c._post(f"{path}/{self.server_id}", body, budget),
                                        self.c.s.retries, what, budget, idempotent=idempotent, error=error)

    async def observe(self, budget: Budget) -> Observation:
        r = await self._call("screenshot", "/server/execute", {"action": "screenshot"}, budget)
        if not r.content.startswith(SIGNATURE):
            raise EnvError(f"screenshot: env answered {r.headers.get('Content-Type')}, not a PNG")
        width, height = _image_size(r.content)
        return Observation(r.content, width, height)

    async def act(self, actions: list, budget: Budget, sent: list) -> StepResult:
        """Run the actions, one request each; ActionRefused when the env rejects one as invalid.

        Each is retried only when the request never reached the env: repeating
        a click that may have landed would change the episode.
        """
        done = False
        for action in actions:
            sent.append(to_command(action))
            try:
                r = await self._call("execute", "/server/execute", {"action": sent[-1]}, budget, idempotent=False)
            except EnvError as e:
                if _status(e) in REFUSED:
                    raise ActionRefused(describe(e.__cause__)) from None
                raise
            data = _data(r)
            done = done or bool(isinstance(data, dict) and data.get("done"))
        return StepResult(done=done)

    async def evaluate(self, budget: Budget, ended: str | None = None) -> Evaluation:
        """The ended episode's raw reward and score; a result that is not a finite number is the env's fault."""
        r = await self._call("evaluate", "/server/evaluate", self.task.evaluator, budget, error=EvalError)
        data = _data(r, EvalError)
        result = data.get("result") if isinstance(data, dict) else None
        reward = data.get("reward", result) if isinstance(data, dict) else None
        for name, value in (("result", result), ("reward", reward)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise EvalError(f"evaluate: {name} is not a finite number: {clip(str(value), 100)}")
        return Evaluation(float(reward), min(max(float(result), 0.0), 1.0))

    async def release(self, budget: Budget) -> None:
        await self._call("release", "/server/release", {}, budget)
        if self.leases is not None:
            self.leases.lease(released_record(self.c.base, self.server_id))


def release_env(server: str, env_id: str, token: str | None, budget: Budget) -> None:
    """Give back an env a lost runner held (leases.jsonl): the protocol's release, retried; EnvError."""
    try:
        asyncio.run(ClusterSession(ClusterEnv(EnvSettings(server, token)), env_id, {}, None).release(budget))
    except EnvError as e:
        if _status(e) != 404:  # 404: the server no longer knows it (expired, or given back): nothing is held
            raise


def _image_size(png: bytes) -> tuple[int, int]:
    """Width and height from the PNG header alone (the image is never decoded here);
    a header that is not a PNG's, or a size no screen has, is the env's fault."""
    size = png_size(png)
    if size is None:
        raise EnvError("screenshot: not a PNG image (no PNG signature and IHDR header)")
    width, height = size
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        raise EnvError(f"screenshot: a PNG of {width}x{height} pixels is no screen (at most {MAX_SIDE} a side)")
    return width, height


def _status(e: InfraError) -> int | None:
    """The HTTP status the env answered with, when an answer is what failed."""
    return e.__cause__.response.status if isinstance(e.__cause__, BadStatus) else None


def _data(r: Response, error: type[InfraError] = EnvError):
    """The `data` of a JSON answer. Messages quote the raw text, not a repr of
    what was parsed: a hostile answer nests deep enough to break repr."""
    try:
        payload = r.json()
    except (ValueError, RecursionError):
        raise error(f"{r.method} {r.url}: answer is not JSON: {r.text!r}") from None
    if not isinstance(payload, dict) or "data" not in payload:
        raise error(f"{r.method} {r.url}: answer has no 'data': {r.text!r}")
    return payload["data"]
