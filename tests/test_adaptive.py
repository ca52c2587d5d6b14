"""DART-GUI's dynamic rollout count on hand-made score histories."""

import pytest

from cua_cli.dart.adaptive import DART, Rule, history, next_round, samples_for, success_rate


def test_darts_defaults():
    assert DART == Rule(rollout_n=8, threshold=1.0, min_n=1, scale=9, offset=7, min_failure_steps=4)


@pytest.mark.parametrize("scores, rule, expected", [
    ([], DART, 8),                                # no history: the most
    ([0.0] * 8, DART, 8),                         # rate 0
    ([1.0, 0.0] * 4, DART, 8),                    # rate 0.5 is below DART's threshold 1.0
    ([1.0, 0.0] * 4, Rule(threshold=0.5), 11),    # int(9 / 0.5 - 7): DART does not cap it at 8
    ([1.0] * 6 + [0.0, 1.0], Rule(threshold=0.5), 3),   # rate 7/8: int(9 * 8 / 7 - 7) = int(3.28)
    ([1.0] * 8, DART, 2),                         # rate 1: max(1, int(9 - 7))
    ([1.0] * 8, Rule(min_n=3), 3),                # never below min_n
    ([1.0] * 7 + [None], DART, 2),                # a failed evaluation is left out of the mean
    ([None] * 8, DART, 8),                        # nothing left: rate 0
    ([0.0] * 8, Rule(threshold=0.0), 8),          # where DART would divide by zero
])
def test_samples_for(scores, rule, expected):
    assert samples_for(scores, rule=rule) == expected


def test_window_is_the_latest_rollouts_with_failed_evaluations_in_place():
    scores = [0.0] * 8 + [1.0] * 8
    assert samples_for(scores) == 2                                 # the latest 8: all successes
    assert samples_for(scores, window=16) == 8                      # rate 0.5
    assert samples_for(scores, window=16, rule=Rule(threshold=0.5)) == 11
    scores = [0.0, 0.0] + [1.0] * 6 + [None, None]
    assert success_rate(scores, 8) == 1.0                           # the Nones take two of the 8 places
    assert success_rate(scores, 10) == 0.75
    assert samples_for(scores, window=10, rule=Rule(threshold=0.75)) == 5   # int(12 - 7)
    assert success_rate(scores, 0) == 0.0


def rec(task, outcome, score=None, steps=5, stop_reason="finished"):
    return {"task_id": task, "sample": 0, "attempt": 0, "outcome": outcome, "score": score, "steps": steps,
            "stop_reason": stop_reason}


def test_history_keeps_what_darts_rollouter_stores():
    records = [rec("a", "success", 1.0), rec("a", "failure", 0.0, steps=3), rec("a", "failure", 0.0, steps=4),
               rec("a", "error", stop_reason="eval_error"), rec("a", "error", stop_reason="env_error"),
               rec("a", "failure", 0.5, steps=1), rec("b", "error", stop_reason="model_error")]
    assert history(records) == {"a": [1.0, 0.0, 0.5], "b": []}
    assert history(records, Rule(min_failure_steps=0))["a"] == [1.0, 0.0, 0.0, 0.5]


def test_next_round_per_task():
    records = ([rec("easy", "success", 1.0)] * 8 + [rec("hard", "failure", 0.0)] * 8
               + [rec("half", "success", 1.0), rec("half", "failure", 0.0)] * 4
               + [rec("late", "failure", 0.0)] * 6 + [rec("late", "success", 1.0)] * 2)
    assert next_round(records) == {"easy": 2, "hard": 8, "half": 8, "late": 8}
    # "late" was given 2 last round: its window is its latest 2, both successes
    assert next_round(records, {"late": 2, "new": 2}) == {"easy": 2, "hard": 8, "half": 8, "late": 2, "new": 8}
    assert next_round(records, rule=Rule(threshold=0.5))["half"] == 11
