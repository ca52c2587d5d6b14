#!/usr/bin/env python3
"""How fast `cua stats` summarises a large run: 100,000 episode lines by default.

It writes a synthetic run folder (several domains, 4 samples per task, some
retries, errors and missing pairs) and times the whole `cua stats` command,
interpreter start and imports included.

    .venv/bin/python scripts/bench_stats.py --lines 100000
"""

import argparse
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
DOMAINS = ["chrome", "gimp", "vs_code", "libreoffice_calc", "thunderbird", "os", "vlc", "multi_apps"]


def make_run(path: Path, lines: int, samples: int = 4, seed: int = 0) -> None:
    rng = random.Random(seed)
    path.mkdir(parents=True)
    (path / "run.json").write_text("{}")
    sched, eps = [], []
    task = 0
    while len(eps) < lines:
        domain = DOMAINS[task % len(DOMAINS)]
        for sample in range(samples):
            sched.append(json.dumps({"task_id": f"task-{task}", "domain": domain, "sample": sample}))
            if rng.random() < 0.02:
                continue  # never finished: missing
            for attempt in range(2 if rng.random() < 0.05 else 1):
                error = attempt == 0 and rng.random() < 0.05
                score = None if error else float(rng.random() < 0.4)
                eps.append(json.dumps({
                    "task_id": f"task-{task}", "domain": domain, "sample": sample, "attempt": attempt,
                    "outcome": "error" if error else ("success" if score == 1.0 else "failure"),
                    "reward": score, "score": score, "steps": rng.randint(1, 15),
                    "stop_reason": "env_error" if error else "finished", "duration_s": rng.uniform(5, 300),
                    "error": "connection refused" if error else None,
                    "traj": f"trajectories/task-{task}/{sample}_{attempt}"}))
        task += 1
    (path / "scheduled.jsonl").write_text("\n".join(sched) + "\n")
    (path / "episodes.jsonl").write_text("\n".join(eps[:lines]) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    run = Path(tempfile.mkdtemp(prefix="cua-bench-stats-")) / "big-run"
    make_run(run, args.lines)
    cmd = [str(ROOT / ".venv/bin/cua"), "stats", str(run), "--format", "json", "--by", "domain"]
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        times.append(time.perf_counter() - t0)
    r = json.loads(out)["runs"][0]
    print(tabulate([["episode lines", args.lines], ["scheduled pairs", r["scheduled"]],
                    ["cua stats, whole command (best of %d)" % args.repeat, f"{min(times):.2f} s"],
                    ["cua stats, whole command (worst)", f"{max(times):.2f} s"]], tablefmt="simple_outline"))


if __name__ == "__main__":
    main()
