#!/usr/bin/env python3
"""How `cua view` copes with a large run: 10,000 episodes of 5 steps each, played in
64 env slots, with two model servers sampled every 0.5 s.

Reports the time to build the report, the size of its index and timeline
pages, and the time headless Chromium takes to open each.

    .venv/bin/python scripts/bench_view.py --episodes 10000 --lanes 64
"""

import argparse
import json
import pathlib
import random
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from tabulate import tabulate

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cua_cli.envserver.miniwob_backend import _chrome_paths  # noqa: E402
from cua_cli.runfolder.names import encode_task_id  # noqa: E402

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8"
                    "ffff3f0005fe02fea7d6a4ae0000000049454e44ae426082")


PHASES = ("allocate_s", "setup_s", "observe_s", "model_s", "act_s", "evaluate_s", "release_s", "other_s")


def make_run(run: pathlib.Path, n: int, lanes: int, steps: int = 5) -> None:
    rng = random.Random(0)
    run.mkdir(parents=True)
    sched, eps = [], []
    t0 = 1_790_000_000.0
    clocks = [t0] * lanes  # when each slot is free: the first free slot plays the next episode
    for i in range(n):
        task = f"task-{i:05d}"
        traj = f"trajectories/{encode_task_id(task)}/0_0"
        (run / traj).mkdir(parents=True)
        lines = []
        for s in range(steps):
            (run / traj / f"step_{s:04d}.png").write_bytes(PNG)
            lines.append(json.dumps({"step": s, "screenshot": f"step_{s:04d}.png", "width": 160, "height": 210,
                                     "response": "Thought: x\nAction: click(start_box='(10,10)')",
                                     "thought": "x", "action": [{"type": "click", "x": 10.0, "y": 20.0}],
                                     "timings": {"env_s": 0.1, "model_s": 0.2, "act_s": 0.05}}))
        (run / traj / "traj.jsonl").write_text("\n".join(lines) + "\n")
        sched.append(json.dumps({"task_id": task, "domain": f"d{i % 12}", "sample": 0}))
        win = rng.random() < 0.4
        slot = min(range(lanes), key=clocks.__getitem__)
        phases = dict(zip(PHASES, (rng.uniform(1, 8), rng.uniform(0, 3), 0.1 * steps, rng.uniform(0.5, 3) * steps,
                                   0.05 * steps, rng.uniform(0.1, 1), 0.1, 0.02 * steps)))
        duration, wait = sum(phases.values()), rng.uniform(0, 0.3)
        eps.append(json.dumps({"task_id": task, "domain": f"d{i % 12}", "sample": 0, "attempt": 0,
                               "outcome": "success" if win else "failure", "score": float(win), "reward": float(win),
                               "steps": steps, "stop_reason": "finished", "duration_s": duration, "error": None,
                               "traj": traj, "instruction": "do it", "started_at": clocks[slot] + wait,
                               "phases": phases, "lane": f"host/100/{slot}", "claim_wait_s": wait}))
        clocks[slot] += wait + duration
    (run / "scheduled.jsonl").write_text("\n".join(sched) + "\n")
    (run / "episodes.jsonl").write_text("\n".join(eps) + "\n")
    with open(run / "metrics.jsonl", "w") as f:
        for k in range(int((max(clocks) - t0) / 0.5)):
            for server in ("http://10.0.0.1:8000", "http://10.0.0.2:8000"):
                f.write(json.dumps({"t": t0 + k * 0.5, "server": server, "up": True, "running": rng.randint(0, 32),
                                    "waiting": rng.randint(0, 20), "kv_usage": rng.random()}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=10000)
    ap.add_argument("--lanes", type=int, default=64, help="env slots that played them")
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="cua-bench-view-"))
    run = work / "big"
    make_run(run, args.episodes, args.lanes)
    t0 = time.perf_counter()
    index = pathlib.Path(subprocess.run([str(ROOT / ".venv/bin/cua"), "view", str(run)], check=True,
                                        capture_output=True, text=True).stdout.strip())
    build = time.perf_counter() - t0
    binary, driver = _chrome_paths()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={work / 'profile'}"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        t0 = time.perf_counter()
        d.get(index.as_uri())  # returns after the load event: the table is drawn by then
        rows = d.execute_script("return document.querySelectorAll('#episodes tbody tr').length")
        opened = time.perf_counter() - t0
        timeline = index.parent / "timeline.html"
        t0 = time.perf_counter()
        d.get(timeline.as_uri())  # after the load event: the SVG and the axis are drawn by then
        lanes = d.execute_script("return document.querySelectorAll('svg.tl-plot g.lane').length")
        timeline_opened = time.perf_counter() - t0
    finally:
        d.quit()
    size = index.stat().st_size
    print(tabulate([["episodes", args.episodes], ["build the report (whole command)", f"{build:.1f} s"],
                    ["index.html size", f"{size / 2**20:.1f} MiB"],
                    ["open the index in Chromium, table drawn", f"{opened:.2f} s ({rows} rows on page 1)"],
                    ["timeline.html size", f"{timeline.stat().st_size / 2**10:.0f} KiB ({args.lanes} lanes)"],
                    ["open the timeline in Chromium", f"{timeline_opened:.2f} s ({lanes} rows drawn)"]],
                   tablefmt="simple_outline"))


if __name__ == "__main__":
    main()
