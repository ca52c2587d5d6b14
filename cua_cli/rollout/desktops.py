"""OSWorld desktops for a rollout (`env.kind: osworld`): which tasks can be played, and the
desktop sources the rollout itself runs (its own desktop server, or an allocator over a fixed list)."""

import os
import threading

from .._util.diag import warn
from ..config import Config
from ..envserver.desktop_list import DesktopList, ListServer
from ..errors import ConfigError
from ..kinds import DESKTOP_APPS
from ..osworld.apps import needed, on_this_host
from ..osworld.network import needs_network
from ..osworld.support import unsupported
from .envserver_process import EnvServerProcess

# The local desktop server reads its allocation token from here (its own environment only).
LOCAL_TOKEN_ENV = "CUA_LOCAL_DESKTOP_TOKEN"


def split_unsupported(cfg: Config, tasks: list) -> tuple[list, list[dict]]:
    """OSWorld tasks that use a setup step, getter or metric cua lacks, or an app the desktops lack,
    are not played (and never scored 0): they are listed in the run folder and counted apart."""
    refused = refusals(cfg, tasks)
    if not refused:
        return tasks, []
    out = {r["task_id"] for r in refused}
    playable = [t for t in tasks if t.task_id not in out]
    warn(f"{len(refused)} of {len(tasks)} tasks use what cua or these desktops lack; not played, listed in "
         "unsupported.jsonl")
    if not playable:
        raise ConfigError(f"{cfg.source}: tasks: cua can play none of these tasks (see the first: "
                          f"{', '.join(refused[0]['missing'])})")
    return playable, refused


def refusals(cfg: Config, tasks: list) -> list[dict]:
    """`{"task_id", "domain", "missing"}` of each task the run could not play, in task order."""
    if cfg.env.kind != "osworld":
        return []
    apps = set(desktop_apps(cfg))
    offline = own_desktops(cfg) and cfg.env.osworld.network == "none"
    refused = []
    for t in tasks:
        missing = unsupported(t.to_dict())
        missing += [f"app {a!r} (not on these desktops)" for a in needed(t.config) if a not in apps]
        missing += needs_network(t.to_dict()) if offline else []
        if missing:
            refused.append({"task_id": t.task_id, "domain": t.domain, "missing": missing})
    return refused


def desktop_apps(cfg: Config) -> list[str]:
    """The apps the run's desktops have: env.osworld.apps, else this host's for cua's own desktops,
    else all (OSWorld's image)."""
    if cfg.env.osworld.apps is not None:
        return list(cfg.env.osworld.apps)
    return on_this_host() if own_desktops(cfg) else list(DESKTOP_APPS)


def own_desktops(cfg: Config) -> bool:
    """Whether the run plays on cua's own desktops (env.url local, no list of running desktops)."""
    return cfg.env.url == "local" and not cfg.env.osworld.desktops


class DesktopListServer:
    """env.osworld.desktops served to the runners through DART's allocation protocol, in a thread."""

    def __init__(self, cfg: Config, token: str):
        self.server = ListServer(DesktopList(list(cfg.env.osworld.desktops), cfg.env.osworld.reset, token))

    def start(self) -> str:
        threading.Thread(target=self.server.serve_forever, args=(0.2,), daemon=True).start()
        return self.server.url

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def local_desktops(cfg: Config, log_path, secrets: dict) -> EnvServerProcess:
    """`cua env-server --backend desktop` for this run, with an allocation token made for it (unless
    env.token_env names one): the runners' token, masked like any other."""
    token = secrets["env"]
    o = cfg.env.osworld
    lim = o.limits
    limits = (["--memory-limit", str(lim.memory_gib), "--process-limit", str(lim.processes), "--disk-limit",
               str(lim.disk_gib), "--cpu-weight", str(lim.cpu_weight)] if lim.enforce else ["--no-limits"])
    web = [arg for host in o.allow_hosts for arg in ("--allow-host", host)] if o.network == "allow" else []
    return EnvServerProcess(cfg.env.local.max_envs, cfg.env.local.port, LOCAL_TOKEN_ENV, log_path, 0.0,
                          ["--backend", "desktop", "--screen", o.screen, "--warm", str(o.warm), "--session", o.session,
                           *limits, *web], {**os.environ, LOCAL_TOKEN_ENV: token})
