"""The envs a run holds (`leases.jsonl`): each env cua allocates is written here as held
before it is used, and as released after, so one left by a crash, `kill -9` or a lost
runner can be found and released (`cua envs list RUN`, `cua envs gc RUN`, the rollout itself).

    {"lease": KEY, "state": "held", "server": URL, "id": ID, "protocol": P, "task_id", "traj", "at"}
    {"lease": KEY, "state": "released", "at"}

P says how to give it back: "dart" (DART's allocation servers, OSWorld desktops; also when
absent) or "env-cluster" (the env-cluster protocol's /server/release). `traj` is the folder of
the attempt that took it.

KEY is the server and the env's id: unique across the run, and the same when gc releases it.
"""

import json
import os
import time
from pathlib import Path

from .jsonl import append_line, read_lines
from .reader import require_regular

LEASES = "leases.jsonl"


def lease_key(server: str, env_id: str) -> str:
    return json.dumps([server, env_id])


def held_record(server: str, env_id: str, **about) -> dict:
    return {"lease": lease_key(server, env_id), "state": "held", "server": server, "id": env_id, **about,
            "at": round(time.time(), 3)}


def released_record(server: str, env_id: str) -> dict:
    return {"lease": lease_key(server, env_id), "state": "released", "at": round(time.time(), 3)}


def record(run_path, rec: dict) -> None:
    append_line(Path(run_path) / LEASES, rec)


ENV_CLUSTER = "env-cluster"


def still_held(run_path, strict: bool = False) -> list[dict]:
    """The held records with no release after them, in the order they were taken.

    `strict`: for what acts on the answer once (`cua envs`, a resume): a leases.jsonl that is there
    but cannot be read (a link, a FIFO, a folder) raises UnreadableRun, naming it, rather than
    reading as no env held."""
    path = Path(run_path) / LEASES
    if strict:
        require_regular(path)
    return held(read_lines(path)) if os.path.lexists(path) else []


def held(records) -> list[dict]:
    """Of leases.jsonl's records, the held ones with no release after them, in the order they were taken."""
    out: dict[str, dict] = {}
    for rec in records:
        key, state = rec.get("lease"), rec.get("state")
        if not isinstance(key, str):
            continue
        if state == "held" and isinstance(rec.get("server"), str) and isinstance(rec.get("id"), str):
            out[key] = rec
        elif state == "released":
            out.pop(key, None)
    return list(out.values())
