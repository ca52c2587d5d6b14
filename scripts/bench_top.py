#!/usr/bin/env python3
"""How fast `cua top` draws a large run: a generated run folder, the first frame, then frames while lines arrive.

The folder has --episodes attempt lines (with phases, lanes, started_at), their
scheduled pairs and done/ queue files, --running claimed pairs with a few steps
each, and --servers model servers sampled twice a second for --hours. We time
the first frame (the whole folder read once), then frames after each batch of
--batch new episode lines (what a refresh costs on a live run), and report the
process's peak memory.

    .venv/bin/python scripts/bench_top.py --episodes 100000
"""

import argparse
import io
import json
import random
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from cua_cli.runfolder.names import pair_key
from cua_cli.runfolder.records import PHASES
from cua_cli.runfolder.writer import traj_rel
from cua_cli.top.frame import frame
from cua_cli.top.watch import RunWatch

T0 = 1_790_000_000.0


def episode(i: int, rng: random.Random, slots: int) -> dict:
    steps = rng.randint(1, 15)
    phases = {p: round(rng.uniform(0, 3), 3) for p in PHASES}
    ok = rng.random() < 0.4
    error = rng.random() < 0.02
    return {"task_id": f"task-{i // 4}", "domain": f"d{i % 7}", "sample": i % 4, "attempt": 0,
            "outcome": "error" if error else "success" if ok else "failure",
            "reward": None if error else float(ok), "score": None if error else float(ok), "steps": steps,
            "stop_reason": rng.choice(["env_error", "model_error"]) if error else "finished",
            "duration_s": round(sum(phases.values()), 3), "error": None,
            "traj": traj_rel(f"task-{i // 4}", i % 4, 0), "started_at": T0 + i * 0.05, "phases": phases,
            "lane": f"host/1/{i % slots}", "claim_wait_s": 0.01}


def make_run(root: Path, n: int, running: int, servers: int, hours: float, slots: int) -> None:
    rng = random.Random(0)
    root.mkdir()
    (root / "run.json").write_text(json.dumps({"format_version": 2, "run_id": root.name,
                                               "config": {"runner": {"num_envs": slots}}}))
    total = n + running
    with open(root / "scheduled.jsonl", "w") as f:
        f.writelines(json.dumps({"task_id": f"task-{i // 4}", "domain": f"d{i % 7}", "sample": i % 4}) + "\n" for i in range(total))
    with open(root / "episodes.jsonl", "w") as f:
        f.writelines(json.dumps(episode(i, rng, slots)) + "\n" for i in range(n))
    for state in ("pending", "claimed", "done", "failed"):
        (root / "queue" / state).mkdir(parents=True)
    for i in range(n):
        (root / "queue" / "done" / f"{pair_key(f'task-{i // 4}', i % 4)}.json").write_text("{}")
    now = time.time()
    for i in range(n, total):
        task, sample = f"task-{i // 4}", i % 4
        item = {"task_id": task, "sample": sample, "attempt": 0, "errors": 0,
                "lease": {"host": "h", "pid": 1, "token": "t", "claimed_at": now - rng.uniform(0, 300)}}
        (root / "queue" / "claimed" / f"{pair_key(task, sample)}.json").write_text(json.dumps(item))
        traj = root / traj_rel(task, sample, 0)
        traj.mkdir(parents=True)
        (traj / "traj.jsonl").write_text("".join(json.dumps({"step": s, "response": "x" * 2000}) + "\n"
                                                 for s in range(rng.randint(0, 10))))
    with open(root / "metrics.jsonl", "w") as f:
        t = now - hours * 3600
        while t < now:
            f.writelines(json.dumps({"t": round(t, 3), "server": f"http://10.0.0.{s}:8000", "up": True, "running": 3,
                                    "waiting": 1, "kv_usage": 0.5, "prefix_hits": t, "prefix_queries": 2 * t,
                                    "prompt_tokens": 100 * t, "generation_tokens": 10 * t, "queue_s_sum": t,
                                    "queue_count": t}) + "\n" for s in range(servers))
            t += 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--running", type=int, default=256)
    ap.add_argument("--servers", type=int, default=8)
    ap.add_argument("--hours", type=float, default=2.0, help="of metrics.jsonl")
    ap.add_argument("--slots", type=int, default=256)
    ap.add_argument("--batch", type=int, default=200, help="episode lines appended between timed frames")
    ap.add_argument("--frames", type=int, default=20)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-top-"))
    try:
        run = tmp / "run"
        t = time.perf_counter()
        make_run(run, args.episodes, args.running, args.servers, args.hours, args.slots)
        sizes = {name: (run / name).stat().st_size >> 20 for name in ("episodes.jsonl", "metrics.jsonl")}
        print(f"generated in {time.perf_counter() - t:.1f} s: {args.episodes} episode lines "
              f"({sizes['episodes.jsonl']} MiB), {args.running} running, metrics.jsonl {sizes['metrics.jsonl']} MiB")
        console = Console(file=io.StringIO(), width=160)
        t = time.perf_counter()
        watch = RunWatch(run)
        console.print(frame(watch.refresh()))
        first = time.perf_counter() - t
        rng, times = random.Random(1), []
        for k in range(args.frames):
            with open(run / "episodes.jsonl", "a") as f:
                f.writelines(json.dumps(episode(args.episodes + k * args.batch + i, rng, args.slots)) + "\n" for i in range(args.batch))
            t = time.perf_counter()
            console.print(frame(watch.refresh()))
            times.append(time.perf_counter() - t)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
        print(f"first frame: {first:.2f} s; a frame after {args.batch} new lines: median "
              f"{1000 * statistics.median(times):.0f} ms, max {1000 * max(times):.0f} ms; peak memory {peak} MiB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
