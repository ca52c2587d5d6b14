"""Starts a fleet, waits until it serves, keeps it healthy, and stops it completely.

A dead server, or one that stops answering /health for several checks in a
row (hung), is killed as a whole process group and restarted with backoff.
The fleet file lists a server only while it answers /health.
"""

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .._util.procgroup import kill_group, same_group
from ..errors import FleetError
from .server import ModelServer, port_free, write_fleet


@dataclass
class FleetSpec:
    model: str
    groups: list[list[int]]           # one server per group; [] = a CPU server
    served_model_name: str | None = None
    base_port: int = 8000
    vllm_args: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    fleet_file: Path = Path("fleet/fleet.json")
    ready_timeout_s: float = 900.0
    check_interval_s: float = 5.0
    hang_checks: int = 3               # failed health checks in a row before a restart
    max_backoff_s: float = 120.0


def vllm_command(model: str, port: int, tp: int, served_name: str, extra: list[str]) -> list[str]:
    exe = shutil.which("vllm", path=os.path.dirname(sys.executable)) or shutil.which("vllm") or "vllm"
    cmd = [exe, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", served_name]
    if tp > 1:
        cmd += ["--tensor-parallel-size", str(tp)]
    return cmd + extra


class Supervisor:
    def __init__(self, spec: FleetSpec, log=print, stopping=lambda: False):
        self.spec = spec
        self.log = log
        self.stopping = stopping  # a stop signal came: waits for servers give up
        self.logs_dir = spec.fleet_file.parent / "logs"
        served = spec.served_model_name or Path(spec.model).name
        self.served = served
        self.servers: list[ModelServer] = []
        port = spec.base_port
        for i, gpus in enumerate(spec.groups):
            while not port_free(port):  # ports are checked, never assumed
                port += 1
            cmd = vllm_command(spec.model, port, max(len(gpus), 1), served, spec.vllm_args)
            self.servers.append(ModelServer(i, gpus, port, spec.model, served, cmd, dict(spec.env),
                                       self.logs_dir / f"server-{i}.log",
                                       meta={"model_version": spec.model, "policy_version": 0}))
            port += 1
        self.ready: set[int] = set()
        self.failed_checks = {s.index: 0 for s in self.servers}
        self.retry_at: dict[int, float] = {}
        self.starting_since: dict[int, float] = {}

    # -- fleet file -------------------------------------------------------
    def publish(self) -> None:
        self.spec.fleet_file.parent.mkdir(parents=True, exist_ok=True)
        healthy = [s for s in self.servers if s.index in self.ready]
        write_fleet(self.spec.fleet_file, os.getpid(), healthy, [s.proc.pid for s in self.servers if s.proc])

    # -- start ------------------------------------------------------------
    def start(self) -> bool:
        """Start every server and wait until all serve (False if a stop signal came first); fail fast if one dies."""
        for s in self.servers:
            try:
                s.start()
            except FileNotFoundError:
                raise FleetError(f"cannot run {s.cmd[0]!r}: is vLLM installed? "
                                 "(pip install -e .[serve] on GPU hosts)") from None
            self.starting_since[s.index] = time.monotonic()
            self.log(f"server {s.index}: starting on {s.url} (gpus {s.gpus or 'none'}), log {s.log_path}")
        self.publish()
        deadline = time.monotonic() + self.spec.ready_timeout_s
        while len(self.ready) < len(self.servers):
            if self.stopping():
                return False
            for s in self.servers:
                if s.index in self.ready:
                    continue
                if not s.alive():
                    raise FleetError(f"server {s.index} exited with code {s.proc.returncode} while starting.\n"
                                     f"command: {' '.join(s.cmd)}\nlast lines of {s.log_path}:\n{s.tail_log()}")
                if s.healthy():
                    self.ready.add(s.index)
                    self.log(f"server {s.index}: ready on {s.url} after "
                             f"{time.monotonic() - self.starting_since[s.index]:.1f} s")
                    self.publish()
            if time.monotonic() > deadline:
                slow = [s for s in self.servers if s.index not in self.ready]
                raise FleetError(f"{len(slow)} server(s) not ready after {self.spec.ready_timeout_s} s: "
                                 + "; ".join(f"{s.url} (log {s.log_path})" for s in slow))
            time.sleep(1.0)
        return True

    # -- supervise --------------------------------------------------------
    def check(self) -> None:
        """One supervision round: restart dead or hung servers, publish changes."""
        now = time.monotonic()
        for s in self.servers:
            if s.index in self.retry_at:
                if now >= self.retry_at[s.index]:
                    del self.retry_at[s.index]
                    s.restarts += 1
                    s.start()
                    self.starting_since[s.index] = now
                    self.publish()  # a new pid to clean up on stop
                    self.log(f"server {s.index}: restarted (restart #{s.restarts})")
                continue
            if s.index not in self.ready:
                if not s.alive() or now - self.starting_since[s.index] > self.spec.ready_timeout_s:
                    self._restart_later(s, "failed to start")
                elif s.healthy():
                    self.ready.add(s.index)
                    self.failed_checks[s.index] = 0
                    self.log(f"server {s.index}: ready again on {s.url}")
                    self.publish()
                continue
            if not s.alive():
                self._restart_later(s, f"exited with code {s.proc.returncode}")
            elif s.healthy():
                self.failed_checks[s.index] = 0
            else:
                self.failed_checks[s.index] += 1
                if self.failed_checks[s.index] >= self.spec.hang_checks:
                    self._restart_later(s, f"hung: {self.failed_checks[s.index]} failed health checks")

    def _restart_later(self, s: ModelServer, why: str) -> None:
        self.ready.discard(s.index)
        self.failed_checks[s.index] = 0
        s.stop(grace=5.0)
        delay = min(2.0 ** s.restarts, self.spec.max_backoff_s)
        self.retry_at[s.index] = time.monotonic() + delay
        self.log(f"server {s.index}: {why}; restarting in {delay:.0f} s\n{s.tail_log(5)}")
        self.publish()

    # -- rolling reload ---------------------------------------------------
    def reload(self, model: str, version: str) -> None:
        """Restart the servers on a new checkpoint one at a time; the others keep serving.

        If a server does not come up on the new checkpoint, it goes back to
        the old one and the reload stops there.
        """
        for s in self.servers:
            old = (s.model, s.cmd, dict(s.meta))
            self.log(f"server {s.index}: reloading on {model} (version {version})")
            self.ready.discard(s.index)
            self.publish()  # clients stop sending new work here first
            s.stop()
            # A trainer orders samples by policy_version: it counts this server's reloads.
            s.model, s.meta["model_version"] = model, version
            s.meta["policy_version"] = old[2].get("policy_version", 0) + 1
            s.cmd = vllm_command(model, s.port, max(len(s.gpus), 1), self.served, self.spec.vllm_args)
            if not self._start_and_wait(s):
                if self.stopping():
                    return
                self.log(f"server {s.index}: {model} did not come up; back to {old[0]}, reload stopped\n"
                         f"{s.tail_log(10)}")
                s.stop()
                s.model, s.cmd, s.meta = old
                self._start_and_wait(s)
                return
        self.log(f"reload done: every server runs {version}")

    def _start_and_wait(self, s: ModelServer) -> bool:
        s.start()
        self.starting_since[s.index] = time.monotonic()
        self.publish()
        deadline = time.monotonic() + self.spec.ready_timeout_s
        while time.monotonic() < deadline and s.alive() and not self.stopping():
            if s.healthy():
                self.ready.add(s.index)
                self.publish()
                return True
            time.sleep(1.0)
        return False

    # -- stop -------------------------------------------------------------
    def stop(self, grace: float = 15.0) -> list[str]:
        """Stop every server's process group; returns what could not be stopped."""
        left = []
        for s in self.servers:
            if s.proc is not None and not s.stop(grace):
                left.append(f"server {s.index} (pgid {s.proc.pid})")
        self.ready.clear()
        return left


def stop_fleet_file(path: Path, doc: dict, grace: float = 15.0) -> list[str]:
    """Stop a fleet from its file, whether or not its supervisor is still alive."""
    import psutil

    sup = doc.get("supervisor_pid")
    if sup and sup != os.getpid():
        try:
            p = psutil.Process(sup)
            if "start-models" in " ".join(p.cmdline()):
                p.terminate()  # the supervisor stops its servers itself
                p.wait(grace + 20)
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass
    pgids = set(doc.get("pgids") or []) | {s["pid"] for s in doc["servers"] if s.get("pid")}
    leaders = doc.get("pgid_started") or {}
    # A file outliving its fleet (a reboot, a crashed supervisor) may name pids the system gave to others.
    ours = [g for g in sorted(pgids) if same_group(g, leaders.get(str(g)))]
    return [f"process group {g}" for g in ours if not kill_group(g, grace)]
