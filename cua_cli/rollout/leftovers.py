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
from ..errors import EnvError, InputError
from ..osworld.allocation import Allocator
from ..runfolder.confined import Refused, read_in, run_root
from ..runfolder.leases import ENV_CLUSTER, record, released_record, still_held
from ..runfolder.records import LOCAL_SERVER

RELEASE_TIMEOUT_S = 30.0
MAX_LOCAL_SERVER = 4096            # bytes: a url and a pid
MAX_RUN_JSON = 4 << 20             # run.json holds the config: more is not one
LOCAL_STOP_S = 60.0                # for it to tear its desktops down


@dataclass
class Leftovers:
    released: list[dict]
    failed: list[tuple[dict, str]]


def release_leftovers(run_path, token: str | None, traj: str | None = None, local_too: bool = True,
                      strict: bool = False) -> Leftovers:
    """Give back every env the run's leases.jsonl still holds (only those of the attempt whose folder
    is `traj`, when given). A loopback server that no longer listens went with the run that started it
    (`env.url: local`), and its desktops with it; `local_too=False` leaves a running local server be.
    `strict`: a leases.jsonl that cannot be read raises UnreadableRun (leases.still_held)."""
    out = Leftovers([], [])
    allocator = Allocator([], token)
    held = still_held(run_path, strict)
    local = _stop_local_server(run_path) if local_too else None
    for lease in held:
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


def token_env(run_path) -> str | None:
    """The name of the environment variable the run's config took its env token from (run.json's
    config.env.token_env); None when it names none. InputError when run.json cannot be read as an
    object: whose token to send could not be told."""
    where = Path(run_path) / "run.json"
    try:
        raw = read_in(run_root(run_path), "run.json", MAX_RUN_JSON)
        meta = json.loads(raw) if len(raw) <= MAX_RUN_JSON else None
    except Refused as e:
        raise InputError(f"{where}: the file {e}; not read") from None
    except OSError as e:
        raise InputError(f"{where}: cannot read: {e.strerror or e}") from None
    except (ValueError, RecursionError):
        meta = None
    if type(meta) is not dict:
        raise InputError(f"{where}: holds no JSON object (of at most {MAX_RUN_JSON >> 20} MiB)")
    for key in ("config", "env"):
        meta = meta.get(key) if type(meta) is dict else None
    name = meta.get("token_env") if type(meta) is dict else None
    return name if type(name) is str and name else None


def _stop_local_server(run_path) -> str | None:
    """The url of the run's local server, once it has stopped (SIGTERM, then its group killed);
    None if the run had none. Only the process recorded as that server is signalled: the file is
    read only as a regular file inside the run folder, never through a link."""
    where = Path(run_path) / LOCAL_SERVER
    try:
        raw = read_in(run_root(run_path), LOCAL_SERVER, MAX_LOCAL_SERVER)
        info = json.loads(raw) if len(raw) <= MAX_LOCAL_SERVER else None
    except FileNotFoundError:
        return None  # the run had no local server
    except Refused as e:
        warn(f"{where}: the file {e}; not read")
        return None
    except OSError as e:
        warn(f"{where}: cannot read: {e.strerror or e}")
        return None
    except (ValueError, RecursionError):
        info = None
    url, pid = (info.get("url"), info.get("pid")) if type(info) is dict else (None, None)
    if type(url) is not str or type(pid) is not int or pid <= 0:
        warn(f"{where}: holds no url string and pid; no local server is stopped")
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
