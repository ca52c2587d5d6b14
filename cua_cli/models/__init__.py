"""The Model seam: anything that answers a conversation with text.

    Model.session(task_id, sample) -> ModelSession     one per episode
    await ModelSession.complete(messages, params) -> Reply
    ModelSession.close()

Per-episode sessions let a provider stick to one endpoint (prefix cache) or
replay one trajectory. `complete` is a coroutine: episodes wait for answers
on their runner's event loop (docs/design/runner-loop.md). A model knows nothing about any agent family: the
agent hands it, in `params.answers`, what a model that does not think needs
(a grammar, a random answer, a closing answer).

Messages are `{"role", "content"}` with content a string or a list of parts:
`{"type": "text", "text"}` or an `Image`. Each provider turns them into its
own wire format.

Providers are chosen by `model.provider` through kinds.PROVIDERS: a new one is one
module plus one line there.
"""

import hashlib
from dataclasses import dataclass, field
from random import Random
from typing import Callable, Protocol

import pybase64

from .._util.budget import Budget
from .._util.registry import load
from ..errors import UnreadableRun
from ..kinds import PROVIDERS


@dataclass(frozen=True)
class Image:
    """A screenshot in a prompt: its bytes, and its file in the trajectory folder.

    Its content id and its base64 text are computed once, however many
    prompts it appears in while it stays in the history. A provider whose
    server keeps images by id lets go of the bytes once sent (`let_go`):
    thousands of episodes' histories would otherwise hold gigabytes. Should
    the server lose them, `data()` reads the file back (`reread`).
    """
    png: bytes | None                 # None once let go: data() reads it back
    file: str | None = None
    reread: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)

    @property
    def sha256(self) -> str:
        """The sha256 of the bytes, hex: what a step records of each image the model was sent."""
        return self._once("sha256", lambda: hashlib.sha256(self.png).hexdigest())  # SHA-NI: the fastest here

    @property
    def uuid(self) -> str:
        """A content id: the same bytes always get the same id (a server's cache key for them)."""
        return self.sha256[:32]

    @property
    def base64(self) -> bytes:
        return self._once("base64", lambda: pybase64.b64encode(self.data()))

    def let_go(self) -> None:
        """Drop the bytes (not their sha256) if they can be read back; else keep them."""
        if self.reread is not None and self.png is not None:
            self.sha256
            self.__dict__.pop("base64", None)
            object.__setattr__(self, "png", None)

    def data(self) -> bytes:
        """The bytes: held, or read back from the file (not kept), checked against the sha256 sent before."""
        if self.png is not None:
            return self.png
        png = self.reread()
        if hashlib.sha256(png).hexdigest() != self.sha256:
            raise UnreadableRun(f"{self.file}: the screenshot read back for a model server that lost it is not "
                                "the one the model was shown")
        return png

    def _once(self, name: str, make):
        # Not functools.cached_property: before Python 3.12 it takes one lock for all instances.
        value = self.__dict__.get(name)
        if value is None:
            value = self.__dict__[name] = make()
        return value


@dataclass(frozen=True)
class AnswerFormat:
    """What the agent's answers look like, for models that do not think."""
    grammar: str | None = None                        # a regex every parseable answer matches (guided decoding)
    random: Callable[[Random], str] | None = None     # a well-formed answer drawn with `rng` (the random baseline)
    end: str | None = None                            # an answer that ends the episode (replay, when it runs out)
    idle: str | None = None                           # an answer that does nothing for a step (a script run out)


@dataclass
class Params:
    step: int
    budget: Budget
    answers: AnswerFormat = field(default_factory=AnswerFormat)


@dataclass
class Reply:
    text: str
    endpoint: str | None = None
    model_version: str | None = None
    policy_version: int | None = None      # grows with each rolling reload of the fleet
    token_ids: list[int] | None = None     # with record_logprobs or record_tokens: the sampled tokens
    logprobs: list[float] | None = None    # one per sampled token
    prompt_token_ids: list[int] | None = None   # with record_tokens: the prompt as the server tokenized it
    finish_reason: str | None = None
    sampling: dict | None = None           # with record_tokens: the sampling parameters sent
    image_processor: dict | None = None    # what resized the prompt's images, as far as the provider knows

    def token_fields(self) -> dict:
        """The tokens of this answer as a step records them (docs/reference/run-folder.md)."""
        if self.prompt_token_ids is not None:  # model.record_tokens
            return {"prompt_token_ids": self.prompt_token_ids, "response_token_ids": self.token_ids,
                    "response_logprobs": self.logprobs, "finish_reason": self.finish_reason}
        if self.token_ids is not None:  # model.record_logprobs
            return {"token_ids": self.token_ids, "logprobs": self.logprobs}
        return {}


class ModelSession(Protocol):
    async def complete(self, messages: list[dict], params: Params) -> Reply: ...
    def close(self) -> None: ...


class Model(Protocol):
    def session(self, task_id: str, sample: int) -> ModelSession: ...


def make_model(cfg, secrets: dict, shared=None) -> Model:
    """The provider named by `model.provider`; `shared` is what its `shared_state` made for the run."""
    return load(PROVIDERS[cfg.model.provider]).from_config(cfg, secrets, shared)


class Sharing(Protocol):
    """How a runner backend makes one object that all its runners use (local processes: shared
    memory; Ray actors: an actor). `cls` takes `ctx`, a multiprocessing context, as a keyword."""

    def share(self, cls, *args): ...


def shared_state(cfg, sharing: Sharing):
    """State the provider shares across all runners of a rollout (made once per rollout), or None."""
    make = getattr(load(PROVIDERS[cfg.model.provider]), "shared_state", None)
    return make(cfg, sharing) if make else None


def model_servers(cfg) -> list[str]:
    """The URLs of the servers the provider asks (each runner host must reach them)."""
    servers = getattr(load(PROVIDERS[cfg.model.provider]), "servers", None)
    return servers(cfg) if servers else []


def shown_images(messages: list[dict]) -> list[dict]:
    """Each image of a prompt, in prompt order: its file and the sha256 of the bytes a provider sends."""
    return [{"file": p.file, "sha256": p.sha256} for m in messages if not isinstance(m["content"], str)
            for p in m["content"] if isinstance(p, Image)]


def by_file(messages: list[dict]) -> list[dict]:
    """The messages with each image as its file name: how prompts are recorded."""
    return [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else
             [{"type": "image_file", "file": p.file} if isinstance(p, Image) else p for p in m["content"]]}
            for m in messages]
