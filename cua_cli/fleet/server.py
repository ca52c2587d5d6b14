"""One `vllm serve` process: launch in its own session, probe, stop the whole group."""

import json
import os
import shutil
import socket
import subprocess
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import psutil

from .._util.atomic import write_atomic
from .._util.httpclient import Client, HttpError
from .._util.procgroup import kill_group, live, started

HTTP = Client()  # health probes: cua's client, so a server that answers slowly is held to the whole timeout


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


@dataclass
class ModelServer:
    index: int
    gpus: list[int]
    port: int
    model: str
    served_model_name: str
    cmd: list[str]
    env: dict
    log_path: Path
    host: str = "127.0.0.1"
    proc: subprocess.Popen | None = None
    started_at: str = ""
    restarts: int = 0
    meta: dict = field(default_factory=dict)  # e.g. the model version, carried into the fleet file
    stopped_pids: set = field(default_factory=set)  # for the GPU check after a stop

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        env = dict(os.environ, **self.env)
        if self.gpus:
            # Only this child sees its GPUs; the parent's environment is untouched.
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self.gpus))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {datetime.now().isoformat(timespec='seconds')} starting: {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def healthy(self, timeout: float = 5.0) -> bool:
        """Both /health and /v1/models answer 200, each within `timeout`."""
        try:
            return all(HTTP.get(f"{self.url}{path}", timeout).status == 200 for path in ("/health", "/v1/models"))
        except HttpError:
            return False

    def stop(self, grace: float = 15.0) -> bool:
        """Stop the group and any descendant that left it; True if nothing is left."""
        if self.proc is None:
            return True
        try:
            strays = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            strays = []
        gone = kill_group(self.proc.pid, grace)
        self.proc.wait()
        for p in strays:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(strays, timeout=10)
        self.stopped_pids.update(p.pid for p in strays)
        self.stopped_pids.add(self.proc.pid)
        return gone and not any(live(p) for p in alive)

    def tail_log(self, n: int = 25) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(deque(f, n))
        except OSError:
            return ""

    def entry(self) -> dict:
        """This server's line in the fleet file (docs/guides/model-fleets.md). `model_dir` and
        `mm_processor_kwargs` tell clients what resizes their images (models/image_processor.py)."""
        return {"url": self.url, "pid": self.proc.pid if self.proc else None, "gpus": self.gpus,
                "model": self.model, "served_model_name": self.served_model_name,
                "started_at": self.started_at, "restarts": self.restarts, "log": str(self.log_path),
                "model_dir": os.path.abspath(self.model) if os.path.isdir(self.model) else None,
                "mm_processor_kwargs": processor_kwargs(self.cmd), **self.meta}


def processor_kwargs(cmd: list[str]) -> dict | None:
    """The --mm-processor-kwargs of a `vllm serve` command line (the last one wins, as in argparse):
    {} without one, None when one is not a JSON object (vLLM would not start)."""
    found = {}
    for i, arg in enumerate(cmd):
        flag, eq, value = arg.partition("=")
        if flag.replace("_", "-") != "--mm-processor-kwargs":
            continue
        if not eq:
            value = cmd[i + 1] if i + 1 < len(cmd) else ""
        try:
            found = json.loads(value)
        except (ValueError, RecursionError):
            found = None
        if not isinstance(found, dict):
            found = None
    return found


def gpu_holders(pids: set[int]) -> list[str]:
    """Where nvidia-smi exists: which of `pids` still hold GPU memory."""
    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30).stdout
    held = []
    for line in out.splitlines():
        pid, _, mem = line.partition(",")
        if pid.strip().isdigit() and int(pid) in pids:
            held.append(f"pid {pid.strip()} holds {mem.strip()}")
    return held


def write_fleet(path: Path, supervisor_pid: int, servers: list[ModelServer], all_pids: list[int]) -> None:
    """Atomically replace the fleet file. `servers` are the healthy ones; `pgids` lists
    every launched group, starting or not, so stop-models can always clean up; `pgid_started`
    when each group's leader started, so that a stale file never stops a group that took a
    reused pid. Its readers are in config/fleet_file.py."""
    doc = {"supervisor_pid": supervisor_pid, "servers": [s.entry() for s in servers], "pgids": all_pids,
           "pgid_started": {str(p): started(p) for p in all_pids}}
    write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode())
