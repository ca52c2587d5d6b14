"""What the fleet commands do: run a supervisor in the foreground or detached,
stop a fleet from its file, and read each server's status."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil

from .._util.signals import StopFlags
from ..config.fleet_file import read_fleet
from ..errors import FleetError, FleetFileError
from . import metrics
from .server import gpu_holders
from .supervisor import FleetSpec, Supervisor, stop_fleet_file


def reload_request_path(fleet_file: Path) -> Path:
    return fleet_file.with_name(fleet_file.name + ".reload")


def run_foreground(spec: FleetSpec, log=print) -> None:
    """Start, then supervise until SIGINT/SIGTERM (or SIGHUP: a closed terminal); always stop everything.
    A SIGHUP that comes with a reload request (see `request_reload`) asks for a rolling reload instead."""
    hangups = []
    signal.signal(signal.SIGHUP, lambda *_: hangups.append(1))
    with StopFlags((signal.SIGINT, signal.SIGTERM)) as flags:
        sup = Supervisor(spec, log, stopping=lambda: flags.count > 0)
        try:
            if sup.start():
                log(f"fleet ready: {spec.fleet_file} ({len(sup.servers)} servers); Ctrl-C stops it")
            while not flags.count:
                deadline = time.monotonic() + spec.check_interval_s
                while time.monotonic() < deadline and not flags.count and not hangups:
                    time.sleep(0.2)
                if hangups:
                    hangups.clear()
                    request = _take_reload_request(spec.fleet_file)
                    if request is None:  # no reload asked for: the terminal went away
                        break
                    sup.reload(request["model"], request["version"])
                if not flags.count:
                    sup.check()
        finally:
            log("stopping the fleet")
            pids = set()
            left = sup.stop()
            for s in sup.servers:
                pids |= s.stopped_pids
            spec.fleet_file.unlink(missing_ok=True)
            held = gpu_holders(pids)
            if left or held:
                raise FleetError("processes survived the stop: " + "; ".join(left + held))
            log("fleet stopped; no server process is left")


def _take_reload_request(fleet_file: Path) -> dict | None:
    """The reload `cua models reload` asked for, taken so that a later SIGHUP does not repeat it."""
    path = reload_request_path(fleet_file)
    try:
        request = json.loads(path.read_text())
        path.unlink()
    except (OSError, ValueError):
        return None
    return request if isinstance(request, dict) and {"model", "version"} <= request.keys() else None


def run_detached(argv: list[str], spec: FleetSpec, log=print) -> int:
    """Re-run this command without --detach in its own session; return once the fleet serves."""
    spec.fleet_file.parent.mkdir(parents=True, exist_ok=True)
    log_path = spec.fleet_file.parent / "supervisor.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cua_cli", *argv], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + spec.ready_timeout_s + 30
    want = len(spec.groups)
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = "".join(log_path.read_text(errors="replace").splitlines(True)[-30:])
                raise FleetError(f"the fleet supervisor exited with code {proc.returncode}; "
                                 f"last lines of {log_path}:\n{tail}")
            try:
                doc = read_fleet(spec.fleet_file)
                if doc.get("supervisor_pid") == proc.pid and len(doc["servers"]) == want:
                    return proc.pid
            except FleetFileError:
                pass
            time.sleep(1.0)
    except KeyboardInterrupt:  # a stop signal while waiting: the fleet is not wanted after all
        proc.terminate()  # the supervisor stops its servers itself
        proc.wait()
        raise
    raise FleetError(f"the fleet was not ready in time; see {log_path}")


def request_reload(fleet_file: Path, model: str, version: str, timeout: float, log=print) -> None:
    """Ask the fleet's supervisor for a rolling reload and wait until every server runs `version`."""
    doc = read_fleet(fleet_file)
    sup = doc.get("supervisor_pid")
    if not sup or not psutil.pid_exists(sup):
        raise FleetError(f"{fleet_file}: its supervisor (pid {sup}) is not running; nothing can reload")
    n = len(doc["pgids"])
    # Done means restarted, not just "on this version": a reload onto the version already served
    # (new weights written in place) must still wait for every restart.
    before = {s.get("url"): s.get("policy_version", 0) for s in doc["servers"]}
    reload_request_path(fleet_file).write_text(json.dumps({"model": model, "version": version}))
    os.kill(sup, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        servers = read_fleet(fleet_file)["servers"]
        done = sum(1 for s in servers if s.get("model_version") == version
                   and s.get("policy_version", 0) > before.get(s.get("url"), -1))
        if done != seen:
            log(f"reload: {done}/{n} servers on {version}, {len(servers)} serving")
            seen = done
        if done == n and len(servers) == n:
            return
        if not psutil.pid_exists(sup):
            raise FleetError("the fleet supervisor exited during the reload")
        time.sleep(1.0)
    raise FleetError(f"reload not finished after {timeout:.0f} s; see the logs beside {fleet_file}")


def stop(fleet_file: Path) -> list[str]:
    doc = read_fleet(fleet_file)
    left = stop_fleet_file(fleet_file, doc)
    if not left and fleet_file.exists():
        fleet_file.unlink()
    return left


def status(fleet_file: Path) -> list[dict]:
    """One row per listed server: health, vLLM's own load gauges, uptime."""
    doc = read_fleet(fleet_file)
    rows = []
    for s in doc["servers"]:
        row = {"url": s["url"], "gpus": ",".join(map(str, s.get("gpus") or [])) or "cpu",
               "model": s.get("served_model_name") or s.get("model"), "healthy": False,
               "running": None, "waiting": None, "uptime": _uptime(s.get("started_at"))}
        try:
            m = metrics.fetch(s["url"])
            row.update(healthy=True, running=int(m.get("vllm:num_requests_running", 0)),
                       waiting=int(m.get("vllm:num_requests_waiting", 0)))
        except Exception:  # an unreachable server is exactly what this table must show
            pass
        rows.append(row)
    sup = doc.get("supervisor_pid")
    if sup and not psutil.pid_exists(sup):
        rows.append({"url": f"(supervisor pid {sup} is gone: nobody restarts failed servers)"})
    return rows


def _uptime(started_at) -> str:
    if not started_at:
        return "-"
    secs = (datetime.now(timezone.utc) - datetime.fromisoformat(started_at)).total_seconds()
    h, rem = divmod(int(secs), 3600)
    return f"{h}h{rem // 60:02d}m" if h else f"{rem // 60}m{rem % 60:02d}s"
