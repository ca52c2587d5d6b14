"""`cua top`: the figures of a run folder read incrementally, the frame drawn from them, the end of a
run, hostile run folders, and the real command beside a real MiniWoB rollout."""

import io
import json
import os
import queue
import re
import signal
import tempfile
import threading
import urllib.request
from pathlib import Path

import pytest
from helpers.cli import finish, kill_group, run_cua, start_cua
from helpers.waiting import wait_for
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from cua_cli.runfolder.jsonl import read_lines
from cua_cli.runfolder.leases import held_record, record
from cua_cli.runfolder.names import pair_key
from cua_cli.runfolder.records import PHASES
from cua_cli.runfolder.writer import traj_rel
from cua_cli.stats.figures import wilson
from cua_cli.top import claims as claims_module
from cua_cli.top.frame import frame
from cua_cli.top.watch import SETTLE_S, RunWatch

T0 = 1_790_000_000.0


def _episode(task, attempt=0, outcome="failure", steps=1, start=T0, lane="h/1/0", stop="max_steps", **phases):
    error = outcome == "error"
    duration = sum(phases.values())
    return {"task_id": task, "domain": None, "sample": 0, "attempt": attempt, "outcome": outcome,
            "reward": None if error else float(outcome == "success"),
            "score": None if error else float(outcome == "success"), "steps": steps,
            "stop_reason": stop, "duration_s": duration, "error": None, "traj": traj_rel(task, 0, attempt),
            "started_at": start, "lane": lane, "claim_wait_s": 0.0, "phases": {p: phases.get(p, 0.0) for p in PHASES}}


def make_run(root: Path, episodes=(), tasks=(), queue=None, claims=(), metrics=(), slots=2) -> Path:
    """A run folder: `queue` maps a state to task ids; `claims` are (task, claimed_at, steps written)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.json").write_text(json.dumps({"format_version": 2, "run_id": root.name,
                                               "config": {"runner": {"num_envs": slots, "lease_ttl_s": 60}}}))
    (root / "scheduled.jsonl").write_text("".join(json.dumps({"task_id": t, "domain": None, "sample": 0}) + "\n"
                                                  for t in tasks))
    (root / "episodes.jsonl").write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n"
                                                 for e in episodes))
    (root / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    for state in ("pending", "claimed", "done", "failed"):
        (root / "queue" / state).mkdir(parents=True, exist_ok=True)
        for t in (queue or {}).get(state, ()):
            (root / "queue" / state / f"{pair_key(t, 0)}.json").write_text(json.dumps({"task_id": t, "sample": 0}))
    for task, at, steps in claims:
        item = {"task_id": task, "sample": 0, "attempt": 0, "errors": 0,
                "lease": {"host": "h", "pid": 1, "token": "x", "claimed_at": at}}
        (root / "queue" / "claimed" / f"{pair_key(task, 0)}.json").write_text(json.dumps(item))
        traj = root / traj_rel(task, 0, 0)
        traj.mkdir(parents=True, exist_ok=True)
        (traj / "traj.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(steps)))
    return root


def text_of(snap) -> str:
    console = Console(file=io.StringIO(), width=120)
    console.print(frame(snap))
    return console.file.getvalue()


# Four attempts on two lanes, one pair lost, two running: numbers a test can work out by hand.
EPISODES = [
    _episode("a", outcome="success", steps=4, start=T0, lane="L1", allocate_s=1, observe_s=1, model_s=6, act_s=2),
    _episode("b", steps=2, start=T0 + 10, lane="L1", model_s=5, act_s=5),
    _episode("c", outcome="error", steps=0, start=T0, lane="L2", stop="env_error", allocate_s=5),
    _episode("c", attempt=1, outcome="success", steps=3, start=T0 + 5, lane="L2", observe_s=3, model_s=9, act_s=3),
    {"task_id": "d", "domain": None, "sample": 0, "attempt": 0, "outcome": "error", "reward": None, "score": None,
     "steps": 0, "stop_reason": "runner_lost", "duration_s": 0.0, "error": "lost", "traj": None},
]
SERVER = [{"t": T0 + i, "server": "http://10.0.0.1:8000", "up": True, "running": i % 2, "waiting": 1,
           "kv_usage": 0.25, "prefix_hits": 10.0 * i, "prefix_queries": 40.0 * i, "generation_tokens": 100.0 * i,
           "queue_s_sum": 0.5 * i, "queue_count": 1.0 * i} for i in range(16, 31)]
METRICS = SERVER + [{"t": T0 + 30, "server": "http://10.0.0.2:8000", "up": False},
                    {"t": T0 + 30, "gpu": 0, "util": 80, "mem_used": 2 ** 33, "mem_total": 2 ** 34}]


def test_figures_of_a_running_run(tmp_path):
    run = make_run(tmp_path / "run", EPISODES, tasks="abcdef",
                   queue={"done": "abc", "failed": "d"}, claims=[("e", T0 + 22, 2), ("f", T0 + 20, 0)],
                   metrics=METRICS)
    s = RunWatch(run, window=15).refresh(now=T0 + 30)
    assert s["status"] == "running" and not s["ended"] and s["scheduled"] == 6
    assert s["queue"] == {"pending": 0, "claimed": 2, "done": 3, "failed": 1}
    # Final results: a and c succeed (c on its second attempt), b fails, d was lost.
    assert (s["success"], s["failure"], s["errors"], s["judged"]) == (2, 1, 1, 3)
    assert s["success_rate"] == pytest.approx(2 / 3) and s["ci95"] == pytest.approx(wilson(2, 3))
    assert s["success_rate_scheduled"] == pytest.approx(2 / 6)
    assert s["errors_by_stop_reason"] == [("runner_lost", 1)] and (s["attempts"], s["error_attempts"]) == (5, 2)
    # The window is (T0+15, T0+30]: b and c's second attempt end in it (5 steps); 9 steps over 30 s in all.
    assert s["steps_per_s_recent"] == pytest.approx(5 / 15) and s["steps_per_s"] == pytest.approx(9 / 30)
    # Slot time in the window, 2 slots x 15 s: b and c1 run 5 s each in it, e and f 8 s and 10 s so far.
    assert s["slots"] == 2 and s["env_busy_recent"] == pytest.approx(28 / 30)
    mix = s["env_recent"]
    assert mix["model"] == pytest.approx((5 * 5 / 10 + 9 * 5 / 15) / 30)
    assert mix["acting"] == pytest.approx((5 * 5 / 10 + 6 * 5 / 15) / 30) and mix["running"] == pytest.approx(18 / 30)
    assert s["env_busy"] == pytest.approx((40 + 18) / 60)
    # Servers: the latest sample for now, the window's samples for rates; a down one says so.
    up, down = s["servers"]
    assert (up["running"], up["waiting"], up["kv_usage"]) == (0, 1, 0.25) and up["up"] and not down["up"]
    assert up["prefix_hit_rate"] == pytest.approx(0.25) and up["generation_tokens_per_s"] == pytest.approx(100)
    assert up["queue_wait_mean_s"] == pytest.approx(0.5) and s["model_busy"] == pytest.approx(up["busy"])
    assert s["gpus"] == [{"gpu": 0, "util": 80, "mem_used": 2 ** 33, "mem_total": 2 ** 34}]
    # The longest-running first, with the steps their traj.jsonl holds so far.
    assert [(e["task_id"], e["running_s"], e["steps"]) for e in s["slowest"]] == [("f", 10, 0), ("e", 8, 2)]
    text = text_of(s)
    for shown in ("4 / 6 scheduled", "66.7% of 3 judged", "runner_lost",
                  "10.0.0.2:8000", "down", "0.33 last 15 s", "0.30 overall", "93.3%", "10s"):
        assert shown in text, shown


def test_new_lines_are_read_on_the_next_refresh_and_a_retry_replaces_its_pair(tmp_path):
    run = make_run(tmp_path / "run", EPISODES[:1], tasks="ab", queue={"done": "a", "pending": "b"})
    watch = RunWatch(run)
    assert watch.refresh(now=T0 + 30)["judged"] == 1
    with open(run / "episodes.jsonl", "a") as f:
        f.write(json.dumps(_episode("b", outcome="error", stop="model_error", start=T0 + 10, model_s=1)) + "\n")
    s = watch.refresh(now=T0 + 31)
    assert (s["errors"], s["judged"], s["errors_by_stop_reason"]) == (1, 1, [("model_error", 1)])
    with open(run / "episodes.jsonl", "a") as f:
        f.write(json.dumps(_episode("b", attempt=1, outcome="success", start=T0 + 12, model_s=1)) + "\n")
    s = watch.refresh(now=T0 + 32)
    assert (s["errors"], s["success"], s["errors_by_stop_reason"], s["attempts"]) == (0, 2, [], 3)


def test_a_drained_run_ends_once_it_has_stayed_drained(tmp_path):
    run = make_run(tmp_path / "run", EPISODES[:2], tasks="ab", queue={"done": "ab"})
    last_end = T0 + 20
    watch = RunWatch(run)
    s = watch.refresh(now=last_end + 1)
    assert s["status"] == "finishing" and not s["ended"]
    # The clock of a drained run is its last attempt's end: its last window, not an empty one.
    assert s["clock"] == last_end and s["steps_per_s_recent"] == pytest.approx(6 / 20)
    assert watch.refresh(now=last_end + 1 + SETTLE_S)["ended"]
    # Long finished: ended at the first look.
    assert RunWatch(run).refresh(now=last_end + 3600)["status"] == "ended"


def test_states_before_and_without_a_rollout(tmp_path):
    run = make_run(tmp_path / "run")
    assert RunWatch(run).refresh(now=T0)["status"].startswith("starting")
    run = make_run(tmp_path / "waiting", tasks="ab", queue={"pending": "ab"})
    assert RunWatch(run).refresh(now=T0)["status"].startswith("waiting: nothing running, 2 pending")
    run = make_run(tmp_path / "stalled", tasks="a", claims=[("a", T0, 1)])
    os.utime(run / "queue" / "claimed" / "a__0.json", (T0, T0))
    assert RunWatch(run).refresh(now=T0 + 600)["status"].startswith("stalled: no claim renewed for 600 s")


def test_once_prints_a_plain_frame_and_a_folder_that_is_no_run_is_named(tmp_path):
    run = make_run(tmp_path / "results" / "exp-1", EPISODES, tasks="abcd", queue={"done": "abc", "failed": "d"})
    r = run_cua("top", str(run), "--once", timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ended" in r.stdout and "4 / 4 scheduled" in r.stdout and "\x1b[" not in r.stdout
    r = run_cua("top", "--once", cwd=tmp_path, timeout=60)  # the newest run folder under ./results
    assert r.returncode == 0 and "exp-1" in r.stdout, r.stderr
    (tmp_path / "plain").mkdir()
    for args, cwd, said in [(["top", str(tmp_path / "plain"), "--once"], None, "not a cua run folder (no run.json)"),
                            (["top", str(tmp_path / "nothing"), "--once"], None, "no such run folder"),
                            (["top", "--once"], tmp_path / "plain", "no run folder under results/")]:
        r = run_cua(*args, cwd=cwd or tmp_path, timeout=60)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_ctrl_c_ends_a_live_top_with_130_and_no_traceback(tmp_path):
    run = make_run(tmp_path / "run", tasks="a", claims=[("a", T0, 1)])
    p = start_cua("top", str(run), "--interval", "0.2")
    try:
        wait_for(lambda: p.stdout.readline().strip(), timeout=60, what="the first line")
        os.kill(p.pid, signal.SIGINT)
        _, err = finish(p, 60)
    finally:
        kill_group(p)
    assert p.returncode == 130 and "Traceback" not in err, err


def test_live_view_links_each_running_desktop_to_its_page_while_top_runs(tmp_path):
    run = make_run(tmp_path / "run", tasks="ab", claims=[("a", T0, 1), ("b", T0, 1)])
    # a plays on a desktop; b on a text env, which has no screen to show
    record(run, held_record("http://127.0.0.1:9", "d1", api="http://127.0.0.1:1", task_id="a",
                            traj=traj_rel("a", 0, 0)))
    record(run, held_record("http://127.0.0.1:9", "t1", protocol="env-cluster", task_id="b",
                            traj=traj_rel("b", 0, 0)))
    r = run_cua("top", str(run), "--once", "--live-view", env={"COLUMNS": "200"}, timeout=60)
    assert r.returncode == 0, r.stderr
    (base,) = re.findall(r"live view of every running desktop: (http://127\.0\.0\.1:\d+/[\w-]+/)", r.stdout)
    rows = {line.split()[0]: line.split()[-1] for line in r.stdout.splitlines() if line.strip()[:2] in ("a ", "b ")}
    assert re.fullmatch(r"e/[0-9a-f]{12}", rows["a"]) and rows["b"] == "-", r.stdout
    p = start_cua("top", str(run), "--interval", "0.2", "--live-view")
    try:
        lines = queue.Queue()
        threading.Thread(target=lambda: lines.put(p.stdout.readline()), daemon=True).start()
        first = lines.get(timeout=60).strip()
        base = first.rpartition(" ")[2]
        assert first.startswith("live view of every running desktop: http://127.0.0.1:"), first
        with urllib.request.urlopen(base + "episodes.json", timeout=30) as answer:  # served while top runs
            (episode,) = json.load(answer)
        assert episode["task_id"] == "a"
        with urllib.request.urlopen(f"{base}e/{episode['key']}", timeout=30) as answer:
            assert b"cua watch" in answer.read()
        os.kill(p.pid, signal.SIGINT)
        _, err = finish(p, 60)
    finally:
        kill_group(p)
    assert p.returncode == 130 and "Traceback" not in err, err


# --- hostile run folders: never a crash, a hang, or a read outside the folder ----------------------

def test_links_fifos_and_huge_files_are_refused_or_bounded(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"task_id": "SECRET-OUTSIDE", "sample": 0, "lease": {"claimed_at": T0}}))
    run = make_run(tmp_path / "run", EPISODES, tasks="abcdefg", claims=[("e", T0, 3), ("f", T0 + 1, 0)])
    claimed = run / "queue" / "claimed"
    (claimed / "g__0.json").symlink_to(outside)
    os.mkfifo(claimed / "h__0.json")
    (claimed / "i__0.json").write_bytes(b"{" + b" " * (claims_module.MAX_CLAIM_BYTES + 10) + b"}")
    # e's trajectory is a link out, f's a file larger than one refresh reads.
    traj_e = run / traj_rel("e", 0, 0) / "traj.jsonl"
    traj_e.unlink()
    traj_e.symlink_to(tmp_path / "outside.json")
    (run / traj_rel("f", 0, 0) / "traj.jsonl").write_bytes(b"{}\n" * (claims_module.MAX_STEP_BYTES // 3 + 5))
    watch = RunWatch(run)
    s = watch.refresh(now=T0 + 10)
    assert s["queue"]["claimed"] == 5 and [e["task_id"] for e in s["slowest"]] == ["e", "f"]
    e, f = s["slowest"]
    assert e["steps"] is None and f["steps"] == claims_module.MAX_STEP_BYTES // 3
    assert watch.refresh(now=T0 + 11)["slowest"][1]["steps"] == claims_module.MAX_STEP_BYTES // 3 + 5
    assert "SECRET-OUTSIDE" not in text_of(s)


def test_huge_lines_and_a_long_metrics_file_cost_a_bounded_read(tmp_path):
    run = make_run(tmp_path / "run", EPISODES, tasks="abcd", queue={"done": "abc", "failed": "d"})
    with open(run / "episodes.jsonl", "ab") as f:
        f.write(b"{" * (20 << 20) + b"\n" + b"x" * (5 << 20))  # a garbage line, then a torn one
    sample = {"server": "http://s", "up": True, "running": 1, "generation_tokens": 0.0, "pad": "p" * 150}
    with open(run / "metrics.jsonl", "w") as f:
        f.write(json.dumps({**sample, "t": T0 - 10_000, "server": "http://old"}) + "\n")
        f.writelines(json.dumps({**sample, "t": T0 - 2000 + i / 10, "generation_tokens": 10.0 * i}) + "\n"
                     for i in range(20_000))
    assert (run / "metrics.jsonl").stat().st_size > 3 << 20
    watch = RunWatch(run, window=60)
    s = watch.refresh(now=T0)
    assert (s["judged"], s["errors"], s["attempts"]) == (3, 1, 5)
    # Only the file's last minutes were read: the server sampled long ago is not there.
    (server,) = s["servers"]
    assert server["server"] == "http://s" and server["generation_tokens_per_s"] == pytest.approx(100)
    assert watch.refresh(now=T0 + 1)["attempts"] == 5


def test_a_queue_folder_that_links_out_is_not_read(tmp_path):
    elsewhere = make_run(tmp_path / "elsewhere", tasks="z", claims=[("SECRET-ELSEWHERE", T0, 1)])
    run = make_run(tmp_path / "run", tasks="a")
    os.rename(run / "queue" / "claimed", tmp_path / "unused")
    (run / "queue" / "claimed").symlink_to(elsewhere / "queue" / "claimed")
    s = RunWatch(run).refresh(now=T0)
    text = text_of(s)
    assert s["slowest"] == [] and "SECRET-ELSEWHERE" not in text and "queue/claimed is a link" in text


def test_names_from_the_folder_cannot_drive_the_terminal(tmp_path):
    task = "\x1b[2J\x1b]0;pwned\x07[bold red]x[/bold red]"
    run = make_run(tmp_path / "run", [_episode(task, outcome="error", stop="\x1b[31mred", model_s=1)],
                   tasks=[task], claims=[(task, T0, 1)],
                   metrics=[{"t": T0, "server": "http://\x1b[1mevil", "up": True, "running": 1}])
    console = Console(file=io.StringIO(), width=200, force_terminal=True)
    console.print(frame(RunWatch(run).refresh(now=T0 + 5)))
    out = console.file.getvalue()
    assert "\x1b[2J" not in out and "\x1b]0;" not in out and "\x1b[31mred" not in out and "\x1b[1mevil" not in out
    assert "[bold red]x[/bold red]" in out and "\\x1b[2J" in out


LINES = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ")),
    st.builds(lambda d: json.dumps(d).encode(), st.dictionaries(
        st.sampled_from(["task_id", "sample", "attempt", "outcome", "score", "steps", "started_at", "duration_s",
                         "phases", "lane", "claim_wait_s", "stop_reason", "t", "server", "up", "running", "gpu"]),
        st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                  st.text(max_size=20), st.sampled_from(["success", "failure", "error", "a"]),
                  st.dictionaries(st.sampled_from(list(PHASES)), st.floats(-1, 1e12)), st.lists(st.integers())),
        max_size=12)))


@pytest.mark.slow  # a long property run
@given(episodes=st.lists(LINES, max_size=12), metrics=st.lists(LINES, max_size=8),
       scheduled=st.lists(LINES, max_size=6), claim=st.binary(max_size=300), run_json=st.binary(max_size=200),
       torn=st.binary(max_size=50))
def test_garbage_never_crashes_a_refresh_or_a_frame(episodes, metrics, scheduled, claim, run_json, torn):
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp) / "run", tasks="a", claims=[("a", T0, 1)])
        (run / "run.json").write_bytes(run_json)
        (run / "episodes.jsonl").write_bytes(b"\n".join(episodes) + b"\n" + torn)
        (run / "metrics.jsonl").write_bytes(b"\n".join(metrics) + b"\n")
        (run / "scheduled.jsonl").write_bytes(b"\n".join(scheduled) + b"\n")
        (run / "queue" / "claimed" / "x__0.json").write_bytes(claim)
        watch = RunWatch(run, window=30)
        for now in (T0, T0 + 100):
            s = watch.refresh(now=now)
            assert s["queue"]["claimed"] == 2 and text_of(s)
        with open(run / "episodes.jsonl", "ab") as f:  # the torn line completed, more garbage after it
            f.write(b"\n" + b"\n".join(episodes) + b"\n")
        text_of(watch.refresh(now=T0 + 200))


# --- the real thing --------------------------------------------------------------------------------

ROLLOUT = """
run: {name: top, results_dir: results}
tasks:
  kind: miniwob
  miniwob: {names: [click-test, click-test-2, click-button], seeds: [0, 1, 2, 3]}
env: {url: local, local: {max_envs: 2}}
model: {provider: random, seed: 1}
runner: {num_envs: 2, max_steps: 6}
"""


@pytest.mark.slow  # a real MiniWoB++ rollout (Chromium) in a child process
def test_live_top_beside_a_real_rollout_follows_it_to_its_end(write, tmp_path):
    config = write("exp.yaml", ROLLOUT)
    rollout = start_cua("rollout", str(config), cwd=tmp_path)
    top = None
    try:
        wait_for(lambda: list(tmp_path.glob("results/*/run.json")), timeout=120, what="the run folder")
        top = start_cua("top", "--interval", "0.3", cwd=tmp_path)  # the newest run folder under ./results
        out, err = finish(top, 300)
        assert top.returncode == 0, err
        finish(rollout, 300)
    finally:
        kill_group(rollout)
        if top:
            kill_group(top)
    assert rollout.returncode == 0
    (run,) = (tmp_path / "results").iterdir()
    # A line each time the figures moved: the run advanced under its eyes, then ended.
    counts = [int(m) for m in re.findall(r"finished (\d+)/12", out)]
    assert len(set(counts)) >= 2 and counts == sorted(counts) and counts[-1] == 12, out
    assert re.search(r"ended: finished 12/12, running 0", out), out
    # One frame of the finished run: its numbers are the folder's.
    r = run_cua("top", str(run), "--once", timeout=60)
    assert r.returncode == 0, r.stderr
    lines = read_lines(run / "episodes.jsonl")
    final = {}
    for rec in lines:
        final[(rec["task_id"], rec["sample"])] = max(final.get((rec["task_id"], rec["sample"])) or rec, rec,
                                                     key=lambda x: x["attempt"])
    judged = [f for f in final.values() if f["outcome"] != "error"]
    wins = sum(f["outcome"] == "success" for f in judged)
    low, high = wilson(wins, len(judged))
    text = r.stdout
    assert "ended" in text and "12 / 12 scheduled" in text
    assert f"{100 * wins / len(judged):.1f}% of {len(judged)} judged, 95% CI [{100 * low:.1f}%, {100 * high:.1f}%]" \
        in text, text
    errors = sum(f["outcome"] == "error" for f in final.values())
    error_attempts = sum(rec["outcome"] == "error" for rec in lines)
    assert f"{errors} pair{'s' * (errors != 1)} · {error_attempts} error attempts of {len(lines)}" in text, text
    assert f"{sum(rec['steps'] for rec in lines)} steps" in text and "2 slots" in text, text
