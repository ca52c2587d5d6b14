"""What a run costs: its envs' time, its desktops' memory, its model servers' busy time and tokens,
in all and per success, and in money when prices are given (`cua stats --cost`).

Every attempt costs, retries and infrastructure errors too: their time is in the totals. The
denominator of "per success" is the pairs whose final result is a success, so an error is never
an agent failure there either. What the run folder cannot tell is None with the reason, never a
guess. Each figure's source is on docs/reference/stats-output.md.
"""

import json
import math
from collections import defaultdict

from .._util.diag import warn
from ..errors import InputError
from ..runfolder.confined import Refused, read_in, run_root
from ..runfolder.reader import RunReader
from ..runfolder.records import in_range, phases_of
from .readers import RunData
from .timing import read_metrics

# --price keys: what each prices, the figure it multiplies, and that figure's units in one priced unit.
PRICES = {"gpu-hour": ("cost_gpu", "model_busy_s", 3600.0),
          "desktop-hour": ("cost_env", "env_s", 3600.0),
          "mtok": ("cost_tokens", "tokens", 1e6)}
PRICE_EXAMPLE = "gpu-hour=2.5,desktop-hour=0.05,mtok=0.4"
# The figures that are also shown per success.
PER_SUCCESS = ("env_s", "desktop_memory_gib_s", "model_busy_s", "tokens")
MAX_RUN_JSON = 4 << 20      # run.json holds the config: more is not one
SAMPLER_TIMEOUT_S = 5.0     # the longest the load sampler waits for a server (rollout/monitor.py)


def parse_prices(text: str) -> dict[str, float]:
    """`gpu-hour=2.5,desktop-hour=0.05,mtok=0.4` as {key: price}; InputError naming the first bad entry."""
    prices = {}
    for entry in text.split(","):
        key, eq, value = (part.strip() for part in entry.partition("="))
        if not entry.strip():
            raise InputError(f"--price: an empty entry in {text!r:.80} (e.g. --price {PRICE_EXAMPLE})")
        if not eq or not key:
            raise InputError(f"--price: {entry.strip()!r:.60} is not KEY=PRICE (e.g. --price {PRICE_EXAMPLE})")
        if key not in PRICES:
            raise InputError(f"--price: {key!r:.40} is no price cua knows; the keys are {', '.join(PRICES)}")
        if key in prices:
            raise InputError(f"--price: {key} is given twice")
        try:
            price = float(value)
        except ValueError:
            price = math.nan
        if not 0 <= price < math.inf:
            raise InputError(f"--price: {key}={value!r:.40} is not a price: give a finite number >= 0")
        prices[key] = price + 0.0  # -0 is 0: no "-0.00" in a table
    return prices


def _get(obj, *keys):
    """obj[k1][k2]... of parsed JSON, or None where a level is missing or not an object."""
    for k in keys:
        obj = obj.get(k) if type(obj) is dict else None
    return obj


def _config(path) -> dict:
    """run.json's resolved config; {} when run.json is missing, not read or no JSON object (the figures it
    gives are then unknown), with a warning naming it but when missing."""
    where = path / "run.json"
    try:
        raw = read_in(run_root(path), "run.json", MAX_RUN_JSON)
        meta = json.loads(raw) if len(raw) <= MAX_RUN_JSON else None
    except FileNotFoundError:
        return {}
    except Refused as e:
        warn(f"{where}: the file {e}; not read")
        return {}
    except OSError as e:
        warn(f"{where}: cannot read: {e.strerror or e}")
        return {}
    except (ValueError, RecursionError):
        meta = None
    if type(meta) is not dict:
        warn(f"{where}: holds no JSON object (of at most {MAX_RUN_JSON >> 20} MiB); read as no config")
        return {}
    config = meta.get("config")
    return config if type(config) is dict else {}


def memory_cap(config: dict) -> tuple[float | None, str | None]:
    """The GiB each desktop of the run was capped at, or None and why its memory cannot be known.

    No desktop reports the memory it used; cua's own desktops (env.url local) each run in a cgroup
    capped at env.osworld.limits.memory_gib, so that cap x their time bounds what they took."""
    env = _get(config, "env")
    if type(env) is not dict:
        return None, "run.json records no env config"
    if env.get("kind") != "osworld":
        return None, f"env.kind {str(env.get('kind'))[:40]}: no desktops"
    if env.get("url") != "local" or _get(env, "osworld", "desktops"):
        return None, "the desktops are not cua's own (env.url or env.osworld.desktops): their memory is not recorded"
    limits = _get(env, "osworld", "limits")
    gib = _get(limits, "memory_gib")
    if _get(limits, "enforce") is not True:
        return None, "the desktops ran without limits (env.osworld.limits.enforce false): their memory is not recorded"
    if not (in_range(gib, 0) and gib > 0):
        return None, "run.json records no env.osworld.limits.memory_gib"
    return float(gib), None


def _pause_s(config: dict) -> float:
    """Samples further apart than this are two sessions of the sampler (a resumed run), not load
    between them: the sampler takes at most its period or its timeout between samples."""
    period = _get(config, "runner", "sample_s")
    period = float(period) if in_range(period, 0) else 0.5
    return 2 * max(period, SAMPLER_TIMEOUT_S)


def model_load(lines: list[dict], pause_s: float) -> tuple[dict, dict]:
    """The model servers' busy seconds and tokens over the run's samples, summed over servers; and
    why each one that is None cannot be known.

    Busy: the time from each sample that has a request running to the server's next sample.
    Tokens: what vLLM's prompt and generation counters rose between consecutive samples (a drop,
    a restarted server, is no loss). Both leave out the gaps of more than `pause_s`."""
    by = defaultdict(list)
    for r in lines:
        if "server" in r:
            by[r["server"]].append(r)
    if not by:
        why = ("no model server was sampled (no metrics.jsonl: a provider without servers, servers without "
               "/metrics, or runner.sample_s 0)")
        return dict.fromkeys(("model_busy_s", "prompt_tokens", "generation_tokens")), dict.fromkeys(
            ("model_busy_s", "tokens"), why)
    sums = {"model_busy_s": None, "prompt_tokens": None, "generation_tokens": None}
    for rows in by.values():
        rows.sort(key=lambda r: r["t"])
        for a, b in zip(rows, rows[1:]):
            if a["up"] and a["running"] is not None and b["t"] - a["t"] <= pause_s:
                sums["model_busy_s"] = (sums["model_busy_s"] or 0.0) + (b["t"] - a["t"] if a["running"] > 0 else 0.0)
        for key in ("prompt_tokens", "generation_tokens"):
            known = [r for r in rows if r["up"] and r[key] is not None]
            for a, b in zip(known, known[1:]):
                if b["t"] - a["t"] <= pause_s:
                    sums[key] = (sums[key] or 0.0) + max(0.0, b[key] - a[key])
    if not all(v is None or math.isfinite(v) for v in sums.values()):
        return dict.fromkeys(sums), dict.fromkeys(("model_busy_s", "tokens"), "the servers' counters in "
                                                   "metrics.jsonl rise beyond any count: a damaged file")
    why = {}
    if sums["model_busy_s"] is None:
        why["model_busy_s"] = "the servers' /metrics have no vllm:num_requests_running in two samples in a row"
    if sums["prompt_tokens"] is None or sums["generation_tokens"] is None:
        why["tokens"] = ("the servers' /metrics have no vllm:prompt_tokens_total and generation_tokens_total "
                         "in two samples in a row")
    return sums, why


def _scaled(v: float | None, share: float | None) -> float | None:
    """v x share; None when either is unknown, or the product is beyond a float (figures of a crafted folder)."""
    if v is None or share is None:
        return None
    product = v * share
    return product if math.isfinite(product) else None


def _figures(attempts: list[dict], finals: dict, load: dict, share: float | None, cap: float | None,
             prices: dict) -> dict:
    """The cost figures of some attempts and final results (a run's, or one domain's), with `share`
    of the run's model load."""
    outcomes = [f.outcome if f is not None else None for f in finals.values()]
    errors = [r for r in attempts if r["outcome"] == "error"]
    untimed = sum(r.get("duration_s") is None for r in attempts)
    env_s = error_env_s = None
    if untimed < len(attempts) or not attempts:  # some durations to add up (or nothing ran)
        env_s = math.fsum(r["duration_s"] for r in attempts if r.get("duration_s") is not None)
        error_env_s = math.fsum(r["duration_s"] for r in errors if r.get("duration_s") is not None)
    out = {"tasks": len({t for t, _ in finals}), "pairs": len(finals), "successes": outcomes.count("success"),
           "failures": outcomes.count("failure"), "errors": outcomes.count("error"), "missing": outcomes.count(None),
           "attempts": len(attempts), "error_attempts": len(errors), "untimed_attempts": untimed,
           "env_s": env_s, "error_env_s": error_env_s,
           "desktop_memory_gib_s": _scaled(cap, env_s),
           **{k: _scaled(v, share) for k, v in load.items()}}
    tokens = (out["prompt_tokens"], out["generation_tokens"])
    out["tokens"] = None if None in tokens else _scaled(sum(tokens), 1.0)
    n = out["successes"]
    for k in PER_SUCCESS:
        out[f"{k}_per_success"] = out[k] / n if n and out[k] is not None else None
    parts = {name: None for name, _, _ in PRICES.values()}
    for key, price in prices.items():
        name, figure, unit = PRICES[key]
        parts[name] = _scaled(out[figure], price / unit)
    given = [parts[PRICES[key][0]] for key in prices]
    total = _scaled(sum(given), 1.0) if given and None not in given else None
    out.update(parts, cost=total, cost_per_task=total / out["tasks"] if total is not None and out["tasks"] else None,
               cost_per_success=total / n if total is not None and n else None)
    return out


def cost_figures(data: RunData, prices: dict) -> dict:
    """The cost figures of a cua run read by `read_run`, per run and per domain.

    Its attempts are read again, quietly (`read_run` warned about their lines). A domain gets the
    run's model load in proportion to its attempts' model-call time (phases.model_s): the servers'
    samples do not say whose request was running."""
    config = _config(data.path)
    attempts = RunReader(data.path, keep_attempts=True, strict=True).refresh().attempts
    metrics = read_metrics(data.path, warn=True)[0]
    load, unknown = model_load(metrics, _pause_s(config))
    cap, why_not = memory_cap(config)
    if why_not:
        unknown["desktop_memory_gib_s"] = why_not

    by_domain = defaultdict(lambda: ([], {}))
    for r in attempts:  # a task's domain as `cua stats` has it; a line newer than that read, its own
        by_domain[str(data.domains.get(r["task_id"], r.get("domain")))][0].append(r)
    for pair, f in data.pairs.items():
        by_domain[str(data.domains.get(pair[0]))][1][pair] = f
    model_s = {d: math.fsum(ph["model_s"] for r in rows if (ph := phases_of(r))) for d, (rows, _) in by_domain.items()}
    total_model_s = math.fsum(model_s.values())
    if not total_model_s and any(v is not None for v in load.values()):
        unknown["domains_model"] = "no attempt records its model-call time (phases): the load is not shared out"
    out = {"run": data.name, **_figures(attempts, data.pairs, load, 1.0, cap, prices),
           "desktop_memory_limit_gib": cap, "unknown": unknown, "domains": {}}
    if out["env_s"] is None:
        unknown["env_s"] = "no attempt records its duration"
    if prices and out["cost"] is None and all(out[PRICES[k][1]] is not None for k in prices):
        unknown["cost"] = "beyond the largest number a float holds: check --price"
    for d, (rows, finals) in sorted(by_domain.items()):
        share = model_s[d] / total_model_s if total_model_s else None
        out["domains"][d] = _figures(rows, finals, load, share, cap, prices)
    return out


def delta(a: dict, b: dict) -> dict:
    """B's figures minus A's, where both runs have the figure."""
    return {k: b[k] - a[k] for k, v in a.items()
            if type(v) in (int, float) and type(b.get(k)) in (int, float)}
