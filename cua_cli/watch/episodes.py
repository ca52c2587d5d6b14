"""The episodes of a run a person can watch now, and what each has done so far.

An episode can be watched while the run holds its desktop: a held line in leases.jsonl with an `api`
(a desktop, not a text env) and no release after it. What it has done comes from its claim (the
task's instruction) and the last complete line of its traj.jsonl. The run folder is read as any
reader of it does (runfolder/confined.py): inside it, never through a link, every read bounded.
"""

import hashlib
import json
import os
import re
from dataclasses import dataclass

from ..runfolder.confined import Refused, confine, confined_dir, open_regular, read_in
from ..runfolder.leases import LEASES, held

MAX_LEASES_BYTES = 64 << 20     # a run of a million leases is ~200 MB: watch reads the newest 64 MiB
MAX_CLAIM_BYTES = 1 << 20
MAX_CLAIMS = 4096
TAIL_BYTES = 1 << 20            # of a traj.jsonl: its last step is in there
TEXT_MAX = 4000                 # characters of a thought or an answer shown
ATTEMPT = re.compile(r"^trajectories/[^/]+/(\d{1,9})_(\d{1,9})$")


@dataclass(frozen=True)
class Watched:
    key: str            # stable and short, for URLs: the lease key's hash
    task_id: str
    traj: str | None    # the attempt's folder, relative to the run folder
    server: str         # the allocation server that gave the desktop
    desktop_id: str
    since: float | None

    @property
    def sample_attempt(self) -> tuple[int, int] | None:
        m = ATTEMPT.match(self.traj or "")
        return (int(m.group(1)), int(m.group(2))) if m else None


def _lines(raw: bytes) -> list[dict]:
    out = []
    for line in raw.splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a line being written, or damaged
        if type(rec) is dict:
            out.append(rec)
    return out


def running(root: str) -> list[Watched]:
    """The run's desktops held now, oldest first. Raises Refused for a leases.jsonl cua will not read."""
    try:
        with open_regular(confine(root, LEASES)) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - MAX_LEASES_BYTES))
            raw = f.read(MAX_LEASES_BYTES)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise Refused(f"cannot be read: {e.strerror}") from None
    out = []
    for rec in held(_lines(raw)):
        if type(rec.get("api")) is not str or type(rec.get("task_id")) is not str:
            continue  # not a desktop: nothing to watch
        traj = rec.get("traj") if type(rec.get("traj")) is str else None
        at = rec.get("at") if type(rec.get("at")) in (int, float) else None
        out.append(Watched(hashlib.sha256(rec["lease"].encode()).hexdigest()[:12], rec["task_id"], traj,
                           rec["server"], rec["id"], at))
    return out


def find(episodes: list[Watched], wanted: str) -> list[Watched]:
    """The episodes `wanted` names: an episode key, a task id, TASK/SAMPLE or TASK/SAMPLE/ATTEMPT."""
    exact = [e for e in episodes if wanted in (e.key, e.task_id, e.traj)]
    task, _, last = wanted.rpartition("/")
    if exact or not (task and last.isdigit()):
        return exact
    by_sample = [e for e in episodes if e.task_id == task and (e.sample_attempt or (None,))[0] == int(last)]
    task, _, sample = task.rpartition("/")
    if by_sample or not (task and sample.isdigit()):
        return by_sample
    return [e for e in episodes if e.task_id == task and e.sample_attempt == (int(sample), int(last))]


def _clip(v) -> str | None:
    return v[:TEXT_MAX] if type(v) is str else None


def instruction(root: str, episode: Watched) -> str | None:
    """The task's instruction, from the episode's claim in the queue (None when it cannot be read)."""
    sa = episode.sample_attempt
    try:
        folder = confined_dir(root, "queue/claimed")
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))[:MAX_CLAIMS]
    except (Refused, OSError):
        return None
    for name in names:
        try:
            raw = read_in(folder, name, MAX_CLAIM_BYTES)
        except (Refused, OSError):
            continue
        try:
            item = json.loads(raw) if len(raw) <= MAX_CLAIM_BYTES else None
        except (ValueError, RecursionError):
            continue
        if type(item) is not dict or item.get("task_id") != episode.task_id:
            continue
        if sa is None or (item.get("sample"), item.get("attempt", 0)) == sa:
            return _clip(item.get("instruction"))
    return None


def progress(root: str, episode: Watched) -> dict:
    """{"steps", "thought", "response", "action", "error"} of the episode's last step so far."""
    out = {"steps": 0, "thought": None, "response": None, "action": None, "error": None}
    if episode.traj is None:
        return out
    try:
        with open_regular(confine(root, episode.traj + "/traj.jsonl")) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read(TAIL_BYTES)
            f.seek(0)
            steps = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except (Refused, OSError):
        return out
    complete = tail[:tail.rfind(b"\n") + 1]
    lines = _lines(complete)
    out["steps"] = steps
    if lines:
        last = lines[-1]
        out.update(thought=_clip(last.get("thought")), response=_clip(last.get("response")),
                   action=_clip(json.dumps(last.get("action"))[:TEXT_MAX]) if last.get("action") is not None else None,
                   error=_clip(last.get("error")))
    return out
