"""`cua compare A B`: paired per-task differences between two runs."""

import math
import statistics
from collections import Counter, defaultdict

import numpy as np

from .readers import RunData

PERMUTATIONS = 20000


def task_scores(data: RunData) -> dict[str, float]:
    """Mean final score per task over its scheduled samples; missing and errors are 0."""
    by_task = defaultdict(list)
    for (task_id, _), f in data.pairs.items():
        by_task[task_id].append(0.0 if f is None or f.score is None else f.score)
    return {t: statistics.fmean(v) for t, v in by_task.items()}


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar: a binomial test of the discordant pairs at p = 1/2."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_permutation(diffs: np.ndarray, seed: int = 0) -> float:
    """Two-sided sign-flip permutation test of the mean paired difference."""
    if len(diffs) == 0 or not np.any(diffs):
        return 1.0
    observed = abs(diffs.mean())
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, PERMUTATIONS, 1000):  # chunks keep memory flat for many tasks
        signs = rng.choice(np.array([-1.0, 1.0]), size=(min(1000, PERMUTATIONS - start), len(diffs)))
        extreme += int(np.sum(np.abs((signs * diffs).mean(axis=1)) >= observed - 1e-12))
    return (extreme + 1) / (PERMUTATIONS + 1)


def compare(a: RunData, b: RunData) -> dict:
    sa, sb = task_scores(a), task_scores(b)
    shared = sorted(set(sa) & set(sb))
    diffs = np.array([sb[t] - sa[t] for t in shared])
    samples_a = Counter(t for t, _ in a.pairs)
    samples_b = Counter(t for t, _ in b.pairs)
    one_binary = all(samples_a[t] == 1 and samples_b[t] == 1 and sa[t] in (0.0, 1.0) and sb[t] in (0.0, 1.0)
                     for t in shared)
    if one_binary:
        test = "mcnemar_exact"
        p = mcnemar_exact(sum(1 for t in shared if sa[t] > sb[t]), sum(1 for t in shared if sb[t] > sa[t]))
    else:
        test = "paired_permutation"
        p = paired_permutation(diffs)
    domain_of = {**b.domains, **a.domains}
    per_domain = defaultdict(list)
    for t in shared:
        per_domain[str(domain_of.get(t))].append(sb[t] - sa[t])
    return {
        "run_a": a.name, "run_b": b.name,
        "tasks_shared": len(shared),
        "better_a": [t for t in shared if sa[t] > sb[t]],
        "better_b": [t for t in shared if sb[t] > sa[t]],
        "same": sum(1 for t in shared if sa[t] == sb[t]),
        "mean_a": float(np.mean([sa[t] for t in shared])) if shared else None,
        "mean_b": float(np.mean([sb[t] for t in shared])) if shared else None,
        "delta": float(diffs.mean()) if shared else None,
        "p_value": p,
        "test": test,
        "domains": {d: {"tasks": len(v), "delta": statistics.fmean(v)} for d, v in sorted(per_domain.items())},
        "only_a": sorted(set(sa) - set(sb)),
        "only_b": sorted(set(sb) - set(sa)),
    }
