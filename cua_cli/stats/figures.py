"""The figures of `cua stats`: counts, rates over the scheduled pairs, intervals, pass@k.

Every scheduled pair is in every denominator: a missing pair or an
infrastructure error scores 0 in `success_rate`, and only
`success_rate_finished` leaves them out, under its own name.
"""

import math
import statistics
from collections import Counter, defaultdict

import numpy as np

from .readers import RunData

OSWORLD_GROUPS = {
    "Office": ("libreoffice_calc", "libreoffice_impress", "libreoffice_writer"),
    "Daily": ("vlc", "thunderbird", "chrome"),
    "Professional": ("gimp", "vs_code"),
}
BOOTSTRAP_REPS = 2000


def wilson(successes: float, n: int, z: float = 1.96) -> list[float] | None:
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return [max(0.0, centre - half), min(1.0, centre + half)]


def bootstrap(scores: np.ndarray, seed: int = 0) -> list[float] | None:
    """Percentile interval of the mean; fixed seed so a rerun prints the same numbers.

    Resampling n scores is drawing multinomial counts of the distinct values,
    which keeps 100,000 pairs fast.
    """
    n = len(scores)
    if n == 0:
        return None
    values, freq = np.unique(scores, return_counts=True)
    draws = np.random.default_rng(seed).multinomial(n, freq / n, size=BOOTSTRAP_REPS)
    means = draws @ values / n
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def _scores(finals) -> np.ndarray:
    """Score per scheduled pair: missing and errors are 0."""
    return np.array([0.0 if f is None or f.score is None else f.score for f in finals])


def counts(finals: list, ci: bool = True) -> dict:
    finished = [f for f in finals if f is not None]
    judged = [f.score or 0.0 for f in finished if f.outcome != "error"]
    scores = _scores(finals)
    binary = bool(np.all((scores == 0) | (scores == 1)))
    n = len(finals)
    return {
        "scheduled": n,
        "finished": len(finished),
        "missing": n - len(finished),
        "errors": sum(f.outcome == "error" for f in finished),
        "success_rate": float(scores.mean()) if n else None,
        "success_rate_finished": sum(judged) / len(judged) if judged else None,
        "ci95": (wilson(float(scores.sum()), n) if binary else bootstrap(scores)) if ci else None,
    }


def pass_at_k(by_task: dict[str, list]) -> dict:
    """Unbiased pass@k, pass^k (all k correct) and any-correct over tasks with n samples each."""
    if not by_task:
        return {"pass_at_k": {}, "pass_hat_k": {}, "any_correct": None, "never_solved": 0, "always_solved": 0}
    ns = {t: len(fs) for t, fs in by_task.items()}
    cs = {t: sum(1 for f in fs if f is not None and f.score == 1.0) for t, fs in by_task.items()}
    kmax = min(ns.values())
    at, hat = {}, {}
    for k in range(1, kmax + 1):
        at[str(k)] = statistics.fmean(1 - math.comb(ns[t] - cs[t], k) / math.comb(ns[t], k) for t in by_task)
        hat[str(k)] = statistics.fmean(math.comb(cs[t], k) / math.comb(ns[t], k) for t in by_task)
    # Tasks no sample solves, and tasks every sample solves, teach an RL policy nothing (GRPO's advantage is 0).
    return {"pass_at_k": at, "pass_hat_k": hat, "any_correct": statistics.fmean(cs[t] > 0 for t in by_task),
            "never_solved": sum(cs[t] == 0 for t in by_task), "always_solved": sum(cs[t] == ns[t] for t in by_task)}


def run_figures(data: RunData, by: str | None = None) -> dict:
    pairs = data.pairs
    finals = list(pairs.values())
    out = {"run": data.name, "layout": data.layout, **counts(finals), "unsupported": len(data.unsupported)}

    by_domain = defaultdict(list)
    by_task = defaultdict(list)
    for (task_id, _), f in pairs.items():
        by_domain[data.domains.get(task_id)].append(f)
        by_task[task_id].append(f)
    out["domains"] = {str(d): _brief(fs) for d, fs in sorted(by_domain.items(), key=lambda kv: str(kv[0]))}
    groups = {g: [f for d in ds for f in by_domain.get(d, [])] for g, ds in OSWORLD_GROUPS.items()}
    out["groups"] = {g: _brief(fs) for g, fs in groups.items() if fs}
    infeasible = [f for (t, _), f in pairs.items() if t in data.infeasible]
    out["infeasible"] = _brief(infeasible) if infeasible else None

    finished = [f for f in finals if f is not None]
    out["errors_by_stop_reason"] = dict(Counter(f.stop_reason or "unknown" for f in finished if f.outcome == "error"))
    # Failures, but counted apart: a desktop stopped at a limit of its host may mean a runaway agent or a limit
    # set too low for the app (cua env-server --memory-limit ...).
    out["desktop_limits"] = sum(f.stop_reason == "desktop_limit" for f in finished)
    steps = [f.steps for f in finished if f.steps is not None]
    durations = [f.duration_s for f in finished if f.duration_s is not None]
    out["mean_steps"] = statistics.fmean(steps) if steps else None
    out["mean_duration_s"] = statistics.fmean(durations) if durations else None
    out.update(pass_at_k(by_task))
    if by == "task":
        out["tasks"] = {t: {"domain": data.domains.get(t), **_brief(fs)} for t, fs in sorted(by_task.items())}
    return out


def _brief(finals: list) -> dict:
    c = counts(finals, ci=False)
    return {k: c[k] for k in ("scheduled", "finished", "missing", "errors", "success_rate", "success_rate_finished")}


def across(runs: list[dict]) -> dict:
    rates = [r["success_rate"] for r in runs if r["success_rate"] is not None]
    return {"runs": runs,
            "mean_success_rate": statistics.fmean(rates) if rates else None,
            "std_success_rate": statistics.stdev(rates) if len(rates) > 1 else None}
