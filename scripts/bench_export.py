#!/usr/bin/env python3
"""How fast `cua export` turns a run into training rows: 10,000 steps by default.

It writes a synthetic run folder recorded as with `model.record_tokens: true`
(1,000 trajectories of 10 steps; each step a UI-TARS-like prompt showing the
last 5 screenshots, which are real PNG files, ~1,500 prompt token ids and 60
response token ids with their logprobs) and times the whole `cua export`
command, interpreter start and imports included, to parquet and to jsonl.

    .venv/bin/python scripts/bench_export.py --trajectories 1000 --steps 10
"""

import argparse
import io
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path

from PIL import Image
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
HISTORY = 5


def png(rng: random.Random) -> bytes:
    im = Image.new("RGB", (320, 200), tuple(rng.randrange(256) for _ in range(3)))
    im.putpixel((rng.randrange(320), rng.randrange(200)), (0, 0, 0))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def step_line(rng: random.Random, step: int, answers: list[str]) -> dict:
    user = [{"type": "text", "text": "You are a GUI agent. Task: click the button labelled OK. " * 10}]
    messages = [{"role": "user", "content": user}]
    for k in range(max(0, step - HISTORY + 1), step + 1):
        messages.append({"role": "user", "content": [{"type": "image_file", "file": f"step_{k:04d}.png"}]})
        if k < step:
            messages.append({"role": "assistant", "content": answers[k]})
    response = f"Thought: the button is at the left.\nAction: click(start_box='({rng.randrange(999)},200)')"
    answers.append(response)
    n = 60
    return {"step": step, "time": 1.7e9 + step, "screenshot": f"step_{step:04d}.png", "response": response,
            "thought": "the button is at the left.", "action": [{"type": "click", "x": 10.0, "y": 20.0}],
            "commands": ["pyautogui.click(10, 20)"], "endpoint": "http://127.0.0.1:8000/v1",
            "model_version": "step-200", "policy_version": 3, "parse_retries": 0, "width": 320, "height": 200,
            "timings": {"env_s": 0.5, "model_s": 0.4, "act_s": 0.1}, "prompt": messages,
            "prompt_token_ids": [rng.randrange(151_000) for _ in range(rng.randint(1400, 1600))],
            "response_token_ids": [rng.randrange(151_000) for _ in range(n)],
            "response_logprobs": [-rng.random() * 3 for _ in range(n)], "finish_reason": "stop",
            "sampling": {"temperature": 1.0, "max_tokens": 512, "guided": True}}


def make_run(path: Path, trajectories: int, steps: int, samples: int = 4, seed: int = 0) -> None:
    rng = random.Random(seed)
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"format_version": 2, "run_id": path.name}))
    sched, eps = [], []
    for i in range(trajectories):
        task, sample = f"task-{i // samples}", i % samples
        traj = f"trajectories/{task}/{sample}_0"
        (path / traj).mkdir(parents=True)
        answers: list[str] = []
        lines = []
        for s in range(steps):
            (path / traj / f"step_{s:04d}.png").write_bytes(png(rng))
            lines.append(json.dumps(step_line(rng, s, answers)))
        (path / traj / "traj.jsonl").write_text("\n".join(lines) + "\n")
        error = rng.random() < 0.05
        score = None if error else float(rng.random() < 0.4)
        sched.append(json.dumps({"task_id": task, "domain": "web", "sample": sample}))
        eps.append(json.dumps({"task_id": task, "domain": "web", "sample": sample, "attempt": 0,
                               "outcome": "error" if error else "success" if score == 1 else "failure",
                               "reward": score, "score": score, "steps": steps,
                               "stop_reason": "env_error" if error else "finished", "duration_s": 60.0,
                               "error": "connection refused" if error else None, "traj": traj}))
    (path / "scheduled.jsonl").write_text("\n".join(sched) + "\n")
    (path / "episodes.jsonl").write_text("\n".join(eps) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trajectories", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    table = []
    with tempfile.TemporaryDirectory(prefix="cua-bench-export-") as tmp:  # ~200 MB: not left behind
        run = Path(tmp) / "big-run"
        t0 = time.perf_counter()
        make_run(run, args.trajectories, args.steps)
        print(f"wrote {run} ({args.trajectories * args.steps} steps) in {time.perf_counter() - t0:.1f} s")
        for fmt in ("parquet", "jsonl"):
            out = Path(tmp) / f"rows.{fmt}"
            cmd = [str(ROOT / ".venv/bin/cua"), "export", str(run), "--format", fmt, "--out", str(out)]
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
            rows = args.trajectories * args.steps
            table.append([fmt, rows, f"{min(times):.2f} s", f"{max(times):.2f} s", f"{rows / min(times):,.0f}",
                          f"{out.stat().st_size / 2 ** 20:.0f} MiB"])
    print(tabulate(table, headers=["format", "steps", "best of %d" % args.repeat, "worst", "steps/s", "file"],
                   tablefmt="simple_outline"))


if __name__ == "__main__":
    main()
