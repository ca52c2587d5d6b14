"""A directory queue of (task, sample) pairs, safe across processes and hosts.

    pending/  claimed/  done/  failed/   one JSON file per pair, named by pair_key

A pair lives in exactly one folder. Every state change happens under one
file lock and is an atomic rename, so N claimers on a shared file system
never take the same pair. A claim carries a lease (owner host, pid, token);
its heartbeat is the claim file's mtime. A claim whose heartbeat is older than
the lease TTL, or whose owner process on this host is gone, goes back to
pending.

The queue's folders are made and checked when a DirQueue opens them (confined.make_dirs):
a linked `queue/` or `queue/pending/` is refused (UnwritableRun), never written into. Files
are replaced whole (write_atomic) or appended to without following a link.
"""

import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import psutil

from .._util.atomic import write_atomic
from .._util.text import clip
from .confined import Refused, check_writable_dir, check_writable_file, make_dirs, open_regular
from .jsonl import append_line, read_from
from .lock import QueueLock
from .names import pair_key
from .records import error_line, is_index, scheduled_record

STATES = ("pending", "claimed", "done", "failed")
LOCK, REJECTED = ".lock", "rejected.jsonl"
HOST = socket.gethostname()
MAX_ITEM_BYTES = 16 << 20  # a queue file holds one task; anything bigger is not one


def _write_json(path: Path, obj) -> None:
    # ASCII escapes: a task id with a lone surrogate still makes a valid file.
    write_atomic(path, json.dumps(obj).encode())


def read_item(path) -> dict:
    """A queue file's item with its pair and bookkeeping checked; raises ValueError naming the problem.

    Files come from other processes and other hands (`--watch`), so nothing
    in them is trusted: a file that names no pair is rejected, never allowed
    to crash a claimer. The task's own fields are checked by the runner,
    which ends a bad task as `bad_task` under its pair.
    """
    try:
        f = open_regular(str(path))  # a FIFO dropped in would hold the claimer, and the queue lock, for ever
    except Refused as e:
        raise ValueError(f"the queue file {e}") from None
    with f:
        raw = f.read(MAX_ITEM_BYTES + 1)
    if len(raw) > MAX_ITEM_BYTES:
        raise ValueError(f"larger than {MAX_ITEM_BYTES} bytes")
    try:
        item = json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as e:  # also bytes that are not UTF-8
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(item, dict):
        raise ValueError(f"expected a JSON object, got {type(item).__name__}")
    if not isinstance(item.get("task_id"), str):
        raise ValueError("'task_id' must be a string")
    item.setdefault("sample", 0)
    item.setdefault("attempt", 0)
    item.setdefault("errors", 0)
    for key in ("sample", "attempt", "errors"):
        if not is_index(item[key]):
            raise ValueError(f"{key!r} must be an integer >= 0, got {clip(str(item[key]), 80)}")
    if item.get("lease") is not None and not isinstance(item["lease"], dict):
        raise ValueError("'lease' must be an object")
    return item


def _is_item(name: str) -> bool:
    """A queue file, not a temporary one (`.name.json.<hex>.tmp`) or anything else in the folder."""
    return name.endswith(".json") and not name.startswith(".")


def _pid_gone(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class DirQueue:
    def __init__(self, root, scheduled_path, episodes_path, max_attempts: int = 3, lease_ttl: float = 60.0):
        self.root = Path(root)
        self.scheduled_path = Path(scheduled_path)
        self.episodes_path = Path(episodes_path)
        self.max_attempts = max_attempts
        self.lease_ttl = lease_ttl
        for state in STATES:  # the run folder (the queue's parent) is trusted; each folder below it is checked
            make_dirs(self.root.parent, f"{self.root.name}/{state}")
        self._lock = QueueLock(self.root / LOCK)
        self._pending: list[str] = []  # names in pending/ at the last look, in the order claims take them
        self._scheduled: set[tuple[str, int]] = set()
        self._scheduled_offset = 0
        self._held: dict[str, str] = {}  # key -> lease token of claims held by this process
        self._held_lock = threading.Lock()

    def _path(self, state: str, key: str) -> Path:
        return self.root / state / f"{key}.json"

    def _state_of(self, key: str):
        for state in STATES:
            if self._path(state, key).exists():
                return state
        return None

    def _refresh_scheduled(self) -> None:
        rows, self._scheduled_offset = read_from(self.scheduled_path, self._scheduled_offset, warn=False)
        for row in rows:
            rec, _ = scheduled_record(row)
            if rec is not None:
                self._scheduled.add((rec["task_id"], rec["sample"]))

    def _reject(self, path: str, key: str, state: str, error: str) -> None:
        """Move an unusable file to failed/ and say why in rejected.jsonl (call under the lock)."""
        target = self._path("failed", key)
        if target.exists():  # never overwrite a pair's record of its own
            target = target.with_name(f"{key}.rejected-{uuid.uuid4().hex[:8]}.json")
        os.replace(path, target)
        append_line(self.root / REJECTED, {"file": f"{state}/{key}.json", "moved_to": f"failed/{target.name}",
                                           "error": error, "time": round(time.time(), 3)})

    def _schedule(self, item: dict) -> None:
        """Append the pair to scheduled.jsonl once (call under the lock)."""
        self._refresh_scheduled()
        pair = (item["task_id"], item["sample"])
        if pair not in self._scheduled:
            append_line(self.scheduled_path, {"task_id": item["task_id"], "domain": item.get("domain"),
                                              "sample": item["sample"]})
            self._scheduled.add(pair)

    def enqueue(self, tasks: list[dict], samples: int, first: int = 0) -> int:
        """Queue every (task, sample) for samples first..first+samples-1 not queued before; how many were new."""
        added = 0
        with self._lock:
            for task in tasks:
                for sample in range(first, first + samples):
                    key = pair_key(task["task_id"], sample)
                    if self._state_of(key) is not None:
                        continue
                    item = dict(task, sample=sample, attempt=0, errors=0)
                    # Scheduled first: a crash in between must not shrink the denominator.
                    self._schedule(item)
                    _write_json(self._path("pending", key), item)
                    added += 1
        return added

    def claim(self):
        """Take one pending pair, or None. The caller must finish() or release() it."""
        got = self.claim_some(1)
        return got[0] if got else None

    def claim_some(self, n: int) -> list[dict]:
        """Take up to `n` pending pairs under one hold of the lock (fewer: no more were pending).
        The caller must finish() or release() each."""
        got = []
        with self._lock:
            try:
                while len(got) < n and (item := self._claim_one()) is not None:
                    got.append(item)
            except Exception:
                if not got:
                    raise
                # The pairs already claimed are handed over; the next claim meets the failure again.
            return got

    def _claim_one(self) -> dict | None:
        """One pending pair claimed, or None (under the lock)."""
        while True:
            if not self._pending:
                # Listed once per pass, not per claim: with thousands of pairs pending,
                # a scan and sort under the lock for every claim would throttle every runner.
                self._pending = sorted((e.name for e in os.scandir(self.root / "pending") if _is_item(e.name)),
                                       reverse=True)
                if not self._pending:
                    return None
            file = self._pending.pop()
            name, path = file[:-5], os.path.join(self.root, "pending", file)
            try:
                item = read_item(path)
            except FileNotFoundError:
                continue  # taken by another claimer, or rejected
            except (OSError, ValueError) as e:
                # A file we cannot use must neither block the queue nor vanish.
                self._reject(path, name, "pending", str(e))
                continue
            # A dropped file may have any name: the pair's own key decides where it lives.
            key = pair_key(item["task_id"], item["sample"])
            if key != name and self._state_of(key) is not None:
                self._reject(path, name, "pending",
                             f"pair ({clip(item['task_id'], 200)!r}, {item['sample']}) is already queued")
                continue
            self._schedule(item)  # files dropped in by other processes count too
            token = uuid.uuid4().hex
            item["lease"] = {"host": HOST, "pid": os.getpid(), "token": token, "claimed_at": time.time()}
            os.replace(path, self._path("claimed", key))
            _write_json(self._path("claimed", key), item)
            with self._held_lock:
                self._held[key] = token
            item["key"] = key
            return item

    def _still_ours(self, key: str, token: str) -> bool:
        try:
            with open_regular(str(self._path("claimed", key))) as f:
                lease = json.loads(f.read(MAX_ITEM_BYTES)).get("lease", {})
        except (OSError, ValueError, RecursionError, Refused, AttributeError):
            return False
        return isinstance(lease, dict) and lease.get("token") == token

    def finish(self, item: dict, record: dict, retry: bool = False, count_error: bool = True,
               give_up: bool = False) -> str:
        """Record an attempt's episode line and move its pair on.

        retry=False: the pair is done. retry=True: back to pending with
        attempt+1 (to failed/ once `max_attempts` errors were counted).
        give_up=True: straight to failed/ (the task itself is bad). The
        episode line is written even if the lease was lost meanwhile: a
        finished attempt is never thrown away. Returns the new state.
        """
        nxt = dict(item)
        if give_up:
            state = "failed"
        elif not retry:
            state = "done"
        else:
            nxt["attempt"] += 1
            nxt["errors"] += int(count_error)
            state = "failed" if nxt["errors"] >= self.max_attempts else "pending"
        with self._lock:
            append_line(self.episodes_path, record)
            return state if self._move_claimed(nxt, state) else "lost"

    def release(self, item: dict) -> None:
        """Put a claimed pair back in pending as it was, with no episode line: its attempt never began
        (the run was told to stop as it was claimed). A pair reclaimed meanwhile is someone else's now."""
        with self._lock:
            self._move_claimed(item, "pending")

    def _move_claimed(self, item: dict, state: str) -> bool:
        """Give up our hold on `item` and, if its claim is still ours, write it to `state` (without its
        lease and key) in place of the claim. Called under `_lock`; False when the claim was lost."""
        key = item["key"]
        with self._held_lock:
            token = self._held.pop(key, None)
        if token is None or not self._still_ours(key, token):
            return False
        _write_json(self._path(state, key), {k: v for k, v in item.items() if k not in ("lease", "key")})
        os.remove(self._path("claimed", key))
        return True

    def heartbeat(self) -> None:
        """Renew the leases this process holds (their mtime is the heartbeat)."""
        with self._held_lock:
            keys = list(self._held)
        for key in keys:
            try:
                os.utime(self._path("claimed", key), follow_symlinks=False)  # a link planted there is not followed
            except FileNotFoundError:
                pass

    def reclaim(self, dead_pids=(), count_error: bool = True) -> int:
        """Return expired claims to pending; returns how many.

        A claim is expired when its heartbeat is older than the lease TTL, or
        when its owner is on this host and that process is gone (or listed in
        `dead_pids`). The lost attempt counts as an infrastructure error
        unless `count_error` is False (we killed the runner ourselves).
        """
        now = time.time()
        n = 0
        gone: dict[int, bool] = {}  # pid -> exited: a few runners hold all the claims
        with self._held_lock:
            ours = set(self._held) if os.getpid() not in dead_pids else set()
        with self._lock:
            for entry in list(os.scandir(self.root / "claimed")):
                if not _is_item(entry.name):
                    continue
                try:
                    age = now - entry.stat().st_mtime
                    if entry.name[:-5] in ours and age <= self.lease_ttl:
                        continue  # held by this live process: no need to read it
                    item = read_item(entry.path)
                except FileNotFoundError:
                    continue  # finished meanwhile
                except (OSError, ValueError) as e:
                    # Nobody can finish a claim we cannot read: it would stay claimed forever.
                    self._reject(entry.path, entry.name[:-5], "claimed", str(e))
                    continue
                lease = item.pop("lease", None) or {}
                local = lease.get("host") == HOST
                pid = lease.get("pid")
                pid = pid if type(pid) is int and pid > 0 else 0  # 0: no process of ours can hold it
                if local and pid not in gone:
                    gone[pid] = pid in dead_pids or _pid_gone(pid)
                if not (age > self.lease_ttl or (local and gone[pid])):
                    continue
                item["attempt"] += 1
                item["errors"] += int(count_error)
                state = "failed" if item["errors"] >= self.max_attempts else "pending"
                if state == "failed":
                    # The pair ends here: leave an honest line rather than nothing.
                    lost = dict(item, attempt=item["attempt"] - 1)
                    append_line(self.episodes_path, error_line(
                        lost, "runner_lost", f"runner {lease.get('host')}:{pid} stopped renewing its claim"))
                _write_json(self._path(state, entry.name[:-5]), item)
                os.remove(entry.path)
                n += 1
        return n

    def idle(self) -> bool:
        """Nothing pending and nothing claimed: no pair can come back."""
        return self._count("pending") == 0 and self._count("claimed") == 0

    def counts(self) -> dict:
        return {s: self._count(s) for s in STATES}

    def _count(self, state: str) -> int:
        return sum(1 for e in os.scandir(self.root / state) if _is_item(e.name))


def check_writable_queue(root) -> None:
    """UnwritableRun, naming it, for a folder or file of the queue at `root` that its writers would refuse."""
    root = Path(root)
    check_writable_dir(root)
    for state in STATES:
        check_writable_dir(root / state)
    for name in (LOCK, REJECTED):
        check_writable_file(root / name)
