"""`cua demo`: a person solves one task of a config on a fresh desktop, and the run folder keeps it as
an episode (recording.py), scored by the task's evaluator.

The run folder is a rollout's: one pair scheduled and claimed, its attempt's steps, leases and
episode line, so `cua stats`, `cua view`, `cua export` and a replay read it as any run. The
desktops are the config's (env.url local starts them here); the page is `cua watch`'s, served by
this process for the run, with the screen through the run's own relay, as a rollout does.
"""

import threading
from dataclasses import dataclass

from .._util.diag import warn
from .._util.redact import Redactor
from .._util.signals import StopFlags
from ..agents import make_agent
from ..config import Config
from ..envs import make_env
from ..errors import ConfigError, CuaError, EnvError, InputError
from ..osworld import OSWORLD_EVALUATOR
from ..rollout.driver import local_envs, local_token
from ..rollout.runner import file_attempt
from ..rollout.screens import live_screens
from ..runfolder import takeover
from ..runfolder.records import error_line
from ..runfolder.writer import RunDir
from ..tasks import load_tasks
from ..watch.episodes import find, running
from ..watch.server import WatchServer, novnc_dir
from .recording import Demonstration

PAGE_LINGER_S = 5.0  # a page asks every second


@dataclass
class Demo:
    run: RunDir
    episode: dict       # its episode line
    interrupted: bool
    exit_status: int


def record_demo(cfg: Config, secrets: dict, task_id: str, flags: StopFlags, host: str, port: int,
                show) -> Demo:
    """Record a person's demonstration of `task_id`; `show(url)` once the page has the desktop."""
    if cfg.env.kind != "osworld":
        raise ConfigError(f"{cfg.source}: env.kind: a demonstration is recorded on a desktop (osworld), "
                          f"not on {cfg.env.kind}")
    if cfg.agent.observation != "screenshot":
        raise ConfigError(f"{cfg.source}: agent.observation: a demonstration records screenshots only, not "
                          f"{cfg.agent.observation}")
    agent = make_agent(cfg)
    if not hasattr(agent, "answer_for"):
        raise ConfigError(f"{cfg.source}: agent.kind: {cfg.agent.kind} cannot write a person's actions as its "
                          "answers; use uitars or osworld")
    novnc = novnc_dir()
    if novnc is None:
        raise InputError("the demonstration page needs Debian's novnc (/usr/share/novnc): run scripts/setup_env.sh")
    tasks = [t for t in load_tasks(cfg) if t.task_id == task_id]
    if not tasks:
        raise InputError(f"--task {task_id!r:.200}: no such task in {cfg.source}'s tasks")
    task = tasks[0]
    local_token(cfg, secrets)
    redact = Redactor(secrets.values())
    run = RunDir.create(cfg.resolve_path(cfg.run.results_dir), cfg.run.name + "-demo",
                        redact.obj(cfg.to_dict()), {"scored_as": OSWORLD_EVALUATOR, "demo": True})
    queue = run.queue(1, cfg.runner.lease_ttl_s)
    queue.enqueue([task.to_dict()], 1)
    item = queue.claim()
    local = screens = server = None
    rec = None
    try:
        local, env_url = local_envs(cfg, run, secrets)
        screens = live_screens(run.path, [env_url, *cfg.env.osworld.servers], secrets.get("env"))
        server = WatchServer(str(run.path), host, port, novnc, demo=True)
        threading.Thread(target=server.serve_forever, daemon=True, name="demo-page").start()
        env = make_env(cfg, env_url, secrets)
        chosen = {}

        def hold():
            if "episode" not in chosen:
                found = find(running(str(run.path)), task.task_id)
                if len(found) != 1:
                    raise EnvError(f"the demonstration's desktop is not in {run.path}/leases.jsonl")
                chosen["episode"] = found[0]
            if problem := server.take(chosen["episode"], takeover.HOLD):
                raise EnvError(f"cannot hand the desktop to the page: {problem}")

        with run.traj(item) as traj:
            demo = Demonstration(item, task, traj, env, agent, cfg.runner.step_timeout_s, lambda: flags.count > 0,
                                 redact.text, hold, queue.heartbeat, cfg.runner.lease_ttl_s / 4)
            rec = demo.run(lambda: show(server.url(chosen["episode"])))
        server.told_ended.wait(PAGE_LINGER_S)  # the page says the demonstration ended, rather than lose its server
    except CuaError as e:  # before the demonstration began: its pair is filed, never left claimed
        if rec is None:
            rec = error_line(item, "env_error", redact.text(str(e)))
        raise
    finally:
        if rec is not None:
            file_attempt(queue, item, {**rec, "lane": "demo", "claim_wait_s": 0.0})
        if server is not None:
            server.shutdown()
            server.server_close()
        if screens:
            screens.close()
        if local:
            local.stop()
    if rec.get("release_error"):
        warn(f"the desktop was not released: {rec['release_error']}")
    return Demo(run, rec, flags.count > 0, flags.exit_status)
