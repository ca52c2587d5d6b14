#!/usr/bin/env python3
"""Speed and size of cua's own desktops (cua_cli/envserver/desktop), through their HTTP APIs.

- a pyautogui click through POST /execute with OSWorld's exact command (the pre-imported fast path)
  and, for reference, the same code through a new Python per action (what OSWorld's server does);
- GET /screenshot (1920x1080 PNG with the cursor);
- seconds from POST /start_emulator to a first screenshot, cold (no warm pool) and warm;
- memory per desktop (RSS and PSS of every process of its namespace, plus its launcher), idle and with a
  gnome-terminal open; and how many desktops the machine holds (all started, all answering).

    sudo .venv/bin/python scripts/bench_desktop.py [--actions 200] [--starts 5] [--fill 8] [--session openbox]
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cua_cli.envserver.desktop import make_server

PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
TOKEN_ENV = "CUA_BENCH_DESKTOP_TOKEN"


class Client:
    """Keep-alive HTTP to one port (as a rollout's client holds its connection)."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def call(self, method: str, path: str, body=None) -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {os.environ[TOKEN_ENV]}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, data, headers)
        r = self.conn.getresponse()
        return r.status, r.read()


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def row(name: str, samples: list[float]) -> list:
    ms = [x * 1000 for x in samples]
    return [name, len(ms), f"{statistics.median(ms):.1f}", f"{pct(ms, 0.95):.1f}"]


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def memory_mib(sandbox, field: str = "Pss:") -> float:
    """RSS counts pages shared between desktops (Python, libraries) once per process; PSS splits them."""
    total = 0
    for pid in sandbox.processes() + [sandbox.launcher.pid]:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith(field):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def start(main: Client) -> tuple[str, int, float]:
    t = time.perf_counter()
    status, raw = main.call("POST", "/start_emulator", {})
    assert status == 200, raw
    data = json.loads(raw)["data"]
    status, shot = Client(data["server_port"]).call("GET", "/screenshot")
    assert status == 200 and shot.startswith(b"\x89PNG")
    return data["emulator_id"], data["server_port"], time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actions", type=int, default=200)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--fill", type=int, default=8, help="desktops to hold at once for the capacity check")
    ap.add_argument("--session", choices=["gnome", "openbox"], default="gnome")
    args = ap.parse_args()
    os.environ.setdefault(TOKEN_ENV, os.urandom(8).hex())
    rows, notes = [], []

    server = make_server("127.0.0.1", 0, TOKEN_ENV, max_desktops=max(args.fill, 2), warm=0,
                         session=args.session)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    main_api = Client(server.server_address[1])
    try:
        cold = []
        for _ in range(args.starts):
            eid, _, seconds = start(main_api)
            cold.append(seconds)
            main_api.call("DELETE", f"/emulators/{eid}")
        rows.append(row("start_emulator -> first screenshot, cold", cold))

        eid, port, _ = start(main_api)
        desk = Client(port)
        click = {"command": ["python", "-c", PREFIX + "pyautogui.click(960, 540)"], "shell": False}
        slow = {"command": ["python", "-c", "pass; " + PREFIX + "pyautogui.click(960, 540)"], "shell": False}
        for _ in range(5):
            desk.call("POST", "/execute", click)
            desk.call("GET", "/screenshot")
        rows.append(row("pyautogui click via /execute (pre-imported, forked)",
                        timed(lambda: desk.call("POST", "/execute", click), args.actions)))
        rows.append(row("pyautogui click via a new Python (OSWorld's way)",
                        timed(lambda: desk.call("POST", "/execute", slow), max(10, args.actions // 10))))
        rows.append(row("shell echo via /execute", timed(
            lambda: desk.call("POST", "/execute", {"command": ["echo", "hi"], "shell": False}), args.actions)))
        rows.append(row("GET /screenshot (empty desktop)", timed(lambda: desk.call("GET", "/screenshot"), args.actions)))
        sandbox = server.pool.get(eid).desktop.sandbox
        idle = (memory_mib(sandbox, "Rss:"), memory_mib(sandbox))
        desk.call("POST", "/setup/launch", {"command": ["gnome-terminal"], "shell": False})
        desk.call("POST", "/setup/launch", {"command": ["xterm", "-geometry", "200x60+0+0"], "shell": False})
        for _ in range(200):  # until the terminal's window is up
            if b"gnome-terminal" in desk.call("POST", "/execute", {"command": ["wmctrl", "-lx"]})[1].lower():
                break
            time.sleep(0.05)
        rows.append(row("GET /screenshot (terminals open)", timed(lambda: desk.call("GET", "/screenshot"), args.actions)))
        busy = (memory_mib(sandbox, "Rss:"), memory_mib(sandbox))
        notes.append(f"memory per desktop: idle {idle[0]:.0f} MiB RSS / {idle[1]:.0f} MiB PSS; with gnome-terminal and "
                     f"xterm open {busy[0]:.0f} MiB RSS / {busy[1]:.0f} MiB PSS")
        main_api.call("DELETE", f"/emulators/{eid}")

        # Capacity: hold --fill desktops at once, every one answering a click and a screenshot.
        held = []
        for _ in range(args.fill):
            held.append(start(main_api))
        clicks = []
        for _, port, _ in held:
            c = Client(port)
            clicks += timed(lambda c=c: c.call("POST", "/execute", click), 10)
            assert c.call("GET", "/screenshot")[0] == 200
        rows.append(row(f"pyautogui click with {args.fill} desktops up", clicks))
        total = sum(memory_mib(server.pool.get(eid).desktop.sandbox) for eid, _, _ in held)
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        avail = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable")) / 1024
        notes.append(f"{args.fill} desktops held at once, all answering: {total:.0f} MiB PSS in all "
                     f"({total / args.fill:.0f} MiB each, {1024 / (total / args.fill):.1f} idle desktops per GiB); "
                     f"MemAvailable then: {avail:.0f} MiB, room for about {int(avail / (total / args.fill))} more idle ones")
        main_api.call("POST", "/stop_all_emulators", {})
    finally:
        server.shutdown()
        server.server_close()
        server.close_all()

    warm_server = make_server("127.0.0.1", 0, TOKEN_ENV, max_desktops=2, warm=1, session=args.session)
    threading.Thread(target=warm_server.serve_forever, daemon=True).start()
    warm_api = Client(warm_server.server_address[1])
    try:
        warm = []
        for _ in range(args.starts):
            assert warm_server.pool.wait_warm(1, timeout=120)
            eid, _, seconds = start(warm_api)
            warm.append(seconds)
            warm_api.call("DELETE", f"/emulators/{eid}")
        rows.append(row("start_emulator -> first screenshot, warm", warm))
    finally:
        warm_server.shutdown()
        warm_server.server_close()
        warm_server.close_all()

    print(tabulate(rows, headers=["measure", "n", "p50 ms", "p95 ms"]))
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
