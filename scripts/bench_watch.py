#!/usr/bin/env python3
"""What watching a desktop live costs (`cua watch`), through the real chain: a desktop of
`cua env-server --backend desktop`, the rollout's relay (rollout/screens.py) holding the token, the
watch server, and noVNC in a real headless Chromium.

- the x11vnc a viewer starts in the desktop: its CPU (share of one core) while the screen is still
  and while it changes 5 times a second, and its memory (RSS and PSS);
- the latency from an action's answer (POST /execute returned) to its pixels on the page's canvas.

    .venv/bin/python scripts/bench_watch.py [--session gnome|openbox] [--changes 30] [--still-s 20] [--shot page.png]

As root: it starts a desktop server, which maps user namespaces. --shot saves the page as a PNG.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cua_cli.envserver.desktop import make_server  # noqa: E402
from cua_cli.rollout.screens import ScreenRelay  # noqa: E402
from cua_cli.runfolder.leases import held_record, record  # noqa: E402
from cua_cli.watch.episodes import running  # noqa: E402
from cua_cli.watch.server import WatchServer, novnc_dir  # noqa: E402

TOKEN_ENV = "CUA_BENCH_WATCH_TOKEN"
INSTRUCTION = "bench_watch.py: the desktop's background changes colour, and the page follows it."
COLORS = ["#ff0000", "#00ff00", "#0000ff", "#ffff00", "#00ffff", "#ff00ff"]
PIXEL = """const c = document.querySelector('#screen canvas'); if (!c || !c.width) return null;
const p = c.getContext('2d').getImageData(arguments[0], arguments[1], 1, 1).data;
return p[3] ? Array.from(p.slice(0, 3)) : null;"""  # null until something is drawn there (alpha 0)


def paint(session: str, color: str) -> str:
    """A shell command that turns the desktop's background `color`."""
    if session == "openbox":
        return f"xsetroot -solid '{color}'"
    settings = {"picture-uri": "''", "picture-uri-dark": "''", "color-shading-type": "solid",
                "primary-color": f"'{color}'"}  # quoted: a '#' after a space starts a shell comment
    return " && ".join(f"gsettings set org.gnome.desktop.background {k} {v}" for k, v in settings.items())


def step(traj: Path, i: int, color: str, command: str) -> None:
    """A step line as a rollout writes one, so the page's panel shows what the bench did."""
    with open(traj, "a") as f:
        f.write(json.dumps({"step": i, "thought": f"Paint the background {color}.", "response": f"execute: {command}",
                            "action": {"type": "execute", "command": command}}) + "\n")


def execute(api: str, command: str) -> None:
    body = json.dumps({"command": command, "shell": True}).encode()
    req = urllib.request.Request(api + "/execute", body, {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=60).read()


def rgb(color: str) -> list[int]:
    return [int(color[i:i + 2], 16) for i in (1, 3, 5)]


def cpu_share(proc: psutil.Process, seconds: float) -> float:
    t0, c0 = time.monotonic(), sum(proc.cpu_times()[:2])
    time.sleep(seconds)
    return (sum(proc.cpu_times()[:2]) - c0) / (time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--session", choices=["gnome", "openbox"], default="gnome")
    ap.add_argument("--changes", type=int, default=30, help="actions whose latency is measured")
    ap.add_argument("--still-s", type=float, default=20.0, help="seconds of a still screen to measure CPU over")
    ap.add_argument("--shot", type=Path, help="save a PNG of the watch page here, once it shows the desktop")
    args = ap.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault(TOKEN_ENV, "bench-" + os.urandom(8).hex())
    token = os.environ[TOKEN_ENV]
    work = Path(tempfile.mkdtemp(prefix="cua-bench-watch-"))
    server = make_server("127.0.0.1", 0, TOKEN_ENV, 1, (1920, 1080), 0, session=args.session)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    req = urllib.request.Request(url + "/start_emulator", b"{}", {"Authorization": f"Bearer {token}",
                                                                   "Content-Type": "application/json"})
    data = json.loads(urllib.request.urlopen(req, timeout=300).read())["data"]
    api = f"http://127.0.0.1:{data['server_port']}"
    run = work / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    record(run, held_record(url, data["emulator_id"], api=api, task_id="bench", traj="trajectories/bench/0_0"))
    (run / "queue" / "claimed").mkdir(parents=True)
    (run / "queue" / "claimed" / "bench.json").write_text(json.dumps(
        {"task_id": "bench", "sample": 0, "attempt": 0, "instruction": INSTRUCTION}))
    traj = run / "trajectories" / "bench" / "0_0" / "traj.jsonl"
    traj.parent.mkdir(parents=True)
    relay = ScreenRelay(run, [url], token)
    watch = WatchServer(str(run), novnc=novnc_dir())
    threading.Thread(target=watch.serve_forever, daemon=True).start()
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--window-size=1400,900", f"--user-data-dir={work}/chrome"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    x, y = (5, 5) if args.session == "openbox" else (1400, 700)  # openbox's bare root; GNOME's background
    try:
        execute(api, paint(args.session, "#000000"))
        browser.get(watch.url(running(str(run))[0]))
        deadline = time.monotonic() + 60
        while browser.execute_script(PIXEL, x, y) != [0, 0, 0]:
            if time.monotonic() > deadline:
                browser.save_screenshot(str(work / "page.png"))
                raise SystemExit(f"the page never showed the desktop: {work}/page.png")
            time.sleep(0.1)
        (vnc,) = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "x11vnc"]
        still = cpu_share(vnc, args.still_s)
        latencies = []
        for i in range(args.changes):
            color = COLORS[i % len(COLORS)]
            execute(api, paint(args.session, color))
            t = time.monotonic()
            while browser.execute_script(PIXEL, x, y) != rgb(color):
                if time.monotonic() - t > 30:
                    browser.save_screenshot(str(work / "page.png"))
                    raise SystemExit(f"{color} never reached the page: {work}/page.png")
                time.sleep(0.005)
            latencies.append(time.monotonic() - t)
            step(traj, i, color, paint(args.session, color))
        if args.shot:
            time.sleep(1.5)  # the page's panel shows the last step on its next poll
            browser.save_screenshot(str(args.shot))
        stop = threading.Event()

        def animate():
            i = 0
            while not stop.is_set():
                execute(api, paint(args.session, COLORS[i % len(COLORS)]))
                i += 1
                stop.wait(0.2)
        painter = threading.Thread(target=animate, daemon=True)
        painter.start()
        moving = cpu_share(vnc, 10.0)
        stop.set()
        painter.join()
        mem = vnc.memory_full_info()
        ms = sorted(v * 1000 for v in latencies)
        print(tabulate([
            ["x11vnc CPU, still screen", f"{still:.1%} of a core over {args.still_s:g} s"],
            ["x11vnc CPU, background changing 5/s", f"{moving:.1%} of a core over 10 s"],
            ["x11vnc memory", f"RSS {mem.rss / 2**20:.0f} MiB, PSS {mem.pss / 2**20:.0f} MiB"],
            ["action answered -> its pixels on the page", f"p50 {statistics.median(ms):.0f} ms, "
                                                          f"p95 {ms[round(0.95 * (len(ms) - 1))]:.0f} ms, "
                                                          f"max {ms[-1]:.0f} ms ({len(ms)} actions)"],
        ], headers=[f"watching a {args.session} desktop, 1920x1080", ""], tablefmt="simple_outline"))
        print(f"load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    finally:
        browser.quit()
        watch.shutdown()
        watch.server_close()
        relay.close()
        server.shutdown()
        server.server_close()
        server.close_all()
        if not (work / "page.png").exists():
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
