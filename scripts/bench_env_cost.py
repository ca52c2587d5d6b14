#!/usr/bin/env python3
"""CPU per step of cua next to that of its env, on a real rollout.

    .venv/bin/python scripts/bench_env_cost.py configs/demo.yaml --set tasks.rollout_n=4
    .venv/bin/python scripts/bench_env_cost.py configs/osworld-oracle.yaml

Runs `cua rollout CONFIG` (its run folder in a temporary folder, removed
afterwards) and samples, every 0.1 s, the CPU time (user + system) of every
process it starts, in two parts: cua (the rollout and its runner
processes) and the env (the local env server and everything under it:
browsers, X servers, desktops and their apps; a config with `env.url: local`).
A model server the config names is not counted. The figures cover the steps'
window, from the first step's line to the last: each step's share of the
env's resets, setups and evaluations between them is in it, the start of the
processes is not. A process of the env that lives less than 0.1 s between two
samples is missed, so the env's figure is a floor.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from tabulate import tabulate

SAMPLE_S = 0.1


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _is_env_server(p: psutil.Process) -> bool:
    try:
        return "env-server" in p.cmdline()
    except psutil.Error:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed on to cua rollout")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cua-env-cost-"))
    try:
        cmd = [sys.executable, "-m", "cua_cli", "rollout", args.config, "--set", f"run.results_dir={work}"]
        for kv in args.set:
            cmd += ["--set", kv]
        start = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        root = psutil.Process(proc.pid)
        cpu: dict[int, tuple[str, float]] = {}  # pid -> (its part, its CPU time when last seen)
        samples = []  # (time, cua CPU so far, env CPU so far)
        while proc.poll() is None:
            for p in _tree(root):
                try:
                    part = cpu.get(p.pid, (None,))[0]
                    if part is None:  # new: the env server, or under it
                        part = "env" if _is_env_server(p) or any(
                            cpu.get(a.pid, ("",))[0] == "env" for a in p.parents()) else "cua"
                    t = p.cpu_times()
                    cpu[p.pid] = (part, t.user + t.system)
                except psutil.Error:
                    continue  # gone since the listing: its last sample stands
            samples.append((time.time(), *(sum(c for part, c in cpu.values() if part == want)
                                           for want in ("cua", "env"))))
            time.sleep(SAMPLE_S)
        wall = time.time() - start
        out, err = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"cua rollout failed ({proc.returncode}): {err.decode()[-3000:]}")

        steps, episodes, scores = [], 0, []
        for run in work.iterdir():
            for line in (run / "episodes.jsonl").read_text().splitlines():
                e = json.loads(line)
                episodes += 1
                scores.append(e.get("score") or 0.0)
            for traj in run.glob("trajectories/*/*/traj.jsonl"):
                steps += [json.loads(line)["time"] for line in traj.read_text().splitlines()]
        if len(steps) < 2:
            sys.exit("fewer than two steps were played: nothing to measure")
        lo, hi = min(steps), max(steps)

        def at(t: float) -> tuple[float, float]:
            return next(((c, e) for ts, c, e in samples if ts >= t), samples[-1][1:])

        (cua0, env0), (cua1, env1) = at(lo), at(hi)
        n = sum(lo <= t <= hi for t in steps)
        mean = sum(scores) / max(1, episodes)
        rows = [["config", args.config], ["episodes (mean score)", f"{episodes} ({mean:.2f})"],
                ["steps in the window", n], ["window / wall time (s)", f"{hi - lo:.1f} / {wall:.1f}"],
                ["steps/s", f"{n / (hi - lo):.2f}"],
                ["cua CPU per step (ms)", f"{(cua1 - cua0) / n * 1000:.1f}"],
                ["  per second of the window, idle or not (ms)", f"{(cua1 - cua0) / (hi - lo) * 1000:.1f}"],
                ["env CPU per step (ms, a floor)", f"{(env1 - env0) / n * 1000:.1f}"],
                ["env processes seen", sum(part == "env" for part, _ in cpu.values())]]
        print(tabulate(rows, tablefmt="simple_outline"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
