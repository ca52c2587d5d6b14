"""The Agent seam: a model family's prompt, history window, answer parsing and re-asking.

    Agent.start(instruction, model) -> AgentEpisode      one per episode
    await AgentEpisode.ask(observation, turn, budget)    fills `turn`
    await AgentEpisode.refused(turn, error, budget)      the env refused turn.send: ask again

An agent asks its model session for the next actions, re-asking while the
answer does not parse or the env refuses it, up to its retry limit; the turn
then says why the step ends (`stop`). It passes its grammar, and what a random
or closing answer looks like, to the model (`models.AnswerFormat`). Asking is
a coroutine, as the model's `complete` is; reading an answer is a plain
function.

Agent kinds are chosen by `agent.kind` through kinds.AGENTS: a new one is one
module plus one line there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .._util.registry import load
from ..kinds import AGENTS
from ..models import shown_images

if TYPE_CHECKING:
    from .._util.budget import Budget
    from ..envs import Observation
    from ..models import ModelSession, Reply



@dataclass
class Turn:
    """One step's dealings with the model, filled in as they happen: a step cut
    short by an error still records what it got."""
    prompt: list[dict] | None = None    # the messages sent (every try of a step sends the same)
    reply: Reply | None = None          # the latest answer
    thought: str | None = None
    actions: list[dict] | None = None   # the latest answer's actions, structured; None: it did not parse
    send: list = field(default_factory=list)   # what the env is to do for them
    sent: list = field(default_factory=list)   # what the env got for them (its wire format)
    stop: str | None = None             # why the episode ends after this step (finished, parse_error, ...)
    error: str | None = None            # why the latest answer failed
    failed_tries: list[dict] = field(default_factory=list)   # the earlier answers, and why each failed
    tries: int = 0                      # answers so far
    model_s: float = 0.0                # time spent waiting for them
    _failure: dict | None = None

    def images(self) -> list[dict]:
        """The prompt's images in order, each `{"file", "sha256"}` of the bytes the model was sent."""
        return shown_images(self.prompt) if self.prompt else []

    def answered(self, reply: Reply) -> None:
        """A new answer: the one before it failed, so it moves to failed_tries."""
        if self._failure is not None:
            self.failed_tries.append(self._failure)
        self.reply, self.tries, self._failure = reply, self.tries + 1, None
        self.thought, self.actions, self.send, self.sent, self.stop, self.error = None, None, [], [], None, None

    def failed(self, error: str, stop: str, **extra) -> None:
        """The latest answer failed; the step ends with `stop` unless another answer comes."""
        self.error, self.stop = error, stop
        # A retry may reach another server, even another policy: each try says which answered it.
        source = {k: getattr(self.reply, k)
                  for k in ("model_version", "policy_version", "finish_reason", "image_processor")
                  if getattr(self.reply, k) is not None}
        self._failure = {"response": self.reply.text, **self.reply.token_fields(), **source, "error": error, **extra}


@dataclass
class Answer:
    """An answer that parsed."""
    thought: str | None
    actions: list[dict]      # structured, for the record
    send: list               # what the env is to do
    stop: str | None = None  # the agent ends the episode after it (finished, call_user)


class AgentEpisode(Protocol):
    async def ask(self, observation: Observation, turn: Turn, budget: Budget) -> None: ...
    async def refused(self, turn: Turn, error: str, budget: Budget) -> None: ...


class Agent(Protocol):
    def start(self, instruction: str, model: ModelSession) -> AgentEpisode: ...


def make_agent(cfg) -> Agent:
    """The agent named by `agent.kind`."""
    return load(AGENTS[cfg.agent.kind]).from_config(cfg)

