"""Runner processes, each with one thread per concurrent episode.

Episodes spend their time waiting on HTTP, so threads carry the concurrency
and processes spread the CPU work (PNG handling, JSON) over the cores: 64
concurrent episodes need a few processes, not 64. The main process
supervises: it restarts a runner that died (its claims go back to the queue),
and turns Ctrl-C into an orderly stop. Signal handlers only set flags.
"""

import multiprocessing as mp
import os
import signal
import threading
import time
from dataclasses import dataclass

from .agents.uitars import UITarsAgent
from .config import Config
from .envs.cluster import EnvCluster, EnvSettings
from .models import make_provider
from .models.routing import Router
from .orphans import watch_parent
from .redact import Redactor
from .rundir import RunDir
from .runner import Episode, Limits, bad_task_record


@dataclass
class WorkerSpec:
    cfg: Config
    run_path: str
    env_url: str
    secrets: dict
    threads: int
    watch: bool
    parent_pid: int


def worker_main(spec: WorkerSpec, stop, router) -> None:
    """One runner process: `spec.threads` episode slots sharing one queue."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides how to stop
    cfg = spec.cfg
    run = RunDir.open(spec.run_path)
    queue = run.queue(cfg.runner.max_attempts, cfg.runner.lease_ttl_s)
    env = EnvCluster(EnvSettings(spec.env_url, spec.secrets.get("env"), cfg.env.os, cfg.env.timeout_s,
                                 cfg.env.retries, cfg.env.allocate_wait_s))
    provider = make_provider(cfg, spec.secrets, router)
    agent = UITarsAgent(cfg.agent.coord_mode, cfg.agent.history_images, cfg.agent.language)
    limits = Limits(cfg.runner.max_steps, cfg.runner.step_timeout_s, cfg.runner.episode_timeout_s,
                    cfg.agent.parse_retries)
    redact = Redactor(spec.secrets.values()).text
    finished = threading.Event()
    last_reclaim = [0.0]
    reclaim_lock = threading.Lock()

    def heartbeat():
        while not finished.wait(cfg.runner.lease_ttl_s / 4):
            queue.heartbeat()

    def maybe_reclaim():
        with reclaim_lock:  # one scan per process every few seconds is plenty
            if time.monotonic() - last_reclaim[0] < min(2.0, cfg.runner.lease_ttl_s / 4):
                return
            last_reclaim[0] = time.monotonic()
        queue.reclaim()

    def slot():
        while not stop.is_set():
            item = queue.claim()
            if item is None:
                if not spec.watch and queue.idle():
                    return
                maybe_reclaim()
                stop.wait(cfg.runner.poll_s)
                continue
            try:
                episode = Episode(item, run, env, provider, agent, limits, stop.is_set, redact,
                                  cfg.model.record_prompt)
            except ValueError as e:  # a malformed task file: fail it, never leave it claimed
                queue.finish(item, bad_task_record(item, e), give_up=True)
                continue
            rec = episode.run_episode()
            interrupted = rec["stop_reason"] == "interrupted"
            queue.finish(item, rec, retry=rec["outcome"] == "error", count_error=not interrupted,
                         give_up=rec["stop_reason"] == "bad_task")

    threading.Thread(target=heartbeat, daemon=True).start()
    # An orphaned runner stops like on Ctrl-C; `stop` is shared, so every runner follows.
    watch_parent(spec.parent_pid, stop.set, finished)
    slots = [threading.Thread(target=slot) for _ in range(spec.threads)]
    for t in slots:
        t.start()
    for t in slots:
        t.join()
    finished.set()


class Pool:
    """Starts, watches and stops the runner processes of one rollout."""

    MAX_RESTARTS_PER_PROCESS = 3

    def __init__(self, cfg: Config, run: RunDir, env_url: str, secrets: dict, watch: bool):
        self.ctx = mp.get_context("spawn")  # no inherited threads or locks from the parent
        self.stop = self.ctx.Event()
        n = cfg.runner.processes or min(cfg.runner.num_envs, os.cpu_count() or 1)
        n = min(n, cfg.runner.num_envs)
        # Spread num_envs exactly: the first processes take one slot more.
        self.slots = [cfg.runner.num_envs // n + (i < cfg.runner.num_envs % n) for i in range(n)]
        self.specs = [WorkerSpec(cfg, str(run.path), env_url, secrets, k, watch, os.getpid()) for k in self.slots]
        self.queue = run.queue(cfg.runner.max_attempts, cfg.runner.lease_ttl_s)
        self.router = Router(len(cfg.model.endpoints), self.ctx) if cfg.model.provider == "openai" else None
        self.procs: list = [None] * n
        self.restarts = 0
        self.crashed = False

    def _spawn(self, i: int) -> None:
        p = self.ctx.Process(target=worker_main, args=(self.specs[i], self.stop, self.router), name=f"cua-runner-{i}")
        p.start()
        self.procs[i] = p

    def start(self) -> None:
        for i in range(len(self.specs)):
            self._spawn(i)

    def running(self) -> bool:
        """Some runner is alive or not yet reaped."""
        return any(p is not None for p in self.procs)

    def supervise(self) -> None:
        """Reap runners that died; restart them while the run goes on."""
        for i, p in enumerate(self.procs):
            if p is None or p.is_alive():
                continue
            p.join()
            self.procs[i] = None
            if p.exitcode == 0:
                continue
            self.queue.reclaim(dead_pids={p.pid})
            if self.stop.is_set():
                continue
            if self.restarts >= self.MAX_RESTARTS_PER_PROCESS * len(self.procs):
                self.crashed = True
                self.stop.set()
                continue
            self.restarts += 1
            self._spawn(i)

    def request_stop(self) -> None:
        self.stop.set()

    def kill(self) -> None:
        """Second Ctrl-C: stop at once. Writes are whole-line or atomic renames, so nothing tears."""
        self.stop.set()
        pids = set()
        for p in self.procs:
            if p is not None and p.is_alive():
                pids.add(p.pid)
                p.kill()
        for p in self.procs:
            if p is not None:
                p.join()
        self.queue.reclaim(dead_pids=pids, count_error=False)
