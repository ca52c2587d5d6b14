#!/usr/bin/env python3
"""Screenshots by uuid against a real vLLM server on the CPU: bytes, server CPU, latency, answers.

It starts one server of the tiny random Qwen2-VL, then plays the same
conversations twice through cua's OpenAI provider: once sending every
screenshot's bytes in every request (model.image_uuids: false), once sending
each screenshot once and then only its uuid. Each conversation grows like a
UI-TARS episode (a new screenshot per step, the last `--history` kept).
Reported per request: bytes sent, CPU of the vLLM API server process and of
the whole server (API server + engine), and latency; and whether the answers
(temperature 0) were identical.

    .venv/bin/python scripts/bench_image_uuid.py --episodes 6 --steps 8
"""

import argparse
import io
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from PIL import Image as PILImage
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cua_cli._util.budget import Budget  # noqa: E402
from cua_cli.config import load_config  # noqa: E402
from cua_cli.models import (  # noqa: E402
    Image,
    Params,
    make_model,
    openai_chat,  # noqa: E402
)


def screenshot(episode: int, step: int, size: tuple[int, int]) -> bytes:
    """A distinct screenshot: a flat page with a noisy photo whose brightness differs per step."""
    img = PILImage.new("RGB", size, (230, 230, 235))
    img.paste(PILImage.effect_noise((size[0] // 3, size[1] // 3), 20 + 7 * step + episode).convert("RGB"), (40, 60))
    out = io.BytesIO()
    img.save(out, "PNG", compress_level=1)
    return out.getvalue()


def conversation(shots: list[Image], history: int) -> list[dict]:
    messages = [{"role": "user", "content": "Complete the task on the screen."}]
    for i, shot in enumerate(shots):
        if i:
            messages.append({"role": "assistant", "content": "Thought: next.\nAction: wait()"})
        if i >= len(shots) - history:
            messages.append({"role": "user", "content": [shot]})
    return messages


def cpu(proc: psutil.Process) -> tuple[float, float]:
    """CPU seconds of the API server process, and of it with all its children (the engine)."""
    own = sum(proc.cpu_times()[:2])
    return own, own + sum(sum(c.cpu_times()[:2]) for c in proc.children(recursive=True))


def play(mode: bool, url: str, name: str, work: Path, args, server: psutil.Process, sizes: list) -> dict:
    cfg = work / f"model-{mode}.yaml"
    cfg.write_text(json.dumps({"model": {"provider": "openai", "endpoints": [f"{url}/v1"], "name": name,
                                         "max_tokens": 16, "image_uuids": mode}}))
    model = make_model(load_config(str(cfg)), {})
    answers, latencies = [], []
    sizes.clear()
    before = cpu(server)
    for e in range(args.episodes):
        session = model.session(f"bench-{e}", 0)
        shots = []
        for step in range(args.steps):
            shots.append(Image(screenshot(e, step, args.size), f"step_{step:04d}.png"))
            t = time.monotonic()
            answers.append(session.complete(conversation(shots, args.history), Params(step, Budget(300.0))).text)
            latencies.append(time.monotonic() - t)
        session.close()
    after = cpu(server)
    n = len(latencies)
    return {"answers": answers, "bytes": sum(sizes) / n, "api_ms": (after[0] - before[0]) / n * 1000,
            "server_ms": (after[1] - before[1]) / n * 1000, "p50": statistics.median(latencies),
            "mean": statistics.mean(latencies)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--history", type=int, default=5, help="screenshots per request")
    ap.add_argument("--size", default="1280x720", help="screenshot size, WxH")
    ap.add_argument("--port", type=int, default=8480)
    args = ap.parse_args()
    args.size = tuple(map(int, args.size.split("x")))

    work = Path(tempfile.mkdtemp(prefix="cua-bench-uuid-"))
    model_dir = work / "tiny-vlm"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_tiny_vlm.py"), str(model_dir)], check=True,
                   capture_output=True)
    fleet = work / "fleet.json"
    cua = str(ROOT / ".venv/bin/cua")
    subprocess.run([cua, "start-models", "--cpu", "1", "--model", str(model_dir), "--config",
                    str(ROOT / "configs/fleet-cpu.yaml"), "--fleet", str(fleet), "--base-port", str(args.port),
                    "--detach"], check=True, capture_output=True)
    try:
        served = json.loads(fleet.read_text())["servers"][0]
        server = psutil.Process(served["pid"])
        sizes: list[int] = []
        body = openai_chat._body
        openai_chat._body = lambda *a: sizes.append(len(b := body(*a))) or b  # count what goes on the wire
        # The first run warms the server up and is the control: how often do two runs that send the
        # very same requests agree? (a random model's near-tied logits can flip with the batch shape)
        control = play(False, served["url"], served["served_model_name"], work, args, server, sizes)
        runs = {mode: play(mode, served["url"], served["served_model_name"], work, args, server, sizes)
                for mode in (False, True)}
    finally:
        subprocess.run([cua, "stop-models", "--fleet", str(fleet)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    full, uuid = runs[False], runs[True]
    shot_kb = len(screenshot(0, 0, args.size)) // 1024
    rows = [[label, fmt(full[key]), fmt(uuid[key])] for label, key, fmt in (
        ("request bytes per step (KB)", "bytes", lambda v: f"{v / 1024:.0f}"),
        ("vLLM API server CPU per request (ms)", "api_ms", lambda v: f"{v:.1f}"),
        ("vLLM server CPU per request, engine included (ms)", "server_ms", lambda v: f"{v:.1f}"),
        ("latency per request, median (s)", "p50", lambda v: f"{v:.3f}"),
        ("latency per request, mean (s)", "mean", lambda v: f"{v:.3f}"))]
    print(f"{args.episodes} episodes x {args.steps} steps, {args.size[0]}x{args.size[1]} screenshots of "
          f"~{shot_kb} KB, {args.history} per request, tiny random Qwen2-VL on vLLM (CPU)")
    print(tabulate(rows, headers=["", "every image's bytes", "bytes once, then uuid"], tablefmt="simple_outline"))
    def agree(a, b):
        return f"{sum(x == y for x, y in zip(a['answers'], b['answers']))}/{len(a['answers'])}"

    print(f"identical answers at temperature 0, by uuid vs every image's bytes: {agree(full, uuid)}; "
          f"two runs with every image's bytes: {agree(control, full)}")


if __name__ == "__main__":
    main()
