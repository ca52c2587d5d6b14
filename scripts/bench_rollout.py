#!/usr/bin/env python3
"""Throughput and memory of `cua rollout` at high concurrency.

An env server and an OpenAI-style model server that answer after fixed
delays (default: 1.0 s per env action, 0.5 s per model call) stand in for
slow remote systems; they speak the same protocols as DART's env cluster and
vLLM. The ideal rate is concurrency / step latency; we report the measured
steady-state steps/s against it and the peak memory of cua's processes.

    .venv/bin/python scripts/bench_rollout.py --envs 64
"""

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
from PIL import Image
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent


def _png() -> bytes:
    """A 1280x720 screenshot of realistic size (~0.3 MB): flat areas plus a noisy photo."""
    img = Image.new("RGB", (1280, 720), (40, 90, 160))
    img.paste(Image.effect_noise((400, 300), 40).convert("RGB"), (100, 100))
    buf = io.BytesIO()
    img.save(buf, "PNG", compress_level=1)
    return buf.getvalue()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    env_delay = model_delay = 0.0
    png = b""
    counter = iter(range(10**9))

    def log_message(self, *args):
        pass

    def _send(self, body: bytes, ctype="application/json"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.startswith("/server/getAvailableAndLock"):
            self._send(json.dumps({"data": {"server_id": str(next(self.counter)), "instruction": "bench"}}).encode())
        elif self.path.startswith("/server/execute/"):
            if body.get("action") == "screenshot":
                self._send(self.png, "image/png")
            else:
                time.sleep(self.env_delay)
                self._send(b'{"data": {"done": false}}')
        elif self.path.startswith("/server/evaluate/"):
            self._send(b'{"data": {"result": 0.0}}')
        elif self.path.startswith("/server/release/"):
            self._send(b'{"data": {}}')
        elif self.path.endswith("/chat/completions"):
            time.sleep(self.model_delay)
            text = "Thought: bench.\nAction: click(start_box='(100,100)')"
            self._send(json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode())
        else:
            self.send_error(404)


def _serve(env_delay, model_delay) -> ThreadingHTTPServer:
    _Handler.env_delay, _Handler.model_delay, _Handler.png = env_delay, model_delay, _png()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=64, help="concurrent episodes")
    ap.add_argument("--episodes", type=int, default=192, help="episodes in all")
    ap.add_argument("--steps", type=int, default=10, help="steps per episode")
    ap.add_argument("--env-delay", type=float, default=1.0)
    ap.add_argument("--model-delay", type=float, default=0.5)
    ap.add_argument("--processes", type=int, default=None, help="runner processes (default: cua's choice)")
    args = ap.parse_args()

    # The fake servers run in their own process so they never compete with cua for the GIL.
    if os.environ.get("_BENCH_SERVER"):
        server = _serve(args.env_delay, args.model_delay)
        print(server.server_address[1], flush=True)
        threading.Event().wait()
    server_proc = subprocess.Popen([sys.executable, __file__, *sys.argv[1:]], stdout=subprocess.PIPE,
                                   env=dict(os.environ, _BENCH_SERVER="1"), start_new_session=True)
    port = int(server_proc.stdout.readline())
    url = f"http://127.0.0.1:{port}"

    work = Path(tempfile.mkdtemp(prefix="cua-bench-"))
    tasks = work / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": f"bench-{i}", "domain": "bench"}) + "\n"
                             for i in range(args.episodes)))
    config = work / "bench.yaml"
    config.write_text(f"""
run: {{name: bench, results_dir: {work}/results}}
tasks: {{kind: jsonl, jsonl: {tasks}}}
env: {{url: "{url}"}}
model: {{provider: openai, endpoints: ["{url}/v1"]}}
runner: {{num_envs: {args.envs}, max_steps: {args.steps}{f', processes: {args.processes}' if args.processes else ''}}}
""")
    cmd = [str(ROOT / ".venv/bin/cua"), "rollout", str(config)]
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(ps))
        time.sleep(0.2)
    wall = time.time() - start
    os.killpg(server_proc.pid, 15)
    if proc.returncode != 0:
        sys.exit(f"cua rollout failed ({proc.returncode}): {proc.stdout.read().decode()}")

    times = sorted(json.loads(line)["time"] for f in (work / "results").glob("*/trajectories/*/*/traj.jsonl")
                   for line in f.read_text().splitlines())
    # Steady state: between the moments the pool was filled and began to drain.
    lo, hi = times[args.envs], times[-args.envs]
    steady = (len(times) - 2 * args.envs) / (hi - lo)
    ideal = args.envs / (args.env_delay + args.model_delay)
    rows = [["concurrent episodes", args.envs], ["steps", len(times)], ["wall time (s)", f"{wall:.1f}"],
            ["steady steps/s", f"{steady:.2f}"], ["ideal steps/s", f"{ideal:.2f}"],
            ["ratio to ideal", f"{steady / ideal:.3f}"], ["peak RSS, all cua processes (GiB)", f"{peak / 2**30:.2f}"]]
    print(tabulate(rows, tablefmt="simple_outline"))


if __name__ == "__main__":
    main()
