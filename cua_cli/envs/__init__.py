"""The Env seam: where episodes are played.

    await Env.allocate(task, budget, files) -> EnvSession
    await EnvSession.observe(budget) -> Observation
    await EnvSession.act(actions, budget, sent) -> StepResult
    await EnvSession.evaluate(budget, ended) -> Evaluation
    await EnvSession.release(budget)

The methods are coroutines: episodes wait on their runner's event loop. An env
kind may instead be written blocking (`BlockingEnv`, the same methods as plain
functions, its own budget checks polled): make_env then runs each of its calls
in a thread (InThreads). The env-cluster kind is written for the loop, as
the one that carries thousands of episodes per host; OSWorld's and AgentGym's
block, as their servers' work dwarfs a thread's cost.

Each env kind owns its wire format: it turns structured actions into what its
server takes, and lists each message in `sent` before sending it, so a step
that fails half-way still records what reached the env. Failures raise the
error tree's EnvError / EvalError / TaskRefused, and an action the env
refuses raises ActionRefused (the agent's mistake). An env that allocates what
must be given back (a desktop) hands `files.lease` a record of it before using
it, and another once it is released (runfolder/leases.py); one that records the
screen hands `files.video` the episode's mp4. `ended` is the
episode's stop reason: OSWorld scores an agent that gave up (FAIL) differently.
A session's `setup_s` splits allocate's time into getting the env and setting
up the task, for the attempt's phases (an env that cannot tell leaves it 0).

Env kinds are chosen by `env.kind` through kinds.ENVS: a new one is one module plus
one line there.
"""

from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

from .._util.registry import load
from ..kinds import ENVS

if TYPE_CHECKING:
    from .._util.budget import Budget
    from ..tasks import Task



@dataclass
class Observation:
    """What the agent sees at a step: a screenshot (the bytes as the env sent them) and/or text, and
    the desktop's accessibility tree when the agent reads one (`agent.observation`)."""
    screenshot: bytes | None = None
    width: int | None = None        # of the screenshot, read from its header
    height: int | None = None
    text: str | None = None
    file: str | None = None         # the screenshot's file in the trajectory folder, once written
    a11y_tree: str | None = None    # AT-SPI's tree as XML, as the desktop sent it
    a11y_file: str | None = None    # its file in the trajectory folder, once written
    reread: Callable[[], bytes] | None = field(default=None, repr=False)  # reads that file back, where it can


@dataclass
class StepResult:
    done: bool = False              # the env ended the episode
    reward: float | None = None     # so far, when the env tells
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Evaluation:
    reward: float                   # the env's raw reward
    score: float                    # in [0, 1]: what success rates average


class EnvSession(Protocol):
    instruction: str | None         # the env's statement of the task, when the task has none
    setup_s: float                  # of allocate's time, what the task's reset/setup steps took (else 0)

    async def observe(self, budget: Budget) -> Observation: ...
    async def act(self, actions: list, budget: Budget, sent: list) -> StepResult: ...
    async def evaluate(self, budget: Budget, ended: str | None = None) -> Evaluation: ...
    async def release(self, budget: Budget) -> None: ...


class BlockingSession(Protocol):
    instruction: str | None
    setup_s: float

    def observe(self, budget: Budget) -> Observation: ...
    def act(self, actions: list, budget: Budget, sent: list) -> StepResult: ...
    def evaluate(self, budget: Budget, ended: str | None = None) -> Evaluation: ...
    def release(self, budget: Budget) -> None: ...


class AttemptFiles(Protocol):
    """What an env files for the attempt it plays (a TrajWriter): leases in the run's leases.jsonl, a
    video in the attempt's folder."""

    def lease(self, record: dict) -> None: ...
    def video(self, mp4: bytes) -> str: ...


class Env(Protocol):
    async def allocate(self, task: Task, budget: Budget, files: AttemptFiles) -> EnvSession: ...


class BlockingEnv(Protocol):
    def allocate(self, task: Task, budget: Budget, files: AttemptFiles) -> BlockingSession: ...


def make_env(cfg, url: str, secrets: dict) -> Env:
    """The env named by `env.kind`, at `url` (the local server's when `env.url` is local); a blocking
    kind's calls run in threads, up to one per episode slot."""
    env = load(ENVS[cfg.env.kind]).from_config(cfg, url, secrets)
    return env if inspect.iscoroutinefunction(env.allocate) else InThreads(env, cfg.runner.num_envs)


class InThreads:
    """A blocking env kind on the event loop: each call of it runs in a thread of its own pool.

    Its code polls the budget's stop between requests, as it always has, so a call is awaited to its
    end, never abandoned half-way (an allocation would be lost). The pool starts a thread only when
    every thread it has is busy: as many threads as calls at once, at most one per episode slot.
    """

    def __init__(self, env: BlockingEnv, workers: int):
        self.env = env
        self.pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="cua-env")

    async def allocate(self, task: Task, budget: Budget, *files: AttemptFiles) -> SessionInThreads:
        return SessionInThreads(await self.run(self.env.allocate, task, budget, *files), self)

    async def run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)


class SessionInThreads:
    def __init__(self, inner: BlockingSession, env: InThreads):
        self.inner, self.env = inner, env  # inner: the blocking session (a demonstration reads its desktop)
        self.instruction = inner.instruction
        self.setup_s = getattr(inner, "setup_s", 0.0)

    async def observe(self, budget: Budget) -> Observation:
        return await self.env.run(self.inner.observe, budget)

    async def act(self, actions: list, budget: Budget, sent: list) -> StepResult:
        return await self.env.run(self.inner.act, actions, budget, sent)

    async def evaluate(self, budget: Budget, ended: str | None = None) -> Evaluation:
        return await self.env.run(self.inner.evaluate, budget, ended)

    async def release(self, budget: Budget) -> None:
        await self.env.run(self.inner.release, budget)
