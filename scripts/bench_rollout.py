#!/usr/bin/env python3
"""Throughput, CPU and memory of `cua rollout` at high concurrency.

Stand-ins for slow remote systems answer after fixed delays (default: 1.0 s
per env action, 0.5 s per model call): an env server speaking DART's
env-cluster protocol, and a model server speaking vLLM's chat API. Each
screenshot is a distinct PNG (default 1920x1080, about 250 KB). The model
stand-in never parses request bodies, so it cannot become the bottleneck;
like vLLM it accepts an image part that carries only a `uuid` it has seen
before, and answers HTTP 400 "Cache miss ..." for one it has not.

The ideal rate is concurrency / step latency. We report steady-state
steps/s against it (while every slot has an episode), the CPU that all cua processes spent per step (user +
system, over the same steady window), the model request bytes per step, and
the peak memory of cua's processes.

    .venv/bin/python scripts/bench_rollout.py --envs 1024 --episodes 3072
    .venv/bin/python scripts/bench_rollout.py --envs 256 --size 1280x720 --history 3 --processes 4
    .venv/bin/python scripts/bench_rollout.py --envs 256 --backend ray
    .venv/bin/python scripts/bench_rollout.py --envs 64 --sample-s 0      (no load sampling: its overhead)
    .venv/bin/python scripts/bench_rollout.py --envs 1024 --asyncio-loop   (asyncio's loop instead of uvloop's)
    .venv/bin/python scripts/bench_rollout.py --compare --repeat 3       (CPU per step against the baseline)

--compare plays the setting the baseline file (scripts/bench_rollout_baseline.json)
was taken in (1,024 concurrent episodes) --repeat times and says how far the
median CPU per step moved from the baseline's; --save-baseline writes that file
from the runs. CPU per step is the figure to compare: on a shared machine the
ratio to ideal follows the load, CPU per step far less. Every figure is printed
with the load average of the minute before the run.

With --backend ray, `cua rollout` drives runner actors on a local 3-node Ray
cluster (Ray's test utility: a head without CPUs and two 1-CPU nodes); the
report adds the CPU per step of the actors and of Ray's own processes.
"""

import argparse
import asyncio
import io
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import psutil
from PIL import Image
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "bench_rollout_baseline.json"
# What a baseline is taken in: a comparison plays the same.
SETTING = ("envs", "episodes", "steps", "env_delay", "model_delay", "size", "png_kb", "history", "processes",
           "backend", "no_uuid", "dir", "sample_s", "asyncio_loop")
ANSWER = "Thought: bench.\nAction: click(start_box='(100,100)')"


def make_png(width: int, height: int, target_kb: int) -> bytes:
    """A screenshot of about `target_kb`: flat areas, plus a noisy photo sized to reach the target."""
    def render(side: int) -> bytes:
        img = Image.new("RGB", (width, height), (40, 90, 160))
        side = max(1, min(side, width, height))
        img.paste(Image.effect_noise((side, side), 40).convert("RGB"), (0, 0))
        buf = io.BytesIO()
        img.save(buf, "PNG", compress_level=1)
        return buf.getvalue()

    side, png = 200, b""
    for _ in range(4):  # noise compresses about linearly with its area: a few steps converge
        png = render(side)
        side = int(side * (target_kb * 1024 / len(png)) ** 0.5)
    return png


def numbered(png: bytes, n: int) -> bytes:
    """The PNG with a tEXt chunk holding `n`: every screenshot distinct, still a valid PNG."""
    text = b"bench\0" + str(n).encode()
    chunk = struct.pack(">I", len(text)) + b"tEXt" + text + struct.pack(">I", zlib.crc32(b"tEXt" + text))
    return png[:33] + chunk + png[33:]  # right after the signature and IHDR


# What a vLLM server's /metrics holds that cua reads, in Prometheus's text format.
METRICS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="ui-tars"} %d
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="ui-tars"} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="ui-tars"} 0.5
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="ui-tars"} %d
"""


class StandIn:
    """A minimal HTTP/1.1 keep-alive server on asyncio: env or model, by `role`."""

    UUID = re.compile(rb'"uuid":"([^"]{1,128})","image_url":(null|\{)')

    def __init__(self, role: str, png: bytes, env_delay: float, model_delay: float):
        self.role, self.png, self.env_delay, self.model_delay = role, png, env_delay, model_delay
        self.counter = 0
        self.cached: set[bytes] = set()
        self.stats = {"requests": 0, "request_bytes": 0, "cache_misses": 0, "images_with_data": 0,
                      "images_by_uuid": 0, "png_bytes": len(png), "metrics_requests": 0}
        self.running = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                m = re.search(rb"(?i)\r\ncontent-length:\s*([0-9]+)", head)
                body = await reader.readexactly(int(m.group(1))) if m else b""
                path = head.split(b" ", 2)[1].decode()
                status, ctype, payload = await self.route(path, body)
                writer.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                             % (status, ctype, len(payload)) + payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def route(self, path: str, body: bytes):
        js = b"application/json"
        if path == "/bench/stats":
            return 200, js, json.dumps(self.stats).encode()
        if path.startswith("/server/getAvailableAndLock"):
            self.counter += 1
            return 200, js, json.dumps({"data": {"server_id": str(self.counter), "instruction": "bench"}}).encode()
        if path.startswith("/server/execute/"):
            if b'"screenshot"' in body:
                self.counter += 1
                return 200, b"image/png", numbered(self.png, self.counter)
            await asyncio.sleep(self.env_delay)
            return 200, js, b'{"data": {"done": false}}'
        if path.startswith("/server/evaluate/"):
            return 200, js, b'{"data": {"result": 0.0}}'
        if path.startswith("/server/release/"):
            return 200, js, b'{"data": {}}'
        if path.endswith("/v1/models"):  # how cua tells a vLLM server, which keeps images by uuid
            return 200, js, b'{"object": "list", "data": [{"id": "ui-tars", "owned_by": "vllm"}]}'
        if path.endswith("/chat/completions"):
            return await self.chat(body)
        if path == "/metrics" and self.role == "model":  # vLLM's gauges and counters, as cua samples them
            self.stats["metrics_requests"] += 1
            return 200, b"text/plain", (METRICS % (self.running, self.stats["requests"])).encode()
        return 404, js, b'{"error": "not found"}'

    async def chat(self, body: bytes):
        self.stats["requests"] += 1
        self.stats["request_bytes"] += len(body)
        # Image parts are found by their uuid alone, never by parsing the body (see the module doc).
        for index, (uuid, data) in enumerate(self.UUID.findall(body)):
            if data == b"null" and uuid not in self.cached:
                self.stats["cache_misses"] += 1
                msg = f"Cache miss for image at index {index} but data is not provided."
                return 400, b"application/json", json.dumps(
                    {"error": {"message": msg, "type": "BadRequestError", "code": 400}}).encode()
        for uuid, data in self.UUID.findall(body):
            self.cached.add(uuid)
            self.stats["images_with_data" if data == b"{" else "images_by_uuid"] += 1
        self.running += 1
        try:
            await asyncio.sleep(self.model_delay)
        finally:
            self.running -= 1
        return 200, b"application/json", json.dumps(
            {"choices": [{"message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}]}).encode()


def serve(role: str, args) -> None:
    """Run one stand-in until killed; prints its port first."""
    try:
        import uvloop  # present wherever vLLM is; the stand-ins only get cheaper with it
        uvloop.install()
    except ImportError:
        pass
    width, height = map(int, args.size.split("x"))
    png = make_png(width, height, args.png_kb) if role == "env" else b""  # only the env sends screenshots
    standin = StandIn(role, png, args.env_delay, args.model_delay)

    async def main():
        server = await asyncio.start_server(standin.handle, "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


def _tree(proc: psutil.Process):
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            yield p.memory_info().rss, (t.user, t.system)
        except psutil.NoSuchProcess:
            pass


def _ray_cpu(procs: dict, skip: set) -> tuple[float, float]:
    """CPU seconds of the local Ray cluster's runner actors, and of the rest of it (GCS, raylets, other workers).

    The cluster's processes are this process's descendants, except `skip` (the stand-ins and cua's).
    """
    for p in psutil.Process().children(recursive=True):  # workers start as the cluster needs them
        if p.pid not in skip:
            procs.setdefault(p.pid, p)
    actors = rest = 0.0
    for p in procs.values():
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        if "RunnerActor" in " ".join(_cmdline(p)):
            actors += t.user + t.system
        else:
            rest += t.user + t.system
    return actors, rest


def _cpu(pids: set) -> float:
    """CPU seconds (user + system) of the processes `pids` (the stand-ins: they share the machine with cua)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _at(samples: list[tuple[float, tuple]], t: float) -> tuple:
    """The CPU seconds sampled closest to wall time `t` (see the sampling loop for what each is)."""
    return min(samples, key=lambda s: abs(s[0] - t))[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=64, help="concurrent episodes (runner.num_envs)")
    ap.add_argument("--episodes", type=int, default=None, help="episodes in all (default: 4 x envs)")
    ap.add_argument("--steps", type=int, default=10, help="steps per episode")
    ap.add_argument("--env-delay", type=float, default=1.0)
    ap.add_argument("--model-delay", type=float, default=0.5)
    ap.add_argument("--size", default="1920x1080", help="screenshot size, WxH")
    ap.add_argument("--png-kb", type=int, default=250, help="screenshot file size to aim for")
    ap.add_argument("--history", type=int, default=5, help="screenshots per request (agent.history_images)")
    ap.add_argument("--processes", type=int, default=None, help="runner processes (default: cua's choice)")
    ap.add_argument("--backend", default="local", choices=["local", "ray"],
                    help="ray: runner actors on a local 3-node Ray cluster (Ray's own test utility)")
    ap.add_argument("--asyncio-loop", action="store_true", help="asyncio's own event loop, not uvloop's")
    ap.add_argument("--no-uuid", action="store_true", help="send every image's bytes (model.image_uuids: false)")
    ap.add_argument("--dir", help="where the run folder goes (default: the temp dir; /dev/shm takes the disk out)")
    ap.add_argument("--keep", action="store_true", help="keep the run folder (removed by default: it is large)")
    ap.add_argument("--sample-s", type=float, default=0.5,
                    help="runner.sample_s: how often the model server's /metrics is sampled (0: never)")
    ap.add_argument("--compare", action="store_true",
                    help="play the baseline file's setting and say how far CPU per step moved from it")
    ap.add_argument("--save-baseline", action="store_true",
                    help="write the baseline file from the runs of the setting given")
    ap.add_argument("--repeat", type=int, default=1, help="runs in a row (the median is compared)")
    ap.add_argument("--baseline", default=str(BASELINE), help="the baseline file")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        return serve(args.role, args)
    baseline = json.loads(Path(args.baseline).read_text()) if args.compare else None
    if baseline:
        vars(args).update(baseline["setting"])
    args.episodes = args.episodes or 4 * args.envs
    runs, folders = [], []
    try:
        for _ in range(args.repeat):
            runs.append(one_run(args, folders))
            print(tabulate(runs[-1]["table"], tablefmt="simple_outline"), flush=True)
    finally:
        # Only once the last run has ended: on ext4 without a journal (this machine's root), a file
        # created within 60-300 s of many deletions nearby pays for walking past each of them, so a
        # run after a deletion measures the deletion (docs/design/benchmarks.md).
        for work in [] if args.keep else folders:
            shutil.rmtree(work, ignore_errors=True)
    cpu = statistics.median(r["cpu_ms"] for r in runs)
    if baseline:
        base, low, high = statistics.median(baseline["cpu_ms"]), min(baseline["cpu_ms"]), max(baseline["cpu_ms"])
        verdict = ("within the baseline's spread" if low <= cpu <= high else
                   "dearer than every baseline run" if cpu > high else "cheaper than every baseline run")
        print(f"CPU per step: median {cpu:.2f} ms of {[r['cpu_ms'] for r in runs]} against the baseline's "
              f"{base:.2f} ms of {baseline['cpu_ms']} ({baseline['commit']}): {cpu - base:+.2f} ms "
              f"({(cpu - base) / base:+.0%}), {verdict}; ratio to ideal {[r['ratio'] for r in runs]} against "
              f"{baseline['ratio']}; load average {[r['load'] for r in runs]} against {baseline['load']}")
    if args.save_baseline:
        Path(args.baseline).write_text(json.dumps({
            "setting": {k: getattr(args, k) for k in SETTING},
            "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
            "cpu_ms": [r["cpu_ms"] for r in runs], "ratio": [r["ratio"] for r in runs],
            "load": [r["load"] for r in runs]}, indent=2) + "\n")


def one_run(args, folders: list[Path]) -> dict:
    """One rollout against fresh stand-ins: its figures, and their table. Its run folder joins `folders`."""
    # Each stand-in in its own process, so it never competes with cua (or the other) for a GIL.
    servers, ports = [], {}
    setting = [f"--size={args.size}", f"--png-kb={args.png_kb}", f"--env-delay={args.env_delay}",
               f"--model-delay={args.model_delay}"]
    for role in ("env", "model"):
        p = subprocess.Popen([sys.executable, __file__, *setting, "--role", role], stdout=subprocess.PIPE,
                             start_new_session=True)
        servers.append(p)
        ports[role] = int(p.stdout.readline())
    env_url, model_url = (f"http://127.0.0.1:{ports[r]}" for r in ("env", "model"))

    # ~10 GB of screenshots at 1,024 episodes, removed after the last run
    work = Path(tempfile.mkdtemp(prefix="cua-bench-", dir=args.dir))
    folders.append(work)
    cluster = None
    if args.backend == "ray":
        from ray.cluster_utils import Cluster
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
    try:
        return run_bench(args, args.episodes, work, env_url, model_url, cluster.address if cluster else None,
                         {p.pid for p in servers})
    finally:
        if cluster:
            cluster.shutdown()
        for p in servers:
            os.killpg(p.pid, 15)


def run_bench(args, episodes: int, work: Path, env_url: str, model_url: str, ray_address: str | None,
              stand_ins: set) -> dict:
    tasks = work / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task_id": f"bench-{i}", "domain": "bench"}) + "\n"
                             for i in range(episodes)))
    # With Ray: one runner actor per worker node (cua's default).
    ray = (f", backend: ray, ray: {{address: '{ray_address}'}}"
           if ray_address else "")
    processes = f", processes: {args.processes}" if args.processes else ""
    config = work / "bench.yaml"
    config.write_text(f"""
run: {{name: bench, results_dir: {work}/results}}
tasks: {{kind: jsonl, jsonl: {tasks}}}
env: {{url: "{env_url}"}}
model: {{provider: openai, endpoints: ["{model_url}/v1"]{', image_uuids: false' if args.no_uuid else ''}}}
agent: {{history_images: {args.history}}}
runner: {{num_envs: {args.envs}, max_steps: {args.steps}, sample_s: {args.sample_s}{processes}{ray}}}
""")
    # This interpreter runs cua: the checkout's own venv, or another checkout's with PYTHONPATH set.
    cmd = [sys.executable, "-m", "cua_cli", "rollout", str(config)]
    load = os.getloadavg()[0]  # of the minute before the run: the machine's other work
    start = time.time()
    env = None
    if args.asyncio_loop:  # a uvloop that cannot be imported, first on the path: cua falls back to asyncio's loop
        (work / "no-uvloop" / "uvloop").mkdir(parents=True)
        (work / "no-uvloop" / "uvloop" / "__init__.py").write_text("raise ImportError('hidden by bench_rollout')\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(work / "no-uvloop"),
                                                                         os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
    ps = psutil.Process(proc.pid)
    peak, samples, runners, ray_procs = 0, [], 0, {}
    try:
        while proc.poll() is None:
            tree = list(_tree(ps))
            peak = max(peak, sum(r for r, _ in tree))
            runners = max(runners, sum("spawn_main" in " ".join(_cmdline(p)) for p in ps.children()))
            main = sum(tree[0][1]) if tree else 0.0
            ray = (_ray_cpu(ray_procs, stand_ins | {ps.pid, *(p.pid for p in ps.children(recursive=True))})
                   if ray_address else (0.0, 0.0))
            samples.append((time.time(), (*map(sum, zip(*(c for _, c in tree))), main, *ray, _cpu(stand_ins))))
            time.sleep(0.25)
    finally:
        if proc.poll() is None:  # interrupted: stop the rollout and its runners with us
            os.killpg(proc.pid, 9)
    wall = time.time() - start
    stats, env_stats = (json.loads(subprocess.run(["curl", "-s", f"{url}/bench/stats"], capture_output=True).stdout
                                   or b"{}") for url in (model_url, env_url))
    if proc.returncode != 0:
        sys.exit(f"cua rollout failed ({proc.returncode}): {proc.stderr.read().decode()[-3000:]}")

    episodes_times = [[json.loads(line)["time"] for line in f.read_text().splitlines()]
                      for f in (work / "results").glob("*/trajectories/*/*/traj.jsonl")]
    times = sorted(t for ts in episodes_times for t in ts)
    # Steady state: from the moment every slot had begun an episode to the moment the last
    # episode began; after that, slots fall idle one by one as the queue has nothing left.
    lo, hi = times[args.envs], max(ts[0] for ts in episodes_times if ts)
    steady_steps = sum(lo <= t < hi for t in times)
    steady = steady_steps / (hi - lo)
    ideal = args.envs / (args.env_delay + args.model_delay)
    user, system, main, actors, ray_rest, standins = ((b - a) / steady_steps * 1000
                                                      for a, b in zip(_at(samples, lo), _at(samples, hi)))
    requests = max(stats.get("requests", 0), 1)
    rows = [["concurrent episodes", args.envs], ["runner processes", runners],
            ["screenshot", f"{args.size}, {env_stats.get('png_bytes', 0) // 1024} KB"],
            ["screenshots per request", args.history], ["steps", len(times)], ["wall time (s)", f"{wall:.1f}"],
            ["steady steps/s", f"{steady:.1f}"], ["ideal steps/s", f"{ideal:.1f}"],
            ["ratio to ideal", f"{steady / ideal:.3f}"], ["cua CPU per step (ms)", f"{user + system:.2f}"],
            ["  of which user / system", f"{user:.2f} / {system:.2f}"],
            ["  of which the main process", f"{main:.2f}"],
            *([["Ray runner actors CPU per step (ms)", f"{actors:.2f}"],
               ["Ray's own processes CPU per step (ms)", f"{ray_rest:.2f}"]] if ray_address else []),
            ["stand-ins' CPU per step (ms)", f"{standins:.2f}"],
            ["model request MB per step", f"{stats.get('request_bytes', 0) / requests / 2**20:.3f}"],
            ["images sent with data / by uuid", f"{stats.get('images_with_data')} / {stats.get('images_by_uuid')}"],
            ["cache misses answered", stats.get("cache_misses")],
            ["/metrics samples (runner.sample_s)", f"{stats.get('metrics_requests')} ({args.sample_s:g} s)"],
            ["peak RSS, all cua processes (GiB)", f"{peak / 2**30:.2f}"],
            ["load average before the run (1 min)", f"{load:.2f}"]]
    return {"table": rows, "cpu_ms": round(user + system, 2), "ratio": round(steady / ideal, 3),
            "load": round(load, 2)}


if __name__ == "__main__":
    main()
