"""The rollout's load samples: each model server's /metrics and this host's GPUs, a few times a
second, appended to the run folder's metrics.jsonl (docs/reference/run-folder.md).

Counters are kept as the servers report them (cumulative); readers take differences. A server
without /metrics (or whose answer is not Prometheus text) is noted once and not asked again; one
that does not answer gets an `"up": false` line, so a gap in its curve is a gap, not a zero.
"""

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from .._util.diag import note
from .._util.httpclient import BadStatus, HttpError
from ..fleet import metrics
from ..fleet.nvml import Gpus
from ..runfolder.confined import open_writable
from ..runfolder.records import METRICS

NO_ROUTE = (404, 405, 501)  # a server that keeps no metrics


def server_root(endpoint: str) -> str:
    """Where a model endpoint's server answers /metrics: its URL without /v1 and without a password."""
    u = urlsplit(endpoint.rstrip("/"))
    path = u.path[:-3] if u.path.endswith("/v1") else u.path
    return urlunsplit((u.scheme, u.hostname + (f":{u.port}" if u.port else ""), path, "", ""))


class Monitor:
    def __init__(self, run_path: Path, endpoints: list[str], interval_s: float):
        self.path = Path(run_path) / METRICS
        self.servers = sorted({server_root(e) for e in endpoints})
        self.interval_s = interval_s
        # A busy vLLM answers /metrics late (its engine holds the GIL): late is not down.
        self.timeout_s = max(1.0, min(5.0, interval_s * 4))
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.gpus = None
        self.out = None

    def start(self) -> None:
        if not self.interval_s:
            return
        self.gpus = Gpus()
        if not self.servers and not self.gpus.count:
            return
        # Opened here, as every run file is written (a link there: UnwritableRun, before the run starts), and
        # kept: the samples go to this file however the folder changes meanwhile.
        try:
            fd = open_writable(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except BaseException:
            self.gpus.close()
            raise
        self.out = os.fdopen(fd, "a", encoding="utf-8")
        self.thread = threading.Thread(target=self._run, name="cua-monitor", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread:
            self.thread.join(timeout=self.timeout_s + 1)
        if self.gpus:
            self.gpus.close()

    def _run(self) -> None:
        pool = ThreadPoolExecutor(max_workers=min(16, max(1, len(self.servers))), thread_name_prefix="cua-metrics")
        with self.out as out:
            while True:
                t = time.time()
                lines = list(pool.map(self._server_line, list(self.servers), [t] * len(self.servers)))
                lines += [{"t": round(t, 3), **g} for g in self.gpus.sample()]
                out.writelines(json.dumps(line) + "\n" for line in lines if line)
                out.flush()
                if self.stop_event.wait(max(0.0, self.interval_s - (time.time() - t))):
                    break
        pool.shutdown(wait=False)

    def _server_line(self, server: str, t: float) -> dict | None:
        try:
            load = metrics.load(metrics.fetch(server, self.timeout_s))
        except BadStatus as e:
            if e.response.status in NO_ROUTE:
                self._drop(server, f"its /metrics answers HTTP {e.response.status}")
                return None
            return {"t": round(t, 3), "server": server, "up": False}  # e.g. 503 while it loads
        except HttpError:  # no answer, or half of one: down for now
            return {"t": round(t, 3), "server": server, "up": False}
        except Exception as e:  # ValueError and whatever else a hostile answer makes the parser raise
            self._drop(server, f"its /metrics is not Prometheus text ({type(e).__name__})")
            return None
        return {"t": round(t, 3), "server": server, "up": True, **load}

    def _drop(self, server: str, why: str) -> None:
        if server in self.servers:
            self.servers.remove(server)
            note(f"model server {server}: {why}; its load is not sampled")
