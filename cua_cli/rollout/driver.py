"""`cua rollout`: enqueue the config's pairs, run the runners on their backend, report.

Also `--resume` (same run folder, finished pairs are kept) and `--watch`
(keep serving the queue for task files other processes drop in).
"""

import math
import secrets as secrets_module
import time
from dataclasses import dataclass

from .._util.redact import Redactor
from .._util.signals import StopFlags
from ..config import Config, for_rollout
from ..dart.reloads import CheckpointWatcher
from ..dart.rounds import AdaptiveRounds
from ..dart.sink import dart_sinks, database
from ..errors import UnwritableRun
from ..models import make_model, model_servers
from ..osworld import OSWORLD_EVALUATOR
from ..runfolder.reader import RunReader
from ..runfolder.records import ENV_SERVER_LOG
from ..runfolder.writer import RunDir
from ..stats.figures import run_figures
from ..stats.readers import from_reader
from ..stats.timing import timing_figures
from ..tasks import load_tasks
from .backends import make_backend
from .desktops import DesktopListServer, local_desktops, split_unsupported
from .envserver_process import EnvServerProcess
from .leftovers import LOCAL_SERVER, release_leftovers
from .monitor import Monitor
from .progress import Progress
from .screens import live_screens
from .sinks import SinkFollower

# After the first stop signal, running episodes get this long to end as interrupted; then the
# runners are stopped at once, as on a second signal. A batch scheduler's grace before SIGKILL is
# often 30 s (Slurm's KillWait), so the run folder is whole by then.
STOP_GRACE_S = 20.0


@dataclass
class Outcome:
    run: RunDir
    summary: dict
    timing: dict       # stats.timing's figures
    wall_s: float
    interrupted: bool
    crashed: bool
    exit_status: int   # for an interrupted run: 128 + the signal that stopped it, as a shell reports it


def rollout(cfg: Config, secrets: dict, flags: StopFlags, resume: str | None = None, watch: bool = False) -> Outcome:
    """Play the config's pairs; `flags` count the stop signals since the command began (see cli.rollout)."""
    for_rollout(cfg, watch)  # refuses what cannot be played; model.fleet's servers become the endpoints
    tasks = load_tasks(cfg)
    tasks, refused = split_unsupported(cfg, tasks)
    make_model(cfg, secrets)  # fail here, not in every runner, if e.g. the replay run is missing
    sinks = dart_sinks(cfg, secrets)
    local_token(cfg, secrets)
    redactor = Redactor(secrets.values())
    if resume:
        run = RunDir.open(resume)
        run.check_writable()  # a link planted in the run: stop here, naming it, before anything is done
        release_leftovers(run.path, secrets.get("env"), strict=True)  # what the interrupted invocation left held
    else:
        about = {"scored_as": OSWORLD_EVALUATOR} if cfg.env.kind == "osworld" else {}
        run = RunDir.create(cfg.resolve_path(cfg.run.results_dir), cfg.run.name, redactor.obj(cfg.to_dict()), about)
    if refused:
        run.refuse(refused)
    queue = run.queue(cfg.runner.max_attempts, cfg.runner.lease_ttl_s)
    rounds = None
    if cfg.tasks.adaptive.rounds:
        rounds = AdaptiveRounds(cfg, queue, [t.to_dict() for t in tasks], run.path)
        rounds.start()
    else:
        queue.enqueue([t.to_dict() for t in tasks], cfg.tasks.rollout_n)
    # Claims left by runners of an earlier, killed invocation on this host come back now.
    queue.reclaim()

    local, env_url = local_envs(cfg, run, secrets)
    start = time.monotonic()
    monitor = Monitor(run.path, model_servers(cfg), cfg.runner.sample_s)
    monitor.start()
    progress = Progress(run.path, queue)
    dart_run_id = cfg.storage.mysql.run_id or run.path.name  # the id DART-GUI's trainer is configured with
    follower = watcher = runners = screens = unwritable = None
    stopping, give_up_at = 0, math.inf  # 0 running, 1 ending episodes, 2 stopped at once
    try:
        if cfg.env.kind == "osworld":  # `cua watch` sees the desktops through it: only this process holds their token
            screens = live_screens(run.path, [env_url, *cfg.env.osworld.servers], secrets.get("env"))
        runners = make_backend(cfg, run, env_url, secrets, watch)
        follower = SinkFollower(run.path, sinks, dart_run_id) if sinks else None
        if follower:
            follower.start()
        if cfg.model.reload_from == "mysql":
            watcher = CheckpointWatcher(database(cfg, secrets), dart_run_id, cfg.resolve_path(cfg.model.fleet))
            watcher.start()
        if not flags.count:
            runners.start(lambda: flags.count > 0)
        while runners.running():
            time.sleep(0.25)
            if stopping < 2 and (flags.count >= 2 or time.monotonic() > give_up_at):
                stopping = 2
                progress.write("stopping now" if flags.count >= 2 else
                               f"episodes still running {STOP_GRACE_S:.0f} s after the interrupt: stopping now")
                runners.kill()
                break
            if flags.count == 1 and stopping == 0:
                stopping, give_up_at = 1, time.monotonic() + STOP_GRACE_S
                progress.write("interrupt: ending running episodes (interrupt again to stop at once)")
                runners.request_stop()
            for news in (runners.supervise(), rounds and rounds.tick()):
                if news:
                    progress.write(news)
            progress.update()
        progress.update()
    finally:
        progress.close()
        monitor.stop()
        if screens:
            screens.close()
        if runners is not None:  # envs of runners stopped at once or lost (leases.jsonl), while servers still run
            try:
                release_leftovers(run.path, secrets.get("env"), local_too=False)
            except UnwritableRun as e:  # said once the rest is stopped
                unwritable = e
        if local:
            local.stop()
        if watcher:
            watcher.stop()
        if follower:
            left = follower.finish()
            if left:
                progress.write(f"{left} finished trajectories are not in storage yet (a sink is down): "
                               f"`cua rollout CONFIG --resume {run.path}` passes them on")
    if runners.refused:  # the runner said which file it met; name it here too when a resume would refuse it
        run.check_writable()
        raise UnwritableRun(f"{run.path}: the rollout stopped: a runner met a file or folder of the run it would "
                            "not write through (see above)")
    if unwritable:
        raise unwritable
    summary = run_figures(from_reader(progress.reader.refresh(warn=True)))
    # Every attempt, not only the final ones (their problems were warned about just above).
    timing = timing_figures(run.path, RunReader(run.path, keep_attempts=True).refresh())
    return Outcome(run, summary, timing, time.monotonic() - start, flags.count > 0, runners.crashed, flags.exit_status)


def local_token(cfg: Config, secrets: dict) -> None:
    """The token of the desktops this process starts (env.url local, or osworld.desktops): made here,
    masked as any secret."""
    if cfg.env.kind == "osworld" and cfg.env.url == "local" and ("env" not in secrets or cfg.env.osworld.desktops):
        secrets["env"] = secrets_module.token_urlsafe(24)


def local_envs(cfg: Config, run: RunDir, secrets: dict) -> tuple[object | None, str]:
    """The env server this process starts for the run, if any (started; its `stop` ends it), and the URL
    episodes allocate their envs from."""
    if cfg.env.kind == "osworld" and cfg.env.osworld.desktops:
        local = DesktopListServer(cfg, secrets["env"])
        return local, local.start()
    if cfg.env.url != "local":
        return None, cfg.env.url
    # No request of a live episode comes later than its deadline plus the evaluation and release
    # after it, so an env idle for longer was lost by its client (an allocation answer that never came).
    idle = cfg.runner.episode_timeout_s + 2 * cfg.runner.step_timeout_s
    if cfg.env.kind == "osworld":
        local = local_desktops(cfg, run.path / ENV_SERVER_LOG, secrets)
    else:
        local = EnvServerProcess(cfg.env.local.max_envs, cfg.env.local.port, cfg.env.token_env,
                                 run.path / ENV_SERVER_LOG, idle, agentgym_args(cfg))
    env_url = local.start()
    local.record(run.path / LOCAL_SERVER)  # so `cua envs gc` can stop it should this process be killed
    return local, env_url


def agentgym_args(cfg: Config) -> list[str]:
    """The local env server's AgentGym routes, when the config plays AgentGym's WebArena protocol on it
    (config.for_rollout has checked that it can)."""
    if cfg.env.kind != "agentgym":
        return []
    local = cfg.env.local
    return ["--agentgym-tasks", ",".join(local.agentgym_tasks), "--agentgym-seeds", local.agentgym_seeds]
