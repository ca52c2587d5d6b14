"""The episodes a run is playing now: its queue's claimed/ files, and the steps each has written so far.

A run folder is input a user may not trust: files are opened only inside it,
never through a link (confined.py), and every read is bounded, so a huge,
special or linked file costs one refusal, never a hang. What is unchanged
since the last refresh is not read again: a claim file by its inode (a claim
is written once; its heartbeat only touches its mtime), a traj.jsonl from
where the last read stopped.
"""

import json
import os
from dataclasses import dataclass

from ..runfolder.confined import Refused, confine, confined_dir, open_regular
from ..runfolder.records import is_index
from ..runfolder.writer import traj_rel

MAX_CLAIM_BYTES = 1 << 20        # a claim holds one task: more is not one
MAX_NEW_CLAIMS = 4096            # claim files read per refresh; the rest on the next ones
MAX_STEP_BYTES = 8 << 20         # of a traj.jsonl per refresh: its newlines counted on later ones
_MAX_TIME = 1e11                 # Unix seconds: beyond is not a time


@dataclass(frozen=True)
class Claim:
    task_id: str
    sample: int
    attempt: int
    claimed_at: float | None     # Unix s, from the claimer's lease
    heartbeat: float             # the claim file's mtime: its lease renews it


def _claim(raw: bytes, heartbeat: float) -> Claim | None:
    try:
        item = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if type(item) is not dict or type(item.get("task_id")) is not str:
        return None
    sample, attempt = item.get("sample", 0), item.get("attempt", 0)
    if not (is_index(sample) and is_index(attempt)):
        return None
    lease = item.get("lease")
    at = lease.get("claimed_at") if type(lease) is dict else None
    at = at if type(at) in (int, float) and 0 < at < _MAX_TIME else None
    return Claim(item["task_id"], sample, attempt, at, heartbeat)


class Claims:
    """The run's claimed pairs, refreshed incrementally."""

    def __init__(self, root: str):
        self.root = root
        self._known: dict[str, tuple[int, Claim | None]] = {}  # file name -> (inode, its claim or None)
        self._steps: dict[str, tuple[int, int, int]] = {}       # traj.jsonl -> (inode, offset, newlines)
        self.problem: str | None = None                         # why claimed/ was not read

    def refresh(self) -> list[Claim]:
        """The claims that can be read (queue counts say how many files there are)."""
        self.problem = None
        try:
            folder = confined_dir(self.root, "queue/claimed")
            entries = [e for e in os.scandir(folder) if e.name.endswith(".json") and not e.name.startswith(".")]
        except Refused as e:
            self.problem = f"queue/claimed {e}; not read"
            return []
        except OSError:  # no queue yet, or gone: nothing claimed
            return []
        known, budget = {}, MAX_NEW_CLAIMS
        for e in entries:
            old = self._known.get(e.name)
            try:
                inode = e.inode()
                if old is not None and old[0] == inode:
                    claim = old[1]
                    if claim is not None:  # only the heartbeat moves
                        claim = Claim(claim.task_id, claim.sample, claim.attempt, claim.claimed_at,
                                      e.stat(follow_symlinks=False).st_mtime)
                elif budget:
                    budget -= 1
                    claim = self._read(e.path)
                else:
                    continue
            except OSError:  # finished meanwhile
                continue
            known[e.name] = (inode, claim)
        self._known = known
        claims = [c for _, c in known.values() if c is not None]
        running = {traj_rel(c.task_id, c.sample, c.attempt) for c in claims}
        self._steps = {k: v for k, v in self._steps.items() if k in running}
        return claims

    @staticmethod
    def _read(path: str) -> Claim | None:
        try:
            with open_regular(path) as f:  # a link, a FIFO, a folder: refused, never waited on
                raw = f.read(MAX_CLAIM_BYTES + 1)
                heartbeat = os.fstat(f.fileno()).st_mtime
        except (Refused, OSError):
            return None
        return None if len(raw) > MAX_CLAIM_BYTES else _claim(raw, heartbeat)

    def steps(self, claim: Claim) -> int | None:
        """The steps the claim's attempt has written so far (its traj.jsonl's complete lines); None
        when its trajectory cannot be read."""
        rel = traj_rel(claim.task_id, claim.sample, claim.attempt)
        try:
            f = open_regular(confine(self.root, rel + "/traj.jsonl"))
        except FileNotFoundError:
            return 0  # no step yet
        except (Refused, OSError):
            return None
        with f:
            st = os.fstat(f.fileno())
            inode, offset, count = self._steps.get(rel, (st.st_ino, 0, 0))
            if inode != st.st_ino or st.st_size < offset:  # replaced: count again
                offset, count = 0, 0
            f.seek(offset)
            data = f.read(MAX_STEP_BYTES)
        self._steps[rel] = (st.st_ino, offset + len(data), count + data.count(b"\n"))
        return count + data.count(b"\n")
