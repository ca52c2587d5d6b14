"""The directory queue with real processes: races, leases, retries."""

import json
import multiprocessing as mp
import os
import signal
import time

from cua_cli.dirqueue import DirQueue
from cua_cli.jsonl import read_lines


def make_queue(tmp_path, **kw):
    return DirQueue(tmp_path / "queue", tmp_path / "scheduled.jsonl", tmp_path / "episodes.jsonl", **kw)


def record(item, outcome="success"):
    return {"task_id": item["task_id"], "sample": item["sample"], "attempt": item["attempt"],
            "outcome": outcome, "pid": os.getpid()}


def _drain(root, go):
    import pathlib
    q = make_queue(pathlib.Path(root))
    go.wait()  # all claimers start together, so they really race
    while True:
        item = q.claim()
        if item is None:
            return
        time.sleep(0.01)  # a little work between claim and finish
        q.finish(item, record(item))


def test_claim_race_each_item_processed_once(tmp_path):
    q = make_queue(tmp_path)
    tasks = [{"task_id": f"t{i}", "domain": "d"} for i in range(100)]
    assert q.enqueue(tasks, samples=2) == 200
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    procs = [ctx.Process(target=_drain, args=(str(tmp_path), go)) for _ in range(6)]
    for p in procs:
        p.start()
    time.sleep(1.0)
    go.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = read_lines(tmp_path / "episodes.jsonl")
    pairs = [(r["task_id"], r["sample"]) for r in lines]
    assert len(pairs) == 200 and len(set(pairs)) == 200
    assert len({r["pid"] for r in lines}) > 1, "work should be spread over processes"
    assert q.counts() == {"pending": 0, "claimed": 0, "done": 200, "failed": 0}


def test_enqueue_is_idempotent_and_schedules_once(tmp_path):
    q = make_queue(tmp_path)
    tasks = [{"task_id": "a", "domain": None}, {"task_id": "../b", "domain": None}]
    assert q.enqueue(tasks, samples=3) == 6
    item = q.claim()
    q.finish(item, record(item))
    assert make_queue(tmp_path).enqueue(tasks, samples=3) == 0
    sched = read_lines(tmp_path / "scheduled.jsonl")
    assert sorted((r["task_id"], r["sample"]) for r in sched) == sorted(
        (t, s) for t in ("a", "../b") for s in range(3))
    # the unsafe id never becomes a path part
    assert all("/" not in name for state in ("pending", "done") for name in os.listdir(tmp_path / "queue" / state))


def test_errors_retry_then_fail(tmp_path):
    q = make_queue(tmp_path, max_attempts=2)
    q.enqueue([{"task_id": "x", "domain": None}], samples=1)
    item = q.claim()
    assert q.finish(item, record(item, "error"), retry=True) == "pending"
    item = q.claim()
    assert item["attempt"] == 1
    # an interrupted attempt goes back without using up an attempt
    assert q.finish(item, record(item, "error"), retry=True, count_error=False) == "pending"
    item = q.claim()
    assert item["attempt"] == 2 and item["errors"] == 1
    assert q.finish(item, record(item, "error"), retry=True) == "failed"
    assert q.claim() is None
    assert [r["attempt"] for r in read_lines(tmp_path / "episodes.jsonl")] == [0, 1, 2]


def _claim_and_hang(root, ready):
    import pathlib
    q = make_queue(pathlib.Path(root))
    item = q.claim()
    ready.put(item["task_id"])
    time.sleep(600)


def _hanging_claimer(tmp_path):
    """A real process that holds the only claim of the queue."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    p = ctx.Process(target=_claim_and_hang, args=(str(tmp_path), ready))
    p.start()
    assert ready.get(timeout=60) == "x"
    return p


def test_stale_lease_is_reclaimed_after_ttl(tmp_path):
    q = make_queue(tmp_path, lease_ttl=1.5)
    q.enqueue([{"task_id": "x", "domain": None}], samples=1)
    p = _hanging_claimer(tmp_path)
    try:
        os.kill(p.pid, signal.SIGSTOP)  # alive but hung: its heartbeat stops
        assert q.reclaim() == 0, "a fresh lease of a live process must be kept"
        time.sleep(2.0)
        assert q.reclaim() == 1
        item = q.claim()
        assert item["task_id"] == "x" and item["attempt"] == 1
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.join()


def test_dead_local_owner_is_reclaimed_at_once(tmp_path):
    q = make_queue(tmp_path, lease_ttl=600)
    q.enqueue([{"task_id": "x", "domain": None}], samples=1)
    p = _hanging_claimer(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    assert q.reclaim() == 1
    assert q.counts()["pending"] == 1


def test_dropped_file_is_scheduled_and_bad_file_rejected(tmp_path):
    q = make_queue(tmp_path)
    pending = tmp_path / "queue" / "pending"
    (pending / "mine.json").write_text(json.dumps({"task_id": "dropped", "domain": "d", "sample": 0}))
    (pending / "broken.json").write_text("{not json")
    item = q.claim()
    assert item["task_id"] == "dropped"
    assert read_lines(tmp_path / "scheduled.jsonl") == [{"task_id": "dropped", "domain": "d", "sample": 0}]
    assert q.counts()["failed"] == 1
    assert "broken.json" in (tmp_path / "queue" / "rejected.jsonl").read_text()
