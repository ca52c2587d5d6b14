"""Rendering stats and comparisons as a terminal table, JSON, CSV or Markdown."""

import csv
import io
import json
from collections import defaultdict

from tabulate import tabulate

from .._util.text import percent
from ..runfolder.records import PHASES
from .cost import PRICES


def _printable(text: str) -> str:
    """Lone surrogates (task ids from undecodable names) as \\udXXX, which any terminal can print."""
    return text.encode("utf-8", "backslashreplace").decode()


def _ci(ci) -> str:
    return "-" if not ci else f"[{percent(ci[0])}, {percent(ci[1])}]"


def _run_row(r: dict, layout: bool) -> dict:
    row = {"run": r["run"], **({"layout": r["layout"]} if layout else {}),
           "scheduled": r["scheduled"], "finished": r["finished"],
           "missing": r["missing"], "errors": r["errors"], "success %": percent(r["success_rate"]),
           "95% CI": _ci(r["ci95"]), "of finished %": percent(r["success_rate_finished"])}
    for k, v in r["pass_at_k"].items():
        if len(r["pass_at_k"]) > 1:
            row[f"pass@{k} %"] = percent(v)
    if r.get("unsupported"):  # tasks cua cannot play: never scheduled, so in no rate
        row["unsupported"] = r["unsupported"]
    if r.get("desktop_limits"):  # failures, shown apart: the agent's runaway, or a limit too low for the app
        row["desktop limit hits"] = r["desktop_limits"]
    row["mean steps"] = "-" if r["mean_steps"] is None else f"{r['mean_steps']:.1f}"
    row["tasks never / always solved"] = f"{r['never_solved']} / {r['always_solved']}"
    return row


def _flat(r: dict) -> dict:
    """One CSV row of a run: scalars, the interval bounds and pass@k columns."""
    row = {k: v for k, v in r.items() if not isinstance(v, (dict, list))}
    row["ci95_low"], row["ci95_high"] = r["ci95"] or (None, None)
    for name in ("pass_at_k", "pass_hat_k"):
        for k, v in r[name].items():
            row[f"{name}_{k}"] = v
    return row


def _breakdown(runs: list[dict], by: str) -> list[dict]:
    key = "domains" if by == "domain" else "tasks"
    rows = []
    for r in runs:
        for name, f in r.get(key, {}).items():
            rows.append({"run": r["run"], by: name, **{k: v for k, v in f.items() if k != "domain"}})
    return rows


def _csv(rows: list[dict]) -> str:
    if not rows:
        return ""
    fields = list(dict.fromkeys(k for row in rows for k in row))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def render_stats(result: dict, fmt: str, by: str | None) -> str:
    runs = result["runs"]
    if fmt == "json":
        return json.dumps(result, indent=2)
    if fmt == "csv":
        return _printable(_csv(_breakdown(runs, by) if by else [_flat(r) for r in runs]))
    tablefmt = "github" if fmt == "markdown" else "simple_outline"
    mixed = len({r["layout"] for r in runs}) > 1
    parts = [tabulate([_run_row(r, mixed) for r in runs], headers="keys", tablefmt=tablefmt, floatfmt=".1f")]
    if len(runs) > 1:
        std = result["std_success_rate"]
        parts.append(f"mean success rate over {len(runs)} runs: {percent(result['mean_success_rate'])}%"
                     f" (sample std {percent(std)} points)")
    if by:
        rows = [{k: v for k, v in row.items() if not k.startswith("success_rate")}
                | {"success %": percent(row["success_rate"]), "of finished %": percent(row["success_rate_finished"])}
                for row in _breakdown(runs, by)]
        parts.append(tabulate(rows, headers="keys", tablefmt=tablefmt, floatfmt=".1f"))
    groups = [{"run": r["run"], "group": g, "scheduled": f["scheduled"], "success %": percent(f["success_rate"])}
              for r in runs for g, f in r["groups"].items()]
    groups += [{"run": r["run"], "group": "infeasible tasks", "scheduled": r["infeasible"]["scheduled"],
                "success %": percent(r["infeasible"]["success_rate"])} for r in runs if r["infeasible"]]
    if groups:
        parts.append(tabulate(groups, headers="keys", tablefmt=tablefmt, floatfmt=".1f"))
    for r in runs:
        if r["errors_by_stop_reason"]:
            reasons = ", ".join(f"{k}={v}" for k, v in sorted(r["errors_by_stop_reason"].items()))
            parts.append(f"{r['run']}: errors by stop reason: {reasons}")
    return _printable("\n\n".join(parts))


def render_compare(result: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(result, indent=2)
    summary = {"run A": result["run_a"], "run B": result["run_b"], "tasks shared": result["tasks_shared"],
               "A better": len(result["better_a"]), "B better": len(result["better_b"]), "same": result["same"],
               "mean A %": percent(result["mean_a"]), "mean B %": percent(result["mean_b"]),
               "delta (B-A) points": percent(result["delta"], sign=True),
               "p-value": f"{result['p_value']:.4g}", "test": result["test"]}
    domains = [{"domain": d, "tasks": v["tasks"], "delta (B-A) points": percent(v["delta"], sign=True)}
               for d, v in result["domains"].items()]
    if fmt == "csv":
        return _printable(_csv([summary]) + "\n" + _csv(domains))
    tablefmt = "github" if fmt == "markdown" else "simple_outline"
    parts = [tabulate(list(summary.items()), tablefmt=tablefmt, disable_numparse=True),
             tabulate(domains, headers="keys", tablefmt=tablefmt, disable_numparse=True,
                      colalign=("left", "right", "right"))]
    for label, key in (("better in A", "better_a"), ("better in B", "better_b"),
                       ("only in A", "only_a"), ("only in B", "only_b")):
        if result[key]:
            shown = ", ".join(result[key][:20]) + (f", ... ({len(result[key])} in all)" if len(result[key]) > 20 else "")
            parts.append(f"{label}: {shown}")
    return _printable("\n\n".join(parts))



def _s(v, digits=2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _timing_column(t: dict) -> dict:
    """A run's summary figures, as one column of the summary table."""
    env, wait = t["env"] or {}, t["claim_wait"] or {}
    col = {"wall time s": _s(t["wall_s"], 1), "attempts (timed)": f"{t['attempts']} ({t['timed']})",
           "env slots (lanes)": t["lanes"] or "-", "steps/s": _s(t["steps_per_s"])}
    for k, label in (("busy", "in an episode"), ("acting", "observing or acting"), ("model", "waiting for the model"),
                     ("allocate", "allocating, setting up, releasing"), ("evaluate", "evaluating"),
                     ("idle", "idle between episodes")):
        col[f"env time {label} %"] = percent(env.get(k))
    col["model servers busy %"] = percent(t["model_busy"])
    col["largest wait"] = t["largest_wait"] or "-"
    col["claim wait p50 / p95 / max s"] = " / ".join(_s(wait.get(k)) for k in ("p50", "p95", "max")) if wait else "-"
    return col


def timing_table(columns: dict[str, dict]) -> list[list]:
    """Figures as rows, one column per run (or per side of a comparison)."""
    names = list(dict.fromkeys(k for col in columns.values() for k in col))
    return [[name, *(col.get(name, "-") for col in columns.values())] for name in names]


def _phase_rows(name: str, phases: dict | None) -> list[dict]:
    return [{"run": name, "phase": p.removesuffix("_s"), "p50 s": _s(f.get("p50"), 3), "p95 s": _s(f.get("p95"), 3),
             "max s": _s(f.get("max"), 3), "share %": percent(f["share"])} for p, f in (phases or {}).items()]


def _domain_rows(t: dict) -> list[dict]:
    rows = []
    for d, f in t["domains"].items():
        row = {"run": t["run"], "domain": d, "attempts": f["attempts"], "steps": f["steps"],
               "duration p50 s": _s((f["duration"] or {}).get("p50"), 2)}
        row.update((f"{p.removesuffix('_s')} p50 s", _s(v.get("p50"), 3)) for p, v in f["phases"].items()
                   if p != "other_s")
        rows.append(row)
    return rows


def render_timing(runs: list[dict], fmt: str, by: str | None) -> str:
    """`cua stats --timing`: per run its env slots' time, its waits, its phases and its model servers."""
    if fmt == "json":
        return json.dumps({"runs": runs}, indent=2)
    summary = timing_table({t["run"]: _timing_column(t) for t in runs})
    phases = [row for t in runs for row in _phase_rows(t["run"], t["phases"])]
    servers = [{"run": t["run"], "server": s["server"], "up %": percent(s["up"]), "busy %": percent(s["busy"]),
                "running": _s(s["running_mean"]), "waiting": _s(s["waiting_mean"]), "KV %": percent(s["kv_mean"]),
                "prefix hits %": percent(s["prefix_hit_rate"]), "gen tok/s": _s(s["generation_tokens_per_s"], 1),
                "queue wait s": _s(s["queue_wait_mean_s"], 3)} for t in runs for s in t["model_servers"]]
    gpus = [{"run": t["run"], "gpu": g["gpu"], "util %": _s(g["util_mean"], 1),
             "mem max GiB": _s(None if g["mem_used_max"] is None else g["mem_used_max"] / 2 ** 30)}
            for t in runs for g in t["gpus"]]
    domains = [row for t in runs for row in _domain_rows(t)] if by == "domain" else []
    if fmt == "csv":
        head = [{"figure": row[0], **{t["run"]: v for t, v in zip(runs, row[1:])}} for row in summary]
        return _printable("\n".join(_csv(part) for part in (head, phases, servers, gpus, domains) if part))
    tablefmt = "github" if fmt == "markdown" else "simple_outline"
    parts = [tabulate(summary, headers=["", *(t["run"] for t in runs)], tablefmt=tablefmt, disable_numparse=True)]
    parts += [tabulate(part, headers="keys", tablefmt=tablefmt, disable_numparse=True)
              for part in (phases, servers, gpus, domains) if part]
    notes = [f"{t['run']}: {t['attempts'] - t['timed']} of {t['attempts']} attempts carry no phases (written "
             "before cua timed them, or for a runner that was lost)" for t in runs if t["attempts"] > t["timed"]]
    if not any(t["model_servers"] for t in runs):
        notes.append("no model server load was sampled (no metrics.jsonl: a provider without servers, servers "
                     "without /metrics, or runner.sample_s 0)")
    return _printable("\n\n".join(parts + notes))


def render_timing_compare(a: dict, b: dict, fmt: str) -> str:
    """`cua compare --timing`: the summary figures and each phase of two runs side by side."""
    if fmt == "json":
        return json.dumps({"run_a": a, "run_b": b}, indent=2)
    summary = timing_table({"A": _timing_column(a), "B": _timing_column(b)})
    phases = []
    for p in PHASES:
        fa, fb = ((t["phases"] or {}).get(p, {}) for t in (a, b))
        phases.append({"phase": p.removesuffix("_s"), "p50 A s": _s(fa.get("p50"), 3), "p50 B s": _s(fb.get("p50"), 3),
                       "p95 A s": _s(fa.get("p95"), 3), "p95 B s": _s(fb.get("p95"), 3),
                       "share A %": percent(fa.get("share")), "share B %": percent(fb.get("share"))})
    if fmt == "csv":
        head = [{"figure": row[0], "A": row[1], "B": row[2]} for row in summary]
        return _printable(_csv(head) + "\n" + _csv(phases))
    tablefmt = "github" if fmt == "markdown" else "simple_outline"
    return _printable("\n\n".join([f"A: {a['run']}\nB: {b['run']}",
                                    tabulate(summary, headers=["", "A", "B"], tablefmt=tablefmt, disable_numparse=True),
                                    tabulate(phases, headers="keys", tablefmt=tablefmt, disable_numparse=True)]))


def _amount(v, digits: int = 1, sign: bool = False) -> str:
    return "n/a" if v is None else f"{v:{'+' if sign else ''},.{digits}f}"


def _money(v, sign: bool = False) -> str:
    """Cents for a sum of at least 1, else three significant digits: a task's cost is often a fraction of a cent."""
    if v is None:
        return "n/a"
    return f"{v:{'+' if sign else ''},.2f}" if abs(v) >= 1 or v == 0 else f"{v:{'+' if sign else ''}.3g}"


# The rows of the cost table: label, figure, format.
_COST_ROWS = [("tasks", "tasks", 0), ("pairs scheduled", "pairs", 0), ("successes", "successes", 0),
              ("agent failures", "failures", 0), ("infra errors (final)", "errors", 0), ("missing", "missing", 0),
              ("attempts", "attempts", 0), ("attempts ended by an infra error", "error_attempts", 0),
              ("env s", "env_s", 1), ("env s of those infra-error attempts", "error_env_s", 1),
              ("env s per success", "env_s_per_success", 1),
              ("desktop memory GiB-s, at most", "desktop_memory_gib_s", 1),
              ("desktop memory GiB-s per success, at most", "desktop_memory_gib_s_per_success", 1),
              ("model busy s", "model_busy_s", 1), ("model busy s per success", "model_busy_s_per_success", 1),
              ("tokens (prompt + generated)", "tokens", 0), ("tokens per success", "tokens_per_success", 0)]
_COST_PARTS = {"cost_gpu": "cost of model servers", "cost_env": "cost of envs", "cost_tokens": "cost of tokens"}
_MONEY_ROWS = [("cost", "cost"), ("cost per task", "cost_per_task"), ("cost per success", "cost_per_success")]
# The n/a reasons' names in notes.
_UNKNOWN = {"env_s": "env s", "desktop_memory_gib_s": "desktop memory", "model_busy_s": "model busy s",
            "tokens": "tokens", "domains_model": "model figures per domain", "cost": "cost"}


def _cost_rows(prices: dict) -> list[tuple[str, str, int | None]]:
    """(label, figure, decimals; None for money) of every row the prices given call for."""
    money = [(_COST_PARTS[PRICES[k][0]], PRICES[k][0], None) for k in prices]
    money += [(label, key, None) for label, key in _MONEY_ROWS] if prices else []
    return _COST_ROWS + money


def _cost_cell(v, digits: int | None, sign: bool = False) -> str:
    return _money(v, sign) if digits is None else _amount(v, digits, sign)


def _cost_notes(runs: list[dict], prices: dict, by: str | None) -> list[str]:
    notes = ["Every attempt counts, retries and infrastructure errors included: they held an env and the model "
             "servers as much as the final ones. Per success = total / successes (pairs whose final score is 1): "
             "an infra error is no agent failure, and 0 successes give n/a."]
    if prices:
        notes.append("prices: " + ", ".join(f"{k} {v:g}" for k, v in prices.items())
                     + (" (gpu-hour prices an hour of one model server busy, however many GPUs it spans)"
                        if "gpu-hour" in prices else ""))
    for r in runs:
        if r["untimed_attempts"] and r["env_s"] is not None:
            notes.append(f"{r['run']}: {r['untimed_attempts']} of {r['attempts']} attempts record no duration: "
                         "their env time is in no figure")
        reasons = defaultdict(list)
        for key, why in r["unknown"].items():
            if key != "domains_model" or by == "domain":
                reasons[why].append(_UNKNOWN[key])
        notes += [f"{r['run']}: {', '.join(names)} n/a: {why}" for why, names in reasons.items()]
        if r["desktop_memory_limit_gib"] is not None:
            notes.append(f"{r['run']}: desktop memory is each desktop's cap ({r['desktop_memory_limit_gib']:g} GiB) "
                         "x env s: what the desktops used is not recorded")
    if by == "domain":
        notes.append("Per domain, the model busy s and tokens are the run's, shared out by each domain's share of "
                     "the attempts' model-call time.")
    return notes


def _cost_domain_rows(r: dict, prices: dict) -> list[dict]:
    rows = []
    for d, f in r["domains"].items():
        row = {"run": r["run"], "domain": d, "successes / pairs": f"{f['successes']} / {f['pairs']}",
               "env s": _amount(f["env_s"]), "env s / success": _amount(f["env_s_per_success"]),
               "model busy s / success": _amount(f["model_busy_s_per_success"]),
               "tokens / success": _amount(f["tokens_per_success"], 0)}
        if prices:
            row.update({"cost": _money(f["cost"]), "cost / task": _money(f["cost_per_task"]),
                        "cost / success": _money(f["cost_per_success"])})
        rows.append(row)
    return rows


def _cost_flat(r: dict) -> dict:
    return {k: v for k, v in r.items() if not isinstance(v, dict)}


def render_cost(runs: list[dict], prices: dict, fmt: str, by: str | None) -> str:
    """`cua stats --cost`: per run its totals, per success and, with prices, in money; per domain with --by."""
    if fmt == "json":
        return json.dumps({"runs": runs, "prices": prices}, indent=2)
    if fmt == "csv":
        rows = [_cost_flat(r) for r in runs]
        if by == "domain":
            rows = [{"run": r["run"], "domain": d, **f} for r in runs for d, f in r["domains"].items()]
        return _printable(_csv(rows))
    tablefmt = "github" if fmt == "markdown" else "simple_outline"
    table = [[label, *(_cost_cell(r[key], digits) for r in runs)] for label, key, digits in _cost_rows(prices)]
    parts = [tabulate(table, headers=["", *(r["run"] for r in runs)], tablefmt=tablefmt, disable_numparse=True)]
    domains = [row for r in runs for row in _cost_domain_rows(r, prices)] if by == "domain" else []
    if domains:
        parts.append(tabulate(domains, headers="keys", tablefmt=tablefmt, disable_numparse=True))
    return _printable("\n\n".join(parts + _cost_notes(runs, prices, by)))


def render_cost_compare(a: dict, b: dict, diff: dict, prices: dict, fmt: str) -> str:
    """`cua compare --cost`: both runs' cost figures side by side, with B - A; per domain, per success."""
    if fmt == "json":
        return json.dumps({"run_a": a, "run_b": b, "delta": diff, "prices": prices}, indent=2)
    rows = _cost_rows(prices)
    if fmt == "csv":
        return _printable(_csv([{"figure": key, "A": a[key], "B": b[key], "B-A": diff.get(key)}
                                for _, key, _ in rows]))
    tablefmt = "github" if fmt == "markdown" else "simple_outline"
    table = [[label, _cost_cell(a[key], digits), _cost_cell(b[key], digits), _cost_cell(diff.get(key), digits, True)]
             for label, key, digits in rows]
    per = [("env s / success", "env_s_per_success", 1), ("model busy s / success", "model_busy_s_per_success", 1),
           ("tokens / success", "tokens_per_success", 0)] + ([("cost / success", "cost_per_success", None)]
                                                               if prices else [])
    domains = []
    for d in sorted(set(a["domains"]) | set(b["domains"])):
        fa, fb = a["domains"].get(d), b["domains"].get(d)
        row = {"domain": d, "successes A": "-" if fa is None else fa["successes"],
               "successes B": "-" if fb is None else fb["successes"]}
        for label, key, digits in per:
            row[f"{label} A"] = "-" if fa is None else _cost_cell(fa[key], digits)
            row[f"{label} B"] = "-" if fb is None else _cost_cell(fb[key], digits)
        domains.append(row)
    parts = [f"A: {a['run']}\nB: {b['run']}",
             tabulate(table, headers=["", "A", "B", "B - A"], tablefmt=tablefmt, disable_numparse=True)]
    if domains:
        parts.append(tabulate(domains, headers="keys", tablefmt=tablefmt, disable_numparse=True))
    return _printable("\n\n".join(parts + _cost_notes([a, b], prices, "domain")))
