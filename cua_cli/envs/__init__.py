"""The Env seam: where episodes are played.

    Env.allocate(task, budget, files) -> EnvSession
    EnvSession.observe(budget) -> Observation
    EnvSession.act(actions, budget, sent) -> StepResult
    EnvSession.evaluate(budget, ended) -> Evaluation
    EnvSession.release(budget)

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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

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
    def allocate(self, task: Task, budget: Budget, files: AttemptFiles) -> EnvSession: ...


def make_env(cfg, url: str, secrets: dict) -> Env:
    """The env named by `env.kind`, at `url` (the local server's when `env.url` is local)."""
    return load(ENVS[cfg.env.kind]).from_config(cfg, url, secrets)
