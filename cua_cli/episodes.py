"""The episode line of `episodes.jsonl` (see README): its shape for an attempt
that has not (yet) produced a score."""


def error_line(item: dict, stop_reason: str, error: str | None = None, traj: str | None = None) -> dict:
    """An attempt of the queue item `item` that ended without a score."""
    domain = item.get("domain") if isinstance(item.get("domain"), str) else None  # a bad task's may be anything
    return {"task_id": item["task_id"], "domain": domain, "sample": item["sample"],
            "attempt": item["attempt"], "outcome": "error", "reward": None, "score": None, "steps": 0,
            "stop_reason": stop_reason, "duration_s": 0.0, "error": error, "traj": traj}
