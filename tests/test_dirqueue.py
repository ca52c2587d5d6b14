"""The directory queue with real processes: races, leases, retries."""

import json
import multiprocessing as mp
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.queue import DirQueue


def make_queue(tmp_path, **kw):
    return DirQueue(tmp_path / "queue", tmp_path / "scheduled.jsonl", tmp_path / "episodes.jsonl", **kw)


def record(item, outcome="success"):
    return {"task_id": item["task_id"], "sample": item["sample"], "attempt": item["attempt"],
            "outcome": outcome, "pid": os.getpid()}


def _drain(root, start, batch):
    import pathlib
    q = make_queue(pathlib.Path(root))
    start.wait(120)  # all claimers start together, however slowly each was spawned, so they really race
    while True:
        items = q.claim_some(batch) if batch > 1 else [i for i in [q.claim()] if i is not None]
        if not items:
            return
        time.sleep(0.01)  # a little work between claim and finish
        for item in items:
            q.finish(item, record(item))


def test_claim_race_each_item_processed_once(tmp_path):
    q = make_queue(tmp_path)
    tasks = [{"task_id": f"t{i}", "domain": "d"} for i in range(100)]
    assert q.enqueue(tasks, samples=2) == 200
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(6)
    # Half claim one pair at a time, half up to seven at once, as runners with many free slots do.
    procs = [ctx.Process(target=_drain, args=(str(tmp_path), start, 1 if i % 2 else 7)) for i in range(6)]
    for p in procs:
        p.start()
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


@pytest.mark.slow  # waits out a 10 s lease: a loaded machine needs that long from the claim to the check
def test_stale_lease_is_reclaimed_after_ttl(tmp_path):
    q = make_queue(tmp_path, lease_ttl=10.0)  # longer than a loaded machine takes from the claim to the check
    q.enqueue([{"task_id": "x", "domain": None}], samples=1)
    p = _hanging_claimer(tmp_path)
    try:
        os.kill(p.pid, signal.SIGSTOP)  # alive but hung: its heartbeat stops
        assert q.reclaim() == 0, "a fresh lease of a live process must be kept"
        time.sleep(10.5)  # the lease's own time: nothing else would tell
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


def test_claim_some_takes_up_to_n_pairs_each_with_its_own_lease(tmp_path):
    q = make_queue(tmp_path)
    q.enqueue([{"task_id": f"t{i}", "domain": "d"} for i in range(5)], samples=1)
    first = q.claim_some(3)
    assert len(first) == 3 and len({i["lease"]["token"] for i in first}) == 3
    rest = q.claim_some(3)
    assert len(rest) == 2, "fewer than asked: no more were pending"
    assert q.claim_some(3) == []
    assert sorted(i["task_id"] for i in first + rest) == [f"t{i}" for i in range(5)]
    assert q.counts()["claimed"] == 5
    for item in first + rest:
        q.finish(item, record(item))
    assert q.counts() == {"pending": 0, "claimed": 0, "done": 5, "failed": 0}


def test_a_released_claim_is_pending_again_as_it_was_with_no_episode_line(tmp_path):
    q = make_queue(tmp_path, lease_ttl=600)
    q.enqueue([{"task_id": "x", "domain": None}], samples=1)
    q.release(q.claim())
    assert q.counts()["pending"] == 1 and q.counts()["claimed"] == 0
    again = q.claim()
    assert (again["attempt"], again["errors"]) == (0, 0), "released unplayed: no attempt counted"
    assert read_lines(tmp_path / "episodes.jsonl") == []
    # A claim reclaimed from under its holder is someone else's: releasing it then changes nothing.
    other = make_queue(tmp_path, lease_ttl=600)
    assert other.reclaim(dead_pids=(os.getpid(),)) == 1
    taken = other.claim()
    q.release(again)
    assert q.counts()["claimed"] == 1 and taken["attempt"] == 1
    other.finish(taken, record(taken))
    assert q.counts()["done"] == 1


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


# Hostile queue files: whatever lands in pending/ or claimed/, claimers never crash,
# the bad file moves to failed/ with a reason in rejected.jsonl, and every good pair runs.
_BAD_SAMPLE = st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3), st.booleans(),
                        st.integers(max_value=-1), st.floats(allow_nan=True), st.none(), st.dictionaries(st.text(), st.integers()))
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                     max_leaves=8)
_BAD_FILE = st.one_of(
    st.binary(max_size=40).filter(lambda b: not b.strip().startswith(b"{")),
    _JSON.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    st.builds(lambda t: json.dumps({"task_id": t}).encode(), st.one_of(st.integers(), st.none(), st.lists(st.text()))),
    st.builds(lambda k, v: json.dumps({"task_id": "t", k: v}).encode(),
              st.sampled_from(["sample", "attempt", "errors"]), _BAD_SAMPLE),
    st.builds(lambda lease: json.dumps({"task_id": "t", "lease": lease}).encode(), st.one_of(st.integers(), st.text())),
    st.just(b"[" * 100_000),
    st.just(b'{"task_id": "\xff\xfe"}'),
)


@given(st.lists(_BAD_FILE, min_size=1, max_size=5), st.sampled_from(["pending", "claimed"]))
def test_malformed_queue_files_are_rejected_and_the_rest_goes_on(bad_files, where):
    with tempfile.TemporaryDirectory() as tmp:
        q = make_queue(Path(tmp), lease_ttl=0.0)
        q.enqueue([{"task_id": "good", "domain": None}], samples=2)
        names = [f"bad-{i}" for i in range(len(bad_files))]
        for name, data in zip(names, bad_files):
            (Path(tmp) / "queue" / where / f"{name}.json").write_bytes(data)
        if where == "claimed":
            q.reclaim()
        claimed = []
        while (item := q.claim()) is not None:
            claimed.append((item["task_id"], item["sample"]))
            q.finish(item, record(item))
        assert sorted(claimed) == [("good", 0), ("good", 1)]
        rejected = read_lines(Path(tmp) / "queue" / "rejected.jsonl")
        assert sorted(r["file"] for r in rejected) == sorted(f"{where}/{n}.json" for n in names)
        assert all(r["error"] for r in rejected)
        counts = q.counts()
        assert counts["pending"] == counts["claimed"] == 0 and counts["failed"] == len(names)


def test_dropped_file_for_a_pair_already_queued_is_rejected_not_run_twice(tmp_path):
    q = make_queue(tmp_path)
    q.enqueue([{"task_id": "t", "domain": None}], samples=1)
    (tmp_path / "queue" / "pending" / "copy.json").write_text(json.dumps({"task_id": "t", "sample": 0}))
    runs = []
    while (item := q.claim()) is not None:
        runs.append(item["task_id"])
        q.finish(item, record(item))
    assert runs == ["t"]
    (rej,) = read_lines(tmp_path / "queue" / "rejected.jsonl")
    assert rej["file"] == "pending/copy.json" and "already queued" in rej["error"]


def test_task_id_with_a_lone_surrogate_goes_through_the_queue(tmp_path):
    q = make_queue(tmp_path)
    q.enqueue([{"task_id": "bad\udcffid", "domain": None}], samples=1)
    item = q.claim()
    assert item["task_id"] == "bad\udcffid"
    assert q.finish(item, record(item)) == "done"


def _count_under_lock(path, go, n):
    import threading

    from cua_cli.runfolder.lock import QueueLock
    lock = QueueLock(path + ".lock")
    go.wait()

    def bump():
        for _ in range(n):
            with lock:  # read, pause, write: any two holders at once would lose an update
                value = int(open(path).read() or 0)
                time.sleep(0.0005)
                with open(path, "w") as f:
                    f.write(str(value + 1))

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_the_queue_lock_admits_one_holder_across_threads_and_processes(tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    procs = [ctx.Process(target=_count_under_lock, args=(str(counter), go, 25)) for _ in range(3)]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert counter.read_text() == str(3 * 8 * 25)


def test_runner_processes_follow_the_slots_and_the_cores(monkeypatch):
    from cua_cli.rollout.backends.local import default_processes
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert [default_processes(n) for n in (1, 64, 256, 257, 1024, 100_000)] == [1, 1, 1, 2, 2, 2]
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert [default_processes(n) for n in (64, 1024, 100_000)] == [1, 4, 16]


@pytest.mark.parametrize("where", ["pending", "claimed"])
def test_a_fifo_a_folder_or_a_link_in_the_queue_is_rejected_never_read(tmp_path, where):
    """A FIFO would hold a claimer (and the queue lock) for ever; a link would read a file outside the run."""
    q = make_queue(tmp_path, lease_ttl=0.0)
    q.enqueue([{"task_id": "good", "domain": None}], samples=1)
    folder = tmp_path / "queue" / where
    os.mkfifo(folder / "fifo.json")
    (folder / "dir.json").mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"task_id": "from-outside", "sample": 0}))
    (folder / "link.json").symlink_to(outside)
    if where == "claimed":
        q.reclaim()
    claimed = []
    while (item := q.claim()) is not None:
        claimed.append(item["task_id"])
        q.finish(item, record(item))
    assert claimed == ["good"]
    rejected = read_lines(tmp_path / "queue" / "rejected.jsonl")
    assert sorted(r["file"] for r in rejected) == [f"{where}/{n}.json" for n in ("dir", "fifo", "link")]
    assert outside.exists(), "a link is moved aside, never followed"
