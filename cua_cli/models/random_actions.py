"""A baseline that answers well-formed UI-TARS actions at random points.

Deterministic per (seed, task, sample, step), so a rerun makes the same moves.
"""

import random

from ..agents.uitars import to_model_coords
from . import Reply, Request

_WORDS = ["hello", "yes", "submit", "cua", "42"]


class RandomActions:
    def __init__(self, seed: int, coord_mode: str):
        self.seed = seed
        self.coord_mode = coord_mode

    def episode(self, task_id: str, sample: int) -> "_Episode":
        return _Episode(self, f"{self.seed}:{task_id}:{sample}")


class _Episode:
    def __init__(self, provider: RandomActions, key: str):
        self.p = provider
        self.key = key

    def complete(self, req: Request) -> Reply:
        # Seeded with the key's bytes, exactly as a str seed is, so a task id with a lone surrogate works too.
        rng = random.Random(f"{self.key}:{req.step}".encode("utf-8", "surrogatepass"))

        def point() -> str:
            x, y = to_model_coords(rng.uniform(0, req.width - 1), rng.uniform(0, req.height - 1),
                                   req.width, req.height, self.p.coord_mode)
            return f"'({x},{y})'"

        roll = rng.random()
        if roll < 0.75:
            action = f"click(start_box={point()})"
        elif roll < 0.85:
            action = f"left_double(start_box={point()})"
        elif roll < 0.95:
            action = f"type(content='{rng.choice(_WORDS)}')"
        else:
            action = "finished(content='random baseline gives up')"
        return Reply(f"Thought: a random move.\nAction: {action}", "random")

    def close(self) -> None:
        pass
