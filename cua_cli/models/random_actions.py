"""A baseline that answers the agent's own format at random (see AnswerFormat.random).

Deterministic per (seed, task, sample, step), so a rerun makes the same moves.
"""

import random

from ..errors import ModelError
from . import Params, Reply


class RandomActions:
    def __init__(self, seed: int):
        self.seed = seed

    @classmethod
    def from_config(cls, cfg, secrets: dict, shared) -> "RandomActions":
        return cls(cfg.model.seed)

    def session(self, task_id: str, sample: int) -> "_Session":
        return _Session(f"{self.seed}:{task_id}:{sample}")


class _Session:
    def __init__(self, key: str):
        self.key = key

    async def complete(self, messages: list[dict], params: Params) -> Reply:
        if params.answers.random is None:
            raise ModelError("the random provider needs an agent that can draw random answers")
        # Seeded with the key's bytes, exactly as a str seed is, so a task id with a lone surrogate works too.
        rng = random.Random(f"{self.key}:{params.step}".encode("utf-8", "surrogatepass"))
        return Reply(params.answers.random(rng), "random")

    def close(self) -> None:
        pass
