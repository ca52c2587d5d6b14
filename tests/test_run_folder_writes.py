"""Every writer of a run folder writes inside it, never through a link (faults.md, "Paths").

A run folder is data that other hands can change: a file of it replaced by a link, or a linked
`trajectories/`, `trajectories/<task>/` or `queue/...` folder, must never lead a write out of the run.

- The writers' helpers (confined.py) and each writer (append_line, the queue, TrajWriter, the
  metrics sampler, the env server's log), on their own: fast.
- `cua rollout --resume` on a run with any of its files or folders linked out: exit 2 with one line
  naming it, before anything is played, and nothing outside changed (bytes, times, no new file).
- A link planted while a rollout runs (real CLI, AgentGym stand-in): an attempt folder linked out
  ends that attempt as `runner_error` naming it, and the pair is played again; episodes.jsonl linked
  out stops the rollout (exit 2, naming it) with the pair still claimed, so a --resume plays it.
"""

import asyncio
import ctypes
import json
import mmap
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.agentgym_standins import AgentGymStandIn
from helpers.cli import run_cua
from helpers.hostile import SECRET, make_run

from cua_cli.errors import InputError, UnreadableRun, UnwritableRun
from cua_cli.models import Image
from cua_cli.rollout import check_tasks
from cua_cli.rollout import writes as writes_module
from cua_cli.rollout.envserver_process import EnvServerProcess
from cua_cli.rollout.monitor import Monitor
from cua_cli.rollout.writes import Writes
from cua_cli.runfolder import page_cache, takeover
from cua_cli.runfolder.confined import check_writable_dir, check_writable_file, make_dirs, open_writable
from cua_cli.runfolder.jsonl import append_line, read_lines
from cua_cli.runfolder.names import encode_task_id
from cua_cli.runfolder.queue import DirQueue
from cua_cli.runfolder.writer import RunDir, TrajWriter

TIMEOUT = 120


def snapshot(root: Path) -> dict:
    """Every entry under `root` (links not followed): its kind, times, and a file's bytes."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            st = path.lstat()
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            out[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, st.st_size, data)
    return out


@pytest.fixture
def outside(tmp_path):
    """A folder outside the run: a sentinel file, a sentinel folder, and what a writer would make in
    them were it to follow a link (none of it may change)."""
    root = tmp_path / "outside"
    (root / "folder" / "t" / "0_0").mkdir(parents=True)
    (root / "sentinel").write_text(SECRET)
    (root / "folder" / "sentinel").write_text(SECRET)
    (root / "folder" / "t" / "0_0" / "traj.jsonl").write_text(SECRET)
    old = time.time() - 3600  # an hour ago: any write would move the times on
    for path in (root / "sentinel", root / "folder" / "sentinel", root / "folder" / "t" / "0_0" / "traj.jsonl"):
        os.utime(path, (old, old))
    return root


def _refused(fn, path, why: str):
    with pytest.raises(UnwritableRun) as e:
        fn()
    assert str(e.value).startswith(f"{path}: ") and why in str(e.value), str(e.value)
    assert isinstance(e.value, InputError)  # exit 2, one line
    return e.value


# --- the helpers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["link", "dangling link", "link to a FIFO", "FIFO", "folder"])
def test_an_append_never_goes_through_a_link_nor_waits_on_a_fifo(tmp_path, outside, kind):
    run = tmp_path / "run"
    run.mkdir()
    path = run / "episodes.jsonl"
    if kind == "link":
        path.symlink_to(outside / "sentinel")
    elif kind == "dangling link":
        path.symlink_to(outside / "made-through-the-link")  # O_CREAT through it would make this file
    elif kind == "link to a FIFO":
        os.mkfifo(outside / "fifo")
        path.symlink_to(outside / "fifo")
    elif kind == "FIFO":
        os.mkfifo(path)
    else:
        path.mkdir()
    before = snapshot(outside)
    why = {"FIFO": "is a FIFO, not a regular file", "folder": "is a folder, not a regular file"}
    err = _refused(lambda: append_line(path, {"task_id": "t"}), path, why.get(kind, "the file is a link"))
    assert str(err).endswith("; not written")
    assert snapshot(outside) == before
    assert not (outside / "made-through-the-link").exists()


def test_an_append_makes_the_file_and_starts_a_new_line_after_a_torn_one(tmp_path):
    path = tmp_path / "episodes.jsonl"
    append_line(path, {"a": 1})
    with open(path, "ab") as f:
        f.write(b'{"torn"')
    append_line(path, {"b": 2})
    assert path.read_bytes() == b'{"a":1}\n{"torn"\n{"b":2}\n'


def test_open_writable_opens_regular_files_only(tmp_path):
    fd = open_writable(tmp_path / "new", os.O_WRONLY | os.O_CREAT)
    os.close(fd)
    assert (tmp_path / "new").is_file()
    os.mkfifo(tmp_path / "fifo")
    reader = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)  # with a reader the open succeeds...
    try:
        _refused(lambda: open_writable(tmp_path / "fifo", os.O_WRONLY), tmp_path / "fifo",
                 "is a FIFO, not a regular file")  # ... and the kind check refuses it
    finally:
        os.close(reader)
    with pytest.raises(FileNotFoundError):  # other errors are the OS's own
        open_writable(tmp_path / "missing" / "x", os.O_WRONLY | os.O_CREAT)


@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("kind", ["link", "file"])
def test_make_dirs_refuses_a_link_or_a_file_at_any_part(tmp_path, outside, level, kind):
    run = tmp_path / "run"
    parts = ["trajectories", "t", "0_0"]
    (run / "/".join(parts[:level])).mkdir(parents=True, exist_ok=True)
    bad = run.joinpath(*parts[:level + 1])
    if kind == "link":
        bad.symlink_to(outside / "folder" / "/".join(parts[1:level + 1]) if level else outside / "folder")
    else:
        bad.write_text("not a folder")
    before = snapshot(outside)
    why = "is a link" if kind == "link" else "is a regular file, not a folder"
    err = _refused(lambda: make_dirs(run, "trajectories/t/0_0"), bad, why)
    assert str(err).endswith("; nothing is written into it")
    assert snapshot(outside) == before
    _refused(lambda: check_writable_dir(bad), bad, why)


def test_make_dirs_makes_what_is_missing_and_the_run_folder_itself_may_be_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "run").symlink_to(tmp_path / "real")  # the user's choice: followed
    assert make_dirs(tmp_path / "run", "trajectories/t/0_0") == tmp_path / "run" / "trajectories" / "t" / "0_0"
    assert (tmp_path / "real" / "trajectories" / "t" / "0_0").is_dir()
    fd = make_dirs(tmp_path / "run", "trajectories/t/0_0", keep=True)  # there already: opened
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(tmp_path / "real" / "trajectories" / "t" / "0_0"))
    finally:
        os.close(fd)


def test_check_writable_file_judges_what_is_there(tmp_path, outside):
    check_writable_file(tmp_path / "missing")  # a writer makes it
    (tmp_path / "regular").write_text("x")
    check_writable_file(tmp_path / "regular")
    (tmp_path / "link").symlink_to(outside / "sentinel")
    _refused(lambda: check_writable_file(tmp_path / "link"), tmp_path / "link", "the file is a link")
    os.mkfifo(tmp_path / "fifo")
    _refused(lambda: check_writable_file(tmp_path / "fifo"), tmp_path / "fifo", "is a FIFO, not a regular file")


# --- the writers -----------------------------------------------------------------------------------

def _writer(run: Path) -> TrajWriter:
    return RunDir(run).traj({"task_id": "t", "sample": 0, "attempt": 0})


def test_a_trajectory_writer_refuses_a_link_planted_in_its_folder(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    with _writer(run) as traj:
        traj.step({"step": 0})
        assert traj.screenshot(0, b"png0") == "step_0000.png"
        folder = run / "trajectories" / "t" / "0_0"
        (folder / "traj.jsonl").unlink()
        (folder / "traj.jsonl").symlink_to(outside / "sentinel")
        (folder / "step_0001.png").symlink_to(outside / "folder" / "sentinel")
        before = snapshot(outside)
        _refused(lambda: traj.step({"step": 1}), folder / "traj.jsonl", "the file is a link")
        _refused(lambda: traj.screenshot(1, b"png1"), folder / "step_0001.png", "the file is a link")
        # A screenshot's open has no kind check of its own (a file a step): its flags refuse these.
        os.mkfifo(folder / "step_0002.png")
        _refused(lambda: traj.screenshot(2, b"png2"), folder / "step_0002.png", "is a FIFO or a socket")
        (folder / "step_0003.png").mkdir()
        _refused(lambda: traj.screenshot(3, b"png3"), folder / "step_0003.png", "is a folder")
    assert snapshot(outside) == before


def test_a_trajectory_writers_lines_never_follow_its_traj_jsonl_moved_out_of_the_folder(tmp_path, outside):
    """traj.jsonl stays open from an attempt's first step on: moved out of the run (or replaced) after
    a step, the next line goes to a new traj.jsonl in the folder, never to the file where it went."""
    run = tmp_path / "run"
    run.mkdir()
    with _writer(run) as traj:
        traj.step({"step": 0})
        folder = run / "trajectories" / "t" / "0_0"
        os.rename(folder / "traj.jsonl", outside / "moved.jsonl")
        traj.step({"step": 1})
        (folder / "traj.jsonl").unlink()
        (folder / "traj.jsonl").write_text('{"step": "planted"}')  # a regular file put there, no newline
        traj.step({"step": 2})
        traj.step({"step": 3})
    assert (outside / "moved.jsonl").read_text() == '{"step":0}\n'
    assert (folder / "traj.jsonl").read_text() == '{"step": "planted"}\n{"step":2}\n{"step":3}\n'


def test_a_trajectory_writer_stays_in_its_folder_when_a_folder_above_is_swapped_for_a_link(tmp_path, outside):
    """The attempt's folder was checked as it was made; the writes go relative to it, so a
    `trajectories/` swapped for a link mid-attempt leads nothing out."""
    run = tmp_path / "run"
    run.mkdir()
    traj = _writer(run)
    traj.step({"step": 0})
    os.rename(run / "trajectories", run / "moved")
    (run / "trajectories").symlink_to(outside / "folder")  # holds t/0_0/traj.jsonl
    before = snapshot(outside)
    traj.step({"step": 1})
    traj.screenshot(1, b"png1")
    traj.close()
    assert snapshot(outside) == before
    assert [r["step"] for r in read_lines(run / "moved" / "t" / "0_0" / "traj.jsonl")] == [0, 1]
    assert (run / "moved" / "t" / "0_0" / "step_0001.png").read_bytes() == b"png1"
    # A new attempt's folder is made through no link: refused.
    nxt = RunDir(run).traj({"task_id": "t", "sample": 0, "attempt": 1})
    _refused(lambda: nxt.step({"step": 0}), run / "trajectories", "is a link")
    assert snapshot(outside) == before


def test_a_takeover_is_read_and_answered_in_the_attempts_own_folder(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    traj = _writer(run)
    assert traj.takeover() is None  # no folder yet: nobody can have asked
    traj.step({"step": 0})
    folder = run / "trajectories" / "t" / "0_0"
    takeover.set_wish(folder, "hold")
    assert traj.takeover() == "hold"
    traj.holding(True)
    assert takeover.held(folder)
    traj.holding(False)
    traj.holding(False)
    assert not takeover.held(folder)
    (folder / takeover.HELD).symlink_to(outside / "dangling-held")
    before = snapshot(outside)
    _refused(lambda: traj.holding(True), folder / takeover.HELD, "the file is a link")
    (folder / takeover.HELD).unlink()
    os.rename(run / "trajectories", run / "moved")  # the folder's path now leads outside, its descriptor not
    (run / "trajectories").symlink_to(outside / "folder")
    assert traj.takeover() == "hold"
    traj.holding(True)
    assert takeover.held(run / "moved" / "t" / "0_0")
    traj.close()
    assert snapshot(outside) == before


def _queue(run: Path, **kw) -> DirQueue:
    return DirQueue(run / "queue", run / "scheduled.jsonl", run / "episodes.jsonl", **kw)


@pytest.mark.parametrize("rel", ["queue", "queue/pending", "queue/claimed", "queue/done", "queue/failed"])
def test_the_queue_refuses_a_linked_folder_when_it_opens(tmp_path, outside, rel):
    run = tmp_path / "run"
    (run / rel).parent.mkdir(parents=True, exist_ok=True)
    (run / rel).symlink_to(outside / "folder")
    before = snapshot(outside)
    _refused(lambda: _queue(run), run / rel, "is a link")
    assert snapshot(outside) == before


def test_the_queue_never_writes_through_a_linked_file(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    q = _queue(run)
    before = snapshot(outside)
    task = {"task_id": "t", "domain": "d"}

    (run / "queue" / ".lock").symlink_to(outside / "dangling-lock")  # O_CREAT would make it
    _refused(lambda: q.enqueue([task], 1), run / "queue" / ".lock", "the file is a link")
    (run / "queue" / ".lock").unlink()

    (run / "scheduled.jsonl").symlink_to(outside / "sentinel")
    _refused(lambda: _queue(run).enqueue([task], 1), run / "scheduled.jsonl", "the file is a link")
    assert list((run / "queue" / "pending").iterdir()) == []  # scheduled first: nothing queued without it
    (run / "scheduled.jsonl").unlink()

    q = _queue(run)
    assert q.enqueue([task], 1) == 1
    (run / "queue" / "pending" / "junk.json").write_text("[]")  # rejected: rejected.jsonl is written
    (run / "queue" / "rejected.jsonl").symlink_to(outside / "sentinel")
    _refused(q.claim, run / "queue" / "rejected.jsonl", "the file is a link")
    (run / "queue" / "rejected.jsonl").unlink()

    item = q.claim()
    assert item["task_id"] == "t"
    claimed = run / "queue" / "claimed" / f"{item['key']}.json"
    saved = claimed.read_bytes()
    claimed.unlink()
    claimed.symlink_to(outside / "sentinel")
    q.heartbeat()  # the lease's time is the file's own: a link's target is not touched
    claimed.unlink()
    claimed.write_bytes(saved)

    (run / "episodes.jsonl").symlink_to(outside / "sentinel")
    _refused(lambda: q.finish(item, {"task_id": "t", "sample": 0, "attempt": 0, "outcome": "success"}),
             run / "episodes.jsonl", "the file is a link")
    assert claimed.exists(), "a pair whose line could not be written stays claimed, to be played again"
    assert snapshot(outside) == before


def test_the_metrics_file_and_the_env_server_log_are_opened_without_following_a_link(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").symlink_to(outside / "sentinel")
    (run / "env-server.log").symlink_to(outside / "dangling-log")
    before = snapshot(outside)
    monitor = Monitor(run, ["http://127.0.0.1:9/v1"], 1.0)
    _refused(monitor.start, run / "metrics.jsonl", "the file is a link")
    assert monitor.thread is None
    server = EnvServerProcess(1, 0, None, run / "env-server.log")
    _refused(server.start, run / "env-server.log", "the file is a link")
    assert server.proc is None  # refused before anything started
    assert snapshot(outside) == before


def test_a_check_folder_never_resumes_a_linked_run(tmp_path, outside):
    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "oracle-1").symlink_to(outside / "folder")
    with pytest.raises(InputError, match="oracle-1: is a link"):
        check_tasks._run_of(tmp_path / "check", "oracle")


# --- cua rollout --resume on a run with a file or folder linked out --------------------------------

ROLLOUT = """
run: {name: resumed, results_dir: results}
tasks: {kind: miniwob, miniwob: {names: [click-test], seeds: [0]}}
env: {url: local, local: {max_envs: 1}}
model: {provider: random, seed: 1}
"""

FILES = ("run.json", "scheduled.jsonl", "episodes.jsonl", "metrics.jsonl", "unsupported.jsonl", "leases.jsonl",
         "env-server.json", "env-server.log", "queue/.lock", "queue/rejected.jsonl")
FOLDERS = ("trajectories", "trajectories/t", "queue", "queue/pending", "queue/claimed", "queue/done",
           "queue/failed")


@pytest.mark.parametrize("rel", FILES + FOLDERS)
def test_a_resume_refuses_a_run_file_or_folder_linked_out_of_the_run(tmp_path, outside, rel):
    run = make_run(tmp_path)
    for state in ("pending", "claimed", "done", "failed"):
        (run / "queue" / state).mkdir(parents=True)
    (run / "queue" / ".lock").write_bytes(b"")
    (run / "queue" / "rejected.jsonl").write_bytes(b"")
    (run / "env-server.log").write_bytes(b"")
    path = run / rel
    if rel in FILES:
        path.unlink()
        path.symlink_to(outside / "sentinel")
    else:
        os.rename(path, tmp_path / "aside")
        path.symlink_to(outside / "folder")
    (tmp_path / "exp.yaml").write_text(ROLLOUT)
    before = snapshot(tmp_path / "outside")
    r = run_cua("rollout", str(tmp_path / "exp.yaml"), "--resume", str(run), timeout=TIMEOUT)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    if rel in FILES:
        expected = f"{path}: the file is a link; not written"
    else:
        expected = f"{path}: is a link; nothing is written into it"
    assert r.stderr.strip() == f"Error: {expected}", r.stderr
    assert snapshot(tmp_path / "outside") == before
    assert not (tmp_path / "results").exists()


# --- a link planted while the rollout runs ---------------------------------------------------------

def _agentgym_config(write, tmp_path, url: str) -> Path:
    script = write("answers.json", json.dumps({"textcraft@0": ["Thought: easy.\nAction: win 0"]}))
    return write("ag.yaml", f"""
run: {{name: ag, results_dir: {tmp_path}/results}}
tasks: {{kind: agentgym, agentgym: {{indices: "0"}}}}
env: {{kind: agentgym, url: "{url}", retries: 0, agentgym: {{env: textcraft}}}}
agent: {{kind: react}}
model: {{provider: script, script: {json.dumps(str(script))}}}
runner: {{num_envs: 1, max_steps: 1}}
""")


def _on_first_step(server: AgentGymStandIn, plant) -> None:
    """Call `plant()` as the stand-in gets the episode's first step (the run folder exists by then)."""
    handle, done = server._handle, []

    def hooked(method, raw_path, headers, raw):
        if raw_path.rstrip("/").endswith("/step") and not done:
            done.append(True)
            plant()
        return handle(method, raw_path, headers, raw)

    server._handle = hooked


def test_an_attempt_folder_linked_out_mid_run_ends_that_attempt_and_the_pair_is_played_again(
        write, tmp_path, outside):
    server = AgentGymStandIn("textcraft", tasks=1)
    with server as url:
        cfg = _agentgym_config(write, tmp_path, url)

        def plant():
            (run,) = (tmp_path / "results").iterdir()
            task = run / "trajectories" / encode_task_id("textcraft@0")
            task.mkdir(parents=True)
            (task / "0_0").symlink_to(outside / "folder" / "t" / "0_0")

        _on_first_step(server, plant)
        before = snapshot(outside)
        r = run_cua("rollout", str(cfg), timeout=TIMEOUT)
    (run,) = (tmp_path / "results").iterdir()
    folder = run / "trajectories" / encode_task_id("textcraft@0") / "0_0"
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"{folder}: is a link; nothing is written into it" in r.stderr  # said as it happened
    lines = read_lines(run / "episodes.jsonl")
    assert [(x["attempt"], x["outcome"], x["stop_reason"]) for x in lines] == [
        (0, "error", "runner_error"), (1, "success", "env_done")]
    assert lines[0]["error"] == f"{folder}: is a link; nothing is written into it"
    assert snapshot(outside) == before


def test_episodes_file_linked_out_mid_run_stops_the_rollout_and_a_resume_plays_the_pair(write, tmp_path, outside):
    server = AgentGymStandIn("textcraft", tasks=1)
    with server as url:
        cfg = _agentgym_config(write, tmp_path, url)

        def plant():
            (run,) = (tmp_path / "results").iterdir()
            (run / "episodes.jsonl").symlink_to(outside / "sentinel")

        _on_first_step(server, plant)
        before = snapshot(outside)
        r = run_cua("rollout", str(cfg), timeout=TIMEOUT)
        (run,) = (tmp_path / "results").iterdir()
        episodes = run / "episodes.jsonl"
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines()[-1] == f"Error: {episodes}: the file is a link; not written", r.stderr
        assert f"warning: {episodes}: the file is a link; not written. The runner stops" in r.stderr, r.stderr
        assert snapshot(outside) == before
        assert len(list((run / "queue" / "claimed").iterdir())) == 1  # the pair is not lost: still claimed

        episodes.unlink()
        again = run_cua("rollout", str(cfg), "--resume", str(run), timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr
    assert [(x["task_id"], x["outcome"]) for x in read_lines(episodes)] == [("textcraft@0", "success")]
    assert snapshot(outside) == before


def _resident_pages(path: Path) -> int:
    """How many of the file's pages are in the page cache (mincore(2) on a mapping never touched)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    size = path.stat().st_size
    with path.open("rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as m:
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = ctypes.create_string_buffer(pages)
        address = ctypes.addressof(ctypes.c_char.from_buffer(m))
        assert libc.mincore(address, size, vec) == 0, os.strerror(ctypes.get_errno())
        return sum(b & 1 for b in vec.raw)


def test_a_steps_files_leave_the_page_cache_once_on_disk_and_hold_few_descriptors(tmp_path):
    probe = tmp_path / "probe"
    probe.write_bytes(b"x" * 65536)
    os.sync()
    with probe.open("rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if _resident_pages(probe):
        pytest.skip("this file system keeps its files in memory (tmpfs): no page cache to leave")
    run = tmp_path / "run"
    run.mkdir()
    data = [bytes([i]) * (64 * 1024 + i) for i in range(3 * page_cache.LAG)]
    fds_before = len(os.listdir("/proc/self/fd"))
    with _writer(run) as traj:
        for i, d in enumerate(data[:page_cache.LAG]):
            traj.screenshot(i, d)
        os.sync()  # the first LAG files are on disk, so their pages are clean when their second advice comes
        for i, d in enumerate(data[page_cache.LAG:], page_cache.LAG):
            traj.screenshot(i, d)
            assert len(os.listdir("/proc/self/fd")) - fds_before <= page_cache.LAG + 1  # + the attempt's folder
    folder = run / "trajectories" / "t" / "0_0"
    files = [folder / f"step_{i:04d}.png" for i in range(len(data))]
    assert [_resident_pages(f) for f in files[:page_cache.LAG]] == [0] * page_cache.LAG
    assert [f.read_bytes() == d for f, d in zip(files, data)] == [True] * len(data)


def _play_writes(tmp_path, monkeypatch, durations: list[float]) -> list[bool]:
    """Steps written through one runner's Writes, each step's writes taking the given seconds on a
    clock of the test's own; for each, whether it was written on the loop's thread."""
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(writes_module, "time", SimpleNamespace(monotonic=lambda: clock.now))
    run = tmp_path / "run"
    run.mkdir()
    writes, on_loop = Writes(1), []

    async def play():
        loop_thread = threading.get_ident()
        with _writer(run) as traj:
            real_step = traj.step

            def step(record, files):
                real_step(record, files)
                on_loop.append(threading.get_ident() == loop_thread)
                clock.now += durations[record["step"]]
            traj.step = step
            attempt = writes.attempt(traj)
            for i in range(len(durations)):
                attempt.screenshot(i, b"png%d" % i)
                await attempt.step({"step": i})

    asyncio.run(play())
    writes.close()
    folder = run / "trajectories" / "t" / "0_0"
    assert [r["step"] for r in read_lines(folder / "traj.jsonl")] == list(range(len(durations)))
    assert [(folder / f"step_{i:04d}.png").read_bytes() for i in range(len(durations))] == \
        [b"png%d" % i for i in range(len(durations))]
    return on_loop


def test_a_runner_writes_on_its_loop_until_one_write_stalls_then_in_threads(tmp_path, monkeypatch):
    fast, stall = writes_module.SLOW_MEAN_S / 2, writes_module.SLOW_WRITE_S * 1.5
    on_loop = _play_writes(tmp_path, monkeypatch, [fast] * 40 + [stall] + [fast] * 3)
    assert on_loop == [True] * 41 + [False] * 3  # the stalled write itself was on the loop, none after it


def test_a_runner_moves_its_writes_to_threads_once_they_are_slow_on_average(tmp_path, monkeypatch):
    slow = writes_module.SLOW_MEAN_S * 1.5  # each far from a stall, but the loop would spend its time writing
    on_loop = _play_writes(tmp_path, monkeypatch, [slow] * 30)
    moved = on_loop.index(False)
    assert 2 < moved < 30 and on_loop == [True] * moved + [False] * (30 - moved)


def test_a_screenshot_let_go_is_read_back_from_the_attempts_folder_and_checked(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    writes = Writes(1)
    with _writer(run) as traj:
        attempt = writes.attempt(traj)
        shots = [Image(b"png%d" % i, attempt.screenshot(i, b"png%d" % i)) for i in range(3)]
        shots = [Image(s.png, s.file, attempt.rereader(s.file)) for s in shots]
        for s in shots:
            s.let_go()
        assert [s.png for s in shots] == [None] * 3
        assert [s.data() for s in shots] == [b"png0", b"png1", b"png2"]  # still to write: the bytes pending
        asyncio.run(attempt.step({"step": 0}))
        assert [s.data() for s in shots] == [b"png0", b"png1", b"png2"]  # written: read from the folder
        folder = run / "trajectories" / "t" / "0_0"
        (folder / "step_0001.png").write_bytes(b"changed")
        with pytest.raises(UnreadableRun, match="step_0001.png: the screenshot read back"):
            shots[1].data()
        (folder / "step_0002.png").unlink()
        (folder / "step_0002.png").symlink_to(outside / "sentinel")
        with pytest.raises(UnreadableRun, match="step_0002.png: cannot be read back"):
            shots[2].data()
    writes.close()
    kept = Image(b"kept", "step_0000.png")  # nothing to read it back with (a Ray actor's): kept
    kept.let_go()
    assert kept.png == b"kept"
