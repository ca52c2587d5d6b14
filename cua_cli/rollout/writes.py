"""An attempt's run-folder writes: on the event loop while the disk keeps up, in threads once it does not.

Every step writes its screenshot (and tree) as a new file, then its line in
traj.jsonl. On this machine that costs the loop 0.1-0.3 ms a step, and
handing it to a write thread adds 0.14 ms of CPU a step at 1,024 episodes (the
interpreter lock's hand-offs and wake-ups, docs/design/runner-loop.md). So a
runner writes on its loop until one step's writes take longer than
SLOW_WRITE_S, or their running mean passes SLOW_MEAN_S (a disk that stalls, a
network file system, ext4 walking freshly deleted inodes): from then on, for
the rest of the run, a small pool of threads writes while the loop goes on
with the other episodes. Either way a step's files and line are written
together when the step ends, and the episode goes on only after them, so its
files appear in order (a file before the line that names it), and a write
refused (a link planted in the run) still ends that attempt as
`runner_error`. No file is fsynced: the run's end checks what it wrote, as
it always has.
"""

import time
from typing import Callable, Protocol

from .._util.workers import Workers
from ..runfolder.writer import TrajWriter, a11y_tree_name, screenshot_name

# Threads that write once the disk is slow: two keep it busy while one waits on it.
WRITE_THREADS = 2
SLOW_WRITE_S = 0.05  # one step's writes held the loop this long: a disk that stalls
SLOW_MEAN_S = 0.002  # or their running mean (over about 16 steps) this long: a slow one


class AttemptWriter(Protocol):
    """Where an episode's steps go: its folder (AttemptWrites), or a stream to the run's owner (Ray).
    A step's screenshot and tree are named at once and written with its line when the step ends."""

    def screenshot(self, step: int, png: bytes) -> str: ...
    def rereader(self, name: str) -> Callable[[], bytes] | None: ...  # reads a file named here back, where it can
    def a11y_tree(self, step: int, xml: str) -> str: ...
    async def step(self, record: dict) -> None: ...
    def lease(self, record: dict) -> None: ...   # called by env code: on the loop, or in a blocking env's thread
    def video(self, mp4: bytes) -> str: ...
    def takeover(self) -> str | None: ...
    def holding(self, on: bool) -> None: ...


class Writes:
    """Where one runner's steps are written: on its loop, then in threads from the first slow write on."""

    def __init__(self, threads: int = WRITE_THREADS):
        self.threads = threads
        self.workers: Workers | None = None
        self.mean_s = 0.0

    def attempt(self, traj: TrajWriter) -> "AttemptWrites":
        return AttemptWrites(traj, self)

    async def step(self, traj: TrajWriter, record: dict, files: list[tuple[str, bytes]]) -> None:
        if self.workers is not None:
            await self.workers.run(traj.step, record, files)
            return
        t = time.monotonic()
        try:
            traj.step(record, files)
        finally:
            took = time.monotonic() - t
            self.mean_s += (took - self.mean_s) / 16
            if took > SLOW_WRITE_S or self.mean_s > SLOW_MEAN_S:
                self.workers = Workers(self.threads, "cua-write")

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()


class AttemptWrites:
    """A TrajWriter whose steps are written where the runner's Writes say: each step's files, then its line."""

    def __init__(self, traj: TrajWriter, writes: Writes):
        self.traj, self.writes = traj, writes
        self.files: list[tuple[str, bytes]] = []  # named, written with the next line

    def screenshot(self, step: int, png: bytes) -> str:
        self.files.append((screenshot_name(step), png))  # the bytes the env sent: no re-encoding
        return self.files[-1][0]

    def rereader(self, name: str) -> Callable[[], bytes]:
        def reread() -> bytes:  # on the loop, like the hand-offs: the file is still to write, or written
            pending = dict(self.files).get(name)
            return pending if pending is not None else self.traj.read_back(name)
        return reread

    def a11y_tree(self, step: int, xml: str) -> str:
        self.files.append((a11y_tree_name(step), xml.encode()))  # the env checked it parses: valid UTF-8
        return self.files[-1][0]

    async def step(self, record: dict) -> None:
        files, self.files = self.files, []
        await self.writes.step(self.traj, record, files)

    def lease(self, record: dict) -> None:
        self.traj.lease(record)  # a line appended to leases.jsonl: two an attempt, not worth a hand-off

    def video(self, mp4: bytes) -> str:
        return self.traj.video(mp4)  # from a blocking env's thread (OSWorld's recording)

    def takeover(self) -> str | None:
        return self.traj.takeover()  # a missing file's open, once a step

    def holding(self, on: bool) -> None:
        self.traj.holding(on)
