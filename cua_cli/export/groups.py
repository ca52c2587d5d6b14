"""GRPO groups: which trajectories are rollouts of the same prompt, and their score statistics.

Statistics are over the group's final attempts that are not errors (an
infrastructure error says nothing about the policy), computed before any
filter, so a filter never changes the baseline a trainer sees.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    size: int                 # trajectories that are not errors
    mean: float | None        # of their scores; null for an empty group
    std: float | None         # population standard deviation
    mixed: bool               # at least one success (score 1) and one failure


EMPTY = Group(0, None, None, False)


def group_id(group_by: str, run_id: str, task_id: str) -> str:
    return task_id if group_by == "task" else f"{run_id}/{task_id}"


def group_stats(scores: dict[str, list[float]]) -> dict[str, Group]:
    """Each group's statistics from its trajectories' scores."""
    out = {}
    for gid, xs in scores.items():
        mean = math.fsum(xs) / len(xs)
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / len(xs))
        out[gid] = Group(len(xs), mean, std, any(x == 1 for x in xs) and any(x < 1 for x in xs))
    return out
