"""What a config would play, found without starting anything (`cua config tasks`): its tasks by
domain, those a rollout would refuse at its start (a step, getter or metric cua lacks, an app the
desktops lack), and why."""

import json
from collections import Counter

from tabulate import tabulate

from ..config import Config
from ..tasks import load_tasks
from .desktops import refusals

MAX_REASONS = 20  # rows of the table of reasons; JSON has them all


def task_plan(cfg: Config) -> dict:
    tasks = load_tasks(cfg)
    refused = refusals(cfg, tasks)
    out = {r["task_id"] for r in refused}
    domains: dict[str, dict] = {}
    for t in tasks:
        row = domains.setdefault(t.domain or "-", {"domain": t.domain or "-", "tasks": 0, "playable": 0})
        row["tasks"] += 1
        row["playable"] += t.task_id not in out
    reasons = Counter(m for r in refused for m in r["missing"])
    return {"tasks": len(tasks), "playable": len(tasks) - len(refused),
            "domains": sorted(domains.values(), key=lambda r: r["domain"]),
            "reasons": [{"missing": m, "tasks": n} for m, n in reasons.most_common()], "refused": refused}


def render_plan(plan: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(plan, ensure_ascii=False, indent=1)
    rows = [[d["domain"], d["tasks"], d["playable"], d["tasks"] - d["playable"]] for d in plan["domains"]]
    rows.append(["total", plan["tasks"], plan["playable"], plan["tasks"] - plan["playable"]])
    parts = [tabulate(rows, headers=["domain", "tasks", "playable", "not playable"])]
    if plan["reasons"]:
        shown = plan["reasons"][:MAX_REASONS]
        parts.append(tabulate([[r["missing"], r["tasks"]] for r in shown], headers=["what the others lack", "tasks"]))
        if len(plan["reasons"]) > len(shown):
            parts[-1] += f"\n... and {len(plan['reasons']) - len(shown)} more (--format json lists every refused task)"
    return "\n\n".join(parts)
