"""An attempt's run-folder writes, off the event loop.

On this machine's ext4, creating a file costs the writer 0.35-1 ms of kernel
time whatever its size (docs/design/benchmarks.md), every step's screenshot
is a new file, and one runner's loop carries hundreds of steps a second: were
the loop to write them, every episode would wait on the disk. So a small pool
of threads does each step's writes while the loop goes on with others. An
episode awaits each write before its next, so its files appear in order (a
step's screenshot before the line that names it), and a write refused (a link
planted in the run) still ends that attempt as `runner_error`. No file is
fsynced: the run's end checks what it wrote, as it always has.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from ..runfolder.writer import TrajWriter

# Threads that write: two keep the disk busy while one waits on it; the loop's work per step is the
# same whatever their number.
WRITE_THREADS = 2


class AttemptWriter(Protocol):
    """Where an episode's steps go: its folder (AttemptWrites), or a stream to the run's owner (Ray)."""

    async def screenshot(self, step: int, png: bytes) -> str: ...
    async def a11y_tree(self, step: int, xml: str) -> str: ...
    async def step(self, record: dict) -> None: ...
    def lease(self, record: dict) -> None: ...   # called by env code: on the loop, or in a blocking env's thread
    def video(self, mp4: bytes) -> str: ...
    def takeover(self) -> str | None: ...
    def holding(self, on: bool) -> None: ...


class Writes:
    """The write threads of one runner."""

    def __init__(self, threads: int = WRITE_THREADS):
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="cua-write")

    def attempt(self, traj: TrajWriter) -> "AttemptWrites":
        return AttemptWrites(traj, self.pool)

    def close(self) -> None:
        self.pool.shutdown()


class AttemptWrites:
    """A TrajWriter whose step writes happen in the runner's write threads."""

    def __init__(self, traj: TrajWriter, pool: ThreadPoolExecutor):
        self.traj, self.pool = traj, pool

    async def _off(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    async def screenshot(self, step: int, png: bytes) -> str:
        return await self._off(self.traj.screenshot, step, png)

    async def a11y_tree(self, step: int, xml: str) -> str:
        return await self._off(self.traj.a11y_tree, step, xml)

    async def step(self, record: dict) -> None:
        await self._off(self.traj.step, record)

    def lease(self, record: dict) -> None:
        self.traj.lease(record)  # a line appended to leases.jsonl: two an attempt, not worth a hand-off

    def video(self, mp4: bytes) -> str:
        return self.traj.video(mp4)  # from a blocking env's thread (OSWorld's recording)

    def takeover(self) -> str | None:
        return self.traj.takeover()  # a missing file's open, once a step

    def holding(self, on: bool) -> None:
        self.traj.holding(on)
