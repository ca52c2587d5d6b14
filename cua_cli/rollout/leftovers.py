"""Envs a run still holds after a crash or `kill -9` (leases.jsonl without a release): listed by
`cua envs list RUN`, given back by `cua envs gc RUN` and by `cua rollout --resume` before it starts.

The envs of a run's own local server (`env.url: local`) go with that server: gc stops it if
it outlived its rollout (its token died with the rollout, so it cannot be asked)."""

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from .._util.budget import Budget
from .._util.diag import warn
from .._util.httpclient import Unreachable
from .._util.procgroup import kill_group
from ..envs.env_cluster import release_env
from ..errors import EnvError
from ..osworld.allocation import Allocator
from ..runfolder.leases import ENV_CLUSTER, record, released_record, still_held

RELEASE_TIMEOUT_S = 30.0
LOCAL_SERVER = "env-server.json"   # in the run folder: the local server's url and pid
LOCAL_STOP_S = 60.0                # for it to tear its desktops down


@dataclass
class Leftovers:
    released: list[dict]
    failed: list[tuple[dict, str]]


def release_leftovers(run_path, token: str | None, traj: str | None = None, local_too: bool = True) -> Leftovers:
    """Give back every env the run's leases.jsonl still holds (only those of the attempt whose folder
    is `traj`, when given). A loopback server that no longer listens went with the run that started it
    (`env.url: local`), and its desktops with it; `local_too=False` leaves a running local server be."""
    out = Leftovers([], [])
    allocator = Allocator([], token)
    local = _stop_local_server(Path(run_path) / LOCAL_SERVER) if local_too else None
    for lease in still_held(run_path):
        if traj is not None and lease.get("traj") != traj:
            continue
        if lease["server"] == local:
            record(run_path, released_record(lease["server"], lease["id"]))
            out.released.append(lease)
            continue
        try:
            if lease.get("protocol") == ENV_CLUSTER:
                release_env(lease["server"], lease["id"], token, Budget(RELEASE_TIMEOUT_S))
            else:
                allocator.release(lease["server"], lease["id"], Budget(RELEASE_TIMEOUT_S))
        except EnvError as e:
            if not isinstance(e.__cause__, Unreachable) or urlsplit(lease["server"]).hostname not in ("127.0.0.1", "localhost", "::1"):
                out.failed.append((lease, str(e)))
                continue
        record(run_path, released_record(lease["server"], lease["id"]))
        out.released.append(lease)
    for lease, why in out.failed:
        warn(f"{lease['server']}: {lease['id']} is still held: {why}")
    return out


def _stop_local_server(path: Path) -> str | None:
    """The url of the run's local server, once it has stopped (SIGTERM, then its group killed);
    None if the run had none. Only the process recorded as that server is signalled."""
    try:
        info = json.loads(path.read_text())
        url, pid = info["url"], info["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        proc = psutil.Process(pid)
        if "env-server" in proc.cmdline():
            proc.terminate()
            try:
                proc.wait(LOCAL_STOP_S)
            except psutil.TimeoutExpired:
                kill_group(pid, 0.0)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        pass
    return url
