"""Where a run's time went: its env slots' time by phase, its model servers' load, its waits.

Read from the episode lines' `phases`, `started_at`, `lane` and `claim_wait_s`
and from metrics.jsonl (docs/reference/run-folder.md). Every attempt counts,
errors and retries too: they took the slot's time as much as the final ones.
Slot time is lanes x the run's span; what no attempt used is idle.
"""

from collections import defaultdict

import numpy as np

from .._util.diag import warn_problems
from ..runfolder.jsonl import scan
from ..runfolder.reader import RunReader, checked
from ..runfolder.records import METRICS, PHASES, metric_record, phases_of

# How the env slots' time is shown: groups of phases, each a share of slot time.
SHARES = {"acting": ("observe_s", "act_s"), "model": ("model_s",),
          "allocate": ("allocate_s", "setup_s", "release_s"), "evaluate": ("evaluate_s",), "other": ("other_s",)}
# Of those, what an env waits on rather than works at: the largest is named in the summary.
WAITS = ("model", "allocate", "evaluate", "idle")


def _spread(values) -> dict | None:
    if not len(values):
        return None
    a = np.asarray(values, dtype=float)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "max": float(a.max())}


def _rising(values: list) -> float:
    """What a cumulative counter gained over the samples, a server restart (a drop) not counted as loss."""
    vals = [v for v in values if v is not None]
    return float(sum(max(0.0, b - a) for a, b in zip(vals, vals[1:])))


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def read_metrics(path, pos=(0, 1), warn: bool = False) -> tuple[list[dict], tuple[int, int], list]:
    """The valid lines of a run's metrics.jsonl after `pos` (byte offset, line), where to go on, and the
    problems of the file and its lines as (line, text). `warn`: name them on stderr (not for a live view,
    which redraws)."""
    rows, problems, offset, line = scan(path / METRICS, *pos)
    lines = checked(rows, _sample, problems)
    problems.sort()
    if warn:
        warn_problems(path / METRICS, problems)
    return [r for _, r in lines], (offset, line), problems


def _sample(obj) -> tuple[dict | None, str | None]:
    rec = metric_record(obj)
    return rec, None if rec is not None else "skipped a line that is no model server's or GPU's sample"


def servers(lines: list[dict]) -> list[dict]:
    """Per model server: how busy (a request running), its queue, KV cache, prefix hits, tokens/s."""
    by = defaultdict(list)
    for r in lines:
        if "server" in r:
            by[r["server"]].append(r)
    out = []
    for name, rows in sorted(by.items()):
        rows.sort(key=lambda r: r["t"])
        up = [r for r in rows if r["up"]]
        span = up[-1]["t"] - up[0]["t"] if len(up) > 1 else 0.0
        queued = _rising([r.get("queue_count") for r in up])
        hits, queries = _rising([r.get("prefix_hits") for r in up]), _rising([r.get("prefix_queries") for r in up])
        out.append({
            "server": name, "samples": len(rows), "up": len(up) / len(rows),
            "busy": (sum(1 for r in up if (r.get("running") or 0) > 0) / len(up)) if up else None,
            "running_mean": _mean(r.get("running") for r in up), "waiting_mean": _mean(r.get("waiting") for r in up),
            "kv_mean": _mean(r.get("kv_usage") for r in up),
            "prefix_hit_rate": hits / queries if queries else None,
            "generation_tokens_per_s": _rising([r.get("generation_tokens") for r in up]) / span if span else None,
            "queue_wait_mean_s": _rising([r.get("queue_s_sum") for r in up]) / queued if queued else None})
    return out


def gpus(lines: list[dict]) -> list[dict]:
    by = defaultdict(list)
    for r in lines:
        if "gpu" in r:
            by[r["gpu"]].append(r)
    return [{"gpu": g, "util_mean": _mean(r.get("util") for r in rows),
             "mem_used_max": max((r.get("mem_used") or 0 for r in rows), default=None)}
            for g, rows in sorted(by.items())]


def _slot_shares(timed: list[dict], slot_s: float) -> dict:
    shares = {name: sum(r["phases"][p] for r in timed for p in group) / slot_s for name, group in SHARES.items()}
    shares["busy"] = sum(r["duration_s"] for r in timed) / slot_s
    shares["idle"] = max(0.0, 1.0 - shares["busy"])
    return shares


def _phases(timed: list[dict]) -> dict:
    total = sum(r["duration_s"] for r in timed) or 1.0
    return {p: {**(_spread([r["phases"][p] for r in timed]) or {}),
                "share": sum(r["phases"][p] for r in timed) / total} for p in PHASES}


def timing_figures(path, reader: RunReader | None = None, metrics: list[dict] | None = None) -> dict:
    """The timing figures of a cua run folder (a live one too: pass its reader and metric lines)."""
    reader = reader or RunReader(path, keep_attempts=True, strict=True).refresh(warn=True)
    metrics = read_metrics(reader.path, warn=True)[0] if metrics is None else metrics
    attempts = reader.attempts or []
    timed = [{**r, "phases": ph} for r in attempts
             if (ph := phases_of(r)) is not None and isinstance(r.get("started_at"), (int, float))
             and isinstance(r.get("duration_s"), (int, float))]
    out = {"run": reader.path.name, "attempts": len(attempts), "timed": len(timed),
           "steps": sum(r.get("steps") or 0 for r in attempts), "wall_s": None, "steps_per_s": None,
           "lanes": None, "env": None, "largest_wait": None, "phases": None, "claim_wait": None,
           "domains": {}, "model_servers": servers(metrics), "gpus": gpus(metrics)}
    busy = [s["busy"] for s in out["model_servers"] if s["busy"] is not None]
    out["model_busy"] = float(np.mean(busy)) if busy else None
    if not timed:
        return out
    start = min(r["started_at"] - (r["claim_wait_s"] if isinstance(r.get("claim_wait_s"), (int, float)) else 0)
                for r in timed)
    end = max(r["started_at"] + r["duration_s"] for r in timed)
    wall = max(end - start, 1e-9)
    lanes = len({r["lane"] if isinstance(r.get("lane"), str) else None for r in timed})  # a crafted one: no lane
    waited = [r["claim_wait_s"] for r in timed if isinstance(r.get("claim_wait_s"), (int, float))]
    out.update(wall_s=wall, lanes=lanes, steps_per_s=sum(r.get("steps") or 0 for r in timed) / wall,
               env=_slot_shares(timed, lanes * wall), phases=_phases(timed), claim_wait=_spread(waited))
    waits = {k: out["env"][k] for k in WAITS}
    out["largest_wait"] = max(waits, key=waits.get)
    by = defaultdict(list)
    for r in timed:
        by[r.get("domain") or "-"].append(r)
    for domain, rows in sorted(by.items()):
        out["domains"][domain] = {"attempts": len(rows), "steps": sum(r.get("steps") or 0 for r in rows),
                                  "duration": _spread([r["duration_s"] for r in rows]),
                                  "phases": _phases(rows)}
    return out
