#!/usr/bin/env python3
"""Real vLLM fleet figures on this machine: time to ready, model latency per
step, and the prefix-cache hit rate of sticky versus round-robin routing.

It starts a 2-server CPU fleet of the tiny random Qwen2-VL model, runs the
same MiniWoB rollout twice through it (sticky routing, then round-robin),
and reads the hit rates from vLLM's own /metrics counters.

    .venv/bin/python scripts/bench_fleet.py
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cua_cli.fleet import metrics  # noqa: E402

CUA = [str(ROOT / ".venv/bin/cua")]


def cua(*args, **kw):
    return subprocess.run([*CUA, *args], check=True, capture_output=True, text=True, **kw)


def cache_counters(servers) -> tuple[float, float]:
    q = h = 0.0
    for s in servers:
        m = metrics.fetch(s["url"])
        q += m.get("vllm:prefix_cache_queries_total", 0.0)
        h += m.get("vllm:prefix_cache_hits_total", 0.0)
    return q, h


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=4, help="MiniWoB seeds per task (episodes = 3 x seeds)")
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cua-bench-fleet-"))
    model = work / "tiny-vlm"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_tiny_vlm.py"), str(model)], check=True,
                   capture_output=True)
    fleet = work / "fleet.json"
    t0 = time.monotonic()
    cua("start-models", "--cpu", "2", "--model", str(model), "--config", str(ROOT / "configs/fleet-cpu.yaml"),
        "--fleet", str(fleet), "--base-port", "8400", "--detach")
    ready_s = time.monotonic() - t0
    servers = json.loads(fleet.read_text())["servers"]
    per_server = [line for line in (work / "supervisor.log").read_text().splitlines() if "ready on" in line]
    rows = [["fleet ready (2 servers, started together)", f"{ready_s:.1f} s"]]
    rows += [[f"  {line.split(':')[0]}", line.rsplit('after', 1)[1].strip()] for line in per_server]
    try:
        seeds = list(range(args.seeds))
        for routing in ("sticky", "round_robin"):
            cfg = work / f"{routing}.yaml"
            cfg.write_text(f"""
run: {{name: {routing}, results_dir: {work}/results-{routing}}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test, click-button, focus-text], seeds: {seeds},
         episode_max_time: 300}}}}
env: {{url: local, local: {{max_envs: 2}}}}
model: {{provider: openai, guided: true, max_tokens: 128, temperature: 1.0, routing: {routing}}}
runner: {{num_envs: 2, max_steps: {args.steps}}}
""")
            q0, h0 = cache_counters(servers)
            cua("rollout", str(cfg), "--fleet", str(fleet))
            q1, h1 = cache_counters(servers)
            steps = [json.loads(line) for f in (work / f"results-{routing}").glob("*/trajectories/*/*/traj.jsonl")
                     for line in f.read_text().splitlines()]
            lat = sorted(s["timings"]["model_s"] for s in steps)
            rows.append([f"{routing}: prefix-cache hit rate (hits/queries, tokens)",
                         f"{(h1 - h0) / (q1 - q0):.1%} ({h1 - h0:.0f}/{q1 - q0:.0f})"])
            rows.append([f"{routing}: model latency per step, median / p90 ({len(lat)} steps)",
                         f"{statistics.median(lat):.3f} / {lat[int(0.9 * (len(lat) - 1))]:.3f} s"])
    finally:
        cua("stop-models", "--fleet", str(fleet))
    print(tabulate(rows, tablefmt="simple_outline"))


if __name__ == "__main__":
    main()
