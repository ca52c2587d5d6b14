"""DART-GUI's dynamic rollout count: how many samples a task gets next round, from its recent scores.

The rule, from github.com/Computer-use-agents/dart_rollouter:
- src/core/task_loader.py `get_dynamic_rollout_n`: a task whose success rate is below
  `success_rate_threshold` gets `rollout_n` samples; otherwise `max(min_rollout_n,
  int(9 / success_rate - 7))`, which is not capped at `rollout_n` (a threshold below 0.5
  lets it exceed it). A task with no history has rate 0.
- src/services/mysql_rollout.py `get_latest_success_for_each_task`: the rate is the mean
  reward over the task's latest rollouts, as many as the task was given last round; a
  rollout whose evaluation failed (reward < 0) keeps its place in that window but is left
  out of the mean, and a window with nothing left has rate 0.
- src/core/trajectory_runner.py: the history holds only what the rollouter stores, a
  rollout with reward > 0, or reward 0 after at least 4 steps; one that failed (model,
  evaluation, env) or failed in fewer steps is never stored.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """The rule's constants; the defaults are DART's."""
    rollout_n: int = 8             # config/config_example.yaml coordinator.rollout_n: the most samples
    threshold: float = 1.0         # task_loader.py success_rate_threshold's default
    min_n: int = 1                 # task_loader.py min_rollout_n's default
    scale: float = 9               # task_loader.py: int(9 / success_rate - 7)
    offset: float = 7
    min_failure_steps: int = 4     # trajectory_runner.py: shorter failures are not stored


DART = Rule()


def success_rate(scores: list[float | None], window: int) -> float:
    """Mean score over the latest `window` rollouts, failed evaluations (None) left out; 0 with none left."""
    valid = [s for s in (scores[-window:] if window > 0 else []) if s is not None]
    return sum(valid) / len(valid) if valid else 0.0


def samples_for(scores: list[float | None], window: int | None = None, rule: Rule = DART) -> int:
    """Samples for a task next round; `scores` oldest first, `window`: what it was given last round
    (default `rule.rollout_n`, what every task gets first)."""
    rate = success_rate(scores, rule.rollout_n if window is None else window)
    if rate < rule.threshold or rate <= 0:  # rate 0 at a threshold <= 0: DART would divide by zero
        return rule.rollout_n
    return max(rule.min_n, int(rule.scale / rate - rule.offset))


def history(records: list[dict], rule: Rule = DART) -> dict[str, list[float]]:
    """Per task, the scores DART's rollouter would have stored, in the order of `records` (episode lines
    of final attempts, checked by `records.episode_record`, in order of finishing)."""
    out: dict[str, list[float]] = {}
    for rec in records:
        kept = out.setdefault(rec["task_id"], [])
        if rec["outcome"] == "error" or rec["score"] == 0 and (rec.get("steps") or 0) < rule.min_failure_steps:
            continue
        kept.append(rec["score"])
    return out


def next_round(records: list[dict], last_counts: dict[str, int] | None = None, rule: Rule = DART) -> dict[str, int]:
    """Per task (of `records` and `last_counts`), the number of samples to enqueue next round.

    `last_counts`: what each task was given last round, its window; a task not in it gets
    `rule.rollout_n`, what DART gives every task first.
    """
    counts = last_counts or {}
    scores = history(records, rule)
    return {task: samples_for(scores.get(task, []), counts.get(task), rule) for task in {**scores, **counts}}
