"""The local backend: runner processes on this host.

Processes spread the CPU work (HTTP, JSON, files) over the cores once there
are many episode slots; each runs one Runner (one event loop) with its share
of the slots.
The main process supervises: it restarts a runner that died (its claims go
back to the queue). Signal handlers only set flags; runners ignore the stop
signals and stop when told, or when the rollout is gone.
"""

import math
import multiprocessing as mp
import os
import sys
from dataclasses import replace

from ..._util.signals import dump_stacks_on_sigusr1, ignore_stop_signals
from ...config import Config
from ...errors import UnwritableRun
from ...models import shared_state
from ...runfolder.writer import RunDir
from ..runner import Runner, RunnerSpec, refused_stop

# A runner that stopped on a file or folder of the run it would not write through exits with this:
# the rollout stops rather than start it again (it would meet the same file).
EXIT_REFUSED = UnwritableRun.exit_code

# Episode slots worth a runner process of their own: waiting costs a loop nothing, but at about 1 ms
# of CPU per step, 256 slots of 1-second steps keep one interpreter a quarter busy.
SLOTS_PER_PROCESS = 256


def default_processes(num_envs: int) -> int:
    """Enough processes for the slots' CPU work, never more than the cores: the loops carry the waiting."""
    return max(1, min(os.cpu_count() or 1, math.ceil(num_envs / SLOTS_PER_PROCESS)))


def _process_main(spec: RunnerSpec, parent_pid: int, stop_flag, shared) -> None:
    ignore_stop_signals()  # the main process got the same signal and decides how to stop
    dump_stacks_on_sigusr1()
    try:
        runner = Runner(spec, shared)
        runner.run(_StopFlag(stop_flag, parent_pid))
        refused = runner.refused is not None
    except UnwritableRun as e:  # its queue's folders, as it opened them
        refused_stop(e)
        refused = True
    if refused:
        sys.exit(EXIT_REFUSED)


class _StopFlag:
    """The rollout's stop as its runner processes read it, where it is whenever asked: a runner that
    has just claimed a pair sees a stop another runner has already acted on.

    The flag is plain shared memory, read without a lock: a runner killed at any moment can leave no
    lock held behind it (a multiprocessing.Event can, and its set() then waits forever). An orphaned
    runner stops as on Ctrl-C: its parent (the rollout) is gone."""

    def __init__(self, flag, parent_pid: int):
        self.flag, self.parent_pid = flag, parent_pid

    def is_set(self) -> bool:
        return bool(self.flag.value) or os.getppid() != self.parent_pid


class _InSharedMemory:
    """Objects every runner process uses, in shared memory made before the processes start."""

    def __init__(self, ctx):
        self.ctx = ctx

    def share(self, cls, *args):
        return cls(*args, ctx=self.ctx)


class LocalProcesses:
    """Starts, watches and stops the runner processes of one rollout."""

    MAX_RESTARTS_PER_PROCESS = 3

    def __init__(self, cfg: Config, run: RunDir, env_url: str, secrets: dict, watch: bool):
        self.ctx = mp.get_context("spawn")  # no inherited threads or locks from the parent
        self.stop = self.ctx.RawValue("b", 0)  # set once, never cleared; see _process_main
        n = min(cfg.runner.processes or default_processes(cfg.runner.num_envs), cfg.runner.num_envs)
        # Spread num_envs exactly: the first processes take one slot more.
        self.slots = [cfg.runner.num_envs // n + (i < cfg.runner.num_envs % n) for i in range(n)]
        spec = RunnerSpec(cfg, str(run.path), env_url, secrets, 0, watch)
        self.specs = [replace(spec, slots=k) for k in self.slots]
        self.queue = run.queue(cfg.runner.max_attempts, cfg.runner.lease_ttl_s)
        self.shared = shared_state(cfg, _InSharedMemory(self.ctx))  # e.g. endpoint loads, shared by every runner
        self.procs: list = [None] * n
        self.restarts = 0
        self.crashed = False
        self.refused = False  # a runner stopped on a file or folder of the run it would not write through

    def _spawn(self, i: int) -> None:
        p = self.ctx.Process(target=_process_main, args=(self.specs[i], os.getpid(), self.stop, self.shared),
                             name=f"cua-runner-{i}")
        p.start()
        self.procs[i] = p

    def start(self, stopping) -> None:
        for i in range(len(self.specs)):
            self._spawn(i)

    def running(self) -> bool:
        """Some runner is alive or not yet reaped."""
        return any(p is not None for p in self.procs)

    def supervise(self) -> None:
        """Reap runners that died; restart them while the run goes on (nothing to tell the user)."""
        for i, p in enumerate(self.procs):
            if p is None or p.is_alive():
                continue
            p.join()
            self.procs[i] = None
            if p.exitcode == 0:
                continue
            if p.exitcode == EXIT_REFUSED:  # it said which file; its claims stay for a --resume
                self.refused = True
                self.stop.value = 1
                continue
            self.queue.reclaim(dead_pids={p.pid})
            if self.stop.value:
                continue
            if self.restarts >= self.MAX_RESTARTS_PER_PROCESS * len(self.procs):
                self.crashed = True
                self.stop.value = 1
                continue
            self.restarts += 1
            self._spawn(i)

    def request_stop(self) -> None:
        self.stop.value = 1

    def kill(self) -> None:
        """Second stop signal: stop at once. Writes are whole-line or atomic renames, so nothing tears."""
        self.stop.value = 1
        pids = set()
        for p in self.procs:
            if p is not None and p.is_alive():
                pids.add(p.pid)
                p.kill()
        for p in self.procs:
            if p is not None:
                p.join()
        self.queue.reclaim(dead_pids=pids, count_error=False)
