#!/usr/bin/env python3
"""How long `cua rollout` takes to end after a stop signal, and whether the run folder is whole.

Each case starts a real rollout (runner processes, the built-in MiniWoB env
server, the random model), waits for its first finished episode, sends the
signals to the rollout's whole process group as a batch scheduler would, and
times the exit from the last signal. `held` is an env that never answers an
action (a proxy in front of the env server holds every action), so the
episodes cannot end at their next step and the grace period decides.

    .venv/bin/python scripts/bench_stop.py [--repeat 3]
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cua_cli._util.httpclient import Client  # noqa: E402
from cua_cli.envserver.server import make_server  # noqa: E402

CASES = {  # name: (signals, pause between them in s, does the env hold actions)
    "SIGTERM": ([signal.SIGTERM], 0, False),
    "SIGHUP": ([signal.SIGHUP], 0, False),
    "Ctrl-C, then SIGTERM 1 s later": ([signal.SIGINT, signal.SIGTERM], 1.0, False),
    "SIGTERM, env holds actions": ([signal.SIGTERM], 0, True),
}


def holding_proxy(target: str) -> ThreadingHTTPServer:
    """Forwards everything to `target` but actions, which it holds until the proxy closes."""
    http, release = Client(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if "/execute/" in self.path and b'"screenshot"' not in body:
                release.wait()
                self.close_connection = True
                return
            r = http.post(target + self.path, 60, data=body)
            self.send_response(r.status)
            self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
            self.send_header("Content-Length", str(len(r.content)))
            self.end_headers()
            self.wfile.write(r.content)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.release = release
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def one(work: Path, env_url: str, signals, pause: float) -> dict:
    cfg = work / "exp.yaml"
    cfg.write_text(f"""
run: {{name: stop, results_dir: {work}/results}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test-2, click-button], seeds: [0, 1, 2, 3, 4, 5]}}}}
env: {{url: "{env_url}"}}
model: {{provider: random, seed: 1}}
runner: {{num_envs: 4, max_steps: 10, processes: 2, step_timeout_s: 3600, episode_timeout_s: 7200}}
""")
    p = subprocess.Popen([sys.executable, "-m", "cua_cli", "rollout", str(cfg)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
    try:
        while True:  # the first episode line, or (env holding actions) the first screenshot
            runs = list((work / "results").glob("*")) if (work / "results").exists() else []
            if runs and (any(runs[0].glob("trajectories/*/*/step_0000.png")) or (runs[0] / "episodes.jsonl").exists()):
                break
            time.sleep(0.05)
        for i, sig in enumerate(signals):
            if i:
                time.sleep(pause)
            os.killpg(p.pid, sig)
        sent = time.monotonic()
        p.wait(timeout=300)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    run = runs[0]
    claimed = len(os.listdir(run / "queue" / "claimed"))
    lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()] \
        if (run / "episodes.jsonl").exists() else []
    return {"exit": p.returncode, "s": took, "claimed": claimed,
            "interrupted": sum(e["stop_reason"] == "interrupted" for e in lines)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    server = make_server(port=0, max_envs=4, token_env="CUA_BENCH_TOKEN_NEVER_SET", idle_timeout_s=5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env_url = f"http://127.0.0.1:{server.server_address[1]}"
    rows = []
    try:
        for name, (signals, pause, hold) in CASES.items():
            results = []
            for _ in range(args.repeat):
                proxy = holding_proxy(env_url) if hold else None
                url = f"http://127.0.0.1:{proxy.server_address[1]}" if proxy else env_url
                with tempfile.TemporaryDirectory() as work:
                    results.append(one(Path(work), url, signals, pause))
                if proxy:
                    proxy.release.set()
                    proxy.shutdown()
                    proxy.server_close()
                while Client().get(f"{env_url}/server/list", 10).json()["data"]:
                    time.sleep(0.2)  # the held envs come back by the env server's idle timeout
            took = [r["s"] for r in results]
            rows.append([name, ",".join(sorted({str(r["exit"]) for r in results})), f"{statistics.median(took):.1f}",
                         f"{max(took):.1f}", sum(r["claimed"] for r in results),
                         sum(r["interrupted"] for r in results)])
    finally:
        server.shutdown()
        server.server_close()
        server.close_all()
    print(tabulate(rows, headers=["signals", "exit", "s to exit (median)", "max", "claims left",
                                  "episodes interrupted"], tablefmt="github"))


if __name__ == "__main__":
    main()
