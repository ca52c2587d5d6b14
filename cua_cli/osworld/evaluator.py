"""OSWorld's scoring of an ended episode, run on the client as DesktopEnv.evaluate runs it.

1. The `postconfig` steps run (save a file, open a terminal, ...).
2. The infeasible rule: `func: "infeasible"` scores 1 exactly when the last action was FAIL;
   any other task whose last action was FAIL scores 0.
3. Each metric gets its result getter's value, its expected getter's (or none: then it is
   called without one) and its options. A list of metrics is combined by `conj`: "and"
   is 0 at the first 0 and else the mean; "or" is 1 at the first 1 and else the maximum.
   A result getter that finds no file (FileNotFoundError) scores that metric 0.

Scoring is infrastructure: a step, getter or metric that fails or raises, or a metric
that returns anything but a number in [0, 1], is an EvalError (retried, never the
agent's failure). A task cua cannot score (see support.py) is a BadTask here; a run
refuses such tasks before playing them.
"""

import math
from typing import Optional

from .._util.budget import Budget
from .._util.text import clip
from ..errors import BadTask, CuaError, EnvError, EvalError
from .getters import GETTERS, EvalContext
from .metrics import METRICS
from .registry import install_hint
from .setup import SetupContext, run_steps
from .support import lacking_extras, paired, unsupported


def evaluate(evaluator: dict, last_action: Optional[str], setup: SetupContext, budget: Budget,
             file_tries: int = 3, file_retry_s: float = 5.0) -> float:
    """The episode's score in [0, 1]. `last_action` is the agent's last action as OSWorld records it
    ("DONE", "FAIL", "WAIT" or pyautogui code; None when it took none)."""
    missing = unsupported({"config": [], "evaluator": evaluator}, libraries=False)
    if missing:
        raise BadTask(f"cua cannot score this task: it uses {', '.join(missing)}")
    func = evaluator["func"]
    try:
        run_steps(evaluator.get("postconfig") or [], setup, budget, where="evaluator.postconfig")
    except EnvError as e:
        raise EvalError(str(e)) from e

    if func == "infeasible":
        return float(last_action == "FAIL")
    if last_action == "FAIL":
        return 0.0
    lacking, extras = lacking_extras(evaluator)
    if lacking:  # this host's fault (a Ray node set up without them), not the task's: retried elsewhere
        raise EvalError(f"this host lacks {' and '.join(lacking)} to score the task: {install_hint(extras)}")

    ctx = EvalContext(setup.desktop, setup.downloads, setup.folder, budget, file_tries, file_retry_s)
    if isinstance(func, str):
        return _one(func, evaluator.get("result"), evaluator.get("expected"), evaluator.get("options") or {}, ctx)
    conj = evaluator.get("conj", "and")
    results, expecteds, options = (paired(evaluator, key) for key in ("result", "expected", "options"))
    scores = []
    for i, name in enumerate(func):
        score = _one(name, results[i], expecteds[i], options[i] or {}, ctx, f"[{i}]")
        if conj == "and" and score == 0.0:
            return 0.0
        if conj == "or" and score == 1.0:
            return 1.0
        scores.append(score)
    return sum(scores) / len(scores) if conj == "and" else max(scores)


def _one(name: str, result_cfg, expected_cfg, options: dict, ctx: EvalContext, where: str = "") -> float:
    try:
        result = _get(result_cfg, ctx, f"result{where}")
    except FileNotFoundError:
        return 0.0  # OSWorld: the file to score is not there
    expected = _get(expected_cfg, ctx, f"expected{where}") if expected_cfg else None
    metric = METRICS[name]
    if getattr(metric, "needs_desktop", False):  # it runs what must not run here on the desktop (metrics/vscode.py)
        options = {**options, "desktop_ctx": ctx}
    try:
        value = metric(result, **options) if expected is None else metric(result, expected, **options)
    except CuaError:
        raise
    except Exception as e:  # the metric's own failure, on input it was not made for
        raise EvalError(f"metric{where} {name}: {type(e).__name__}: {clip(str(e), 300)}") from e
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise EvalError(f"metric{where} {name} returned {clip(repr(value), 100)}, not a number in [0, 1]")
    return float(value)


def _get(config, ctx: EvalContext, where: str):
    if not config:
        return None
    kind = config.get("type")
    try:
        return GETTERS[kind](ctx, config)
    except FileNotFoundError:
        raise
    except EnvError as e:
        raise EvalError(f"{where} getter {kind}: {e}") from e
    except CuaError:
        raise
    except Exception as e:
        raise EvalError(f"{where} getter {kind}: {type(e).__name__}: {clip(str(e), 300)}") from e
