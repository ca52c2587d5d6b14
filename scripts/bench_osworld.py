"""OSWorld-format tasks through `cua rollout` on N local desktops, answered by their oracle.

Reports what a user of desktops pays for: whether every episode still scores 1, the time from a
desktop's handover (its lease, written once start_emulator answered) to its first screenshot, the
task's setup steps included (leases.jsonl and traj.jsonl), steps per second per desktop, and the
peak memory of the desktop server's process tree. `scripts/bench_desktop.py` times start_emulator.

    .venv/bin/python scripts/bench_osworld.py --desktops 2 4 --copies 4
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/osworld"


def config(folder: Path, desktops: int, copies: int) -> Path:
    path = folder / f"bench-{desktops}.yaml"
    path.write_text(f"""
run: {{name: bench-{desktops}, results_dir: {folder}/results}}
tasks: {{kind: osworld, rollout_n: {copies},
        osworld: {{task_list: {DATA}/evaluation_examples/test_all.json,
                  examples_dir: {DATA}/evaluation_examples/examples}}}}
env: {{kind: osworld, url: local, local: {{max_envs: {desktops}}},
      osworld: {{pause_s: 0.5, files_dir: {DATA}/cache}}}}
model: {{provider: script, script: {DATA}/oracle.json}}
agent: {{kind: osworld}}
runner: {{num_envs: {desktops}, max_steps: 5}}
""")
    return path


def server_memory(rollout: psutil.Process, peak: list, stop: threading.Event) -> None:
    """Peak PSS (MiB) of the local desktop server's process tree: every desktop and the server."""
    server = None
    while not stop.wait(0.5):
        try:
            if server is None:
                server = next((c for c in rollout.children() if "env-server" in c.cmdline()), None)
                continue
            total = 0
            for p in [server, *server.children(recursive=True)]:
                try:
                    total += p.memory_full_info().pss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass  # a desktop torn down while we looked
            peak[0] = max(peak[0], total / 2**20)
        except psutil.NoSuchProcess:
            return


def measure(folder: Path, desktops: int, copies: int) -> dict:
    cfg = config(folder, desktops, copies)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "cua_cli", "rollout", str(cfg)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, stop = [0.0], threading.Event()
    sampler = threading.Thread(target=server_memory, args=(psutil.Process(proc.pid), peak, stop), daemon=True)
    sampler.start()
    _, err = proc.communicate()
    stop.set()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"rollout failed ({proc.returncode}): {err[-2000:]}")
    run = next((folder / "results").glob(f"bench-{desktops}-*"))
    episodes = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    held = [json.loads(x) for x in (run / "leases.jsonl").read_text().splitlines()]
    held_at = {}
    for r in held:
        if r["state"] == "held":
            held_at.setdefault(r["task_id"], []).append(r["at"])
    first_shot = []
    for e in episodes:
        lines = (run / e["traj"] / "traj.jsonl").read_text().splitlines()
        t0 = json.loads(lines[0])["time"]
        before = [a for a in held_at.get(e["task_id"], []) if a <= t0]
        if before:
            first_shot.append(t0 - max(before))
    steps = sum(e["steps"] for e in episodes)
    q = statistics.quantiles(first_shot, n=20) if len(first_shot) > 1 else first_shot * 19
    return {"desktops": desktops, "episodes": len(episodes),
            "successes": sum(e["outcome"] == "success" for e in episodes), "wall_s": round(wall, 1),
            "handover_to_first_screenshot_p50_s": round(statistics.median(first_shot), 2),
            "handover_to_first_screenshot_p95_s": round(q[18], 2),
            "steps_per_s_per_desktop": round(steps / wall / desktops, 3),
            "server_tree_peak_pss_mib": round(peak[0]), "per_desktop_mib": round(peak[0] / desktops)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--desktops", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--copies", type=int, default=4, help="samples of each of the 5 tasks")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cua-bench-osworld-") as tmp:
        for n in args.desktops:
            print(json.dumps(measure(Path(tmp), n, args.copies)), flush=True)


if __name__ == "__main__":
    main()
