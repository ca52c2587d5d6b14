"""What a config would play, found without starting anything (`cua config tasks`): its tasks by
domain, those a rollout would refuse at its start (a step, getter or metric cua lacks, an app the
desktops lack, the live web on desktops without it), and why. Tasks that need a Google account's
credentials or the network are counted apart: no change to cua makes them playable there."""

import json
from collections import Counter

from tabulate import tabulate

from ..config import Config
from ..osworld.support import needs_credentials
from ..tasks import load_tasks
from .desktops import refusals

MAX_REASONS = 20  # rows of the table of reasons; JSON has them all


def needs_network(missing: list[str]) -> bool:
    return any(m.startswith("network (") for m in missing)


def task_plan(cfg: Config) -> dict:
    tasks = load_tasks(cfg)
    refused = refusals(cfg, tasks)
    why = {r["task_id"]: r["missing"] for r in refused}
    domains: dict[str, dict] = {}
    for t in tasks:
        row = domains.setdefault(t.domain or "-", {"domain": t.domain or "-", "tasks": 0, "playable": 0,
                                                   "needs_credentials": 0, "needs_network": 0})
        row["tasks"] += 1
        missing = why.get(t.task_id)
        row["playable"] += missing is None
        row["needs_credentials"] += bool(missing) and needs_credentials(missing)
        row["needs_network"] += bool(missing) and not needs_credentials(missing) and needs_network(missing)
    reasons = Counter(m for r in refused for m in r["missing"])
    return {"tasks": len(tasks), "playable": len(tasks) - len(refused),
            "needs_credentials": sum(d["needs_credentials"] for d in domains.values()),
            "needs_network": sum(d["needs_network"] for d in domains.values()),
            "domains": sorted(domains.values(), key=lambda r: r["domain"]),
            "reasons": [{"missing": m, "tasks": n} for m, n in reasons.most_common()], "refused": refused}


def render_plan(plan: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(plan, ensure_ascii=False, indent=1)
    keys = ("tasks", "playable", "needs_credentials", "needs_network")
    rows = [[name, *(d[k] for k in keys), d["tasks"] - d["playable"] - d["needs_credentials"] - d["needs_network"]]
            for name, d in [(d["domain"], d) for d in plan["domains"]] + [("total", plan)]]
    parts = [tabulate(rows, headers=["domain", "tasks", "playable", "needs credentials", "needs the network",
                                     "lacks something else"])]
    if plan["reasons"]:
        shown = plan["reasons"][:MAX_REASONS]
        parts.append(tabulate([[r["missing"], r["tasks"]] for r in shown], headers=["what the others lack", "tasks"]))
        if len(plan["reasons"]) > len(shown):
            parts[-1] += f"\n... and {len(plan['reasons']) - len(shown)} more (--format json lists every refused task)"
    return "\n\n".join(parts)
