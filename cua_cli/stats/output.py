"""Rendering stats and comparisons as a terminal table, JSON, CSV or Markdown."""

import csv
import io
import json

from tabulate import tabulate

from .._util.text import percent


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
