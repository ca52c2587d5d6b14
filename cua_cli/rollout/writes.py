"""An attempt's run-folder writes, off the event loop.

On this machine's ext4, creating a file costs the writer 0.35-1 ms of kernel
time whatever its size (docs/design/benchmarks.md), every step's screenshot
is a new file, and one runner's loop carries hundreds of steps a second: were
the loop to write them, every episode would wait on the disk. So a small pool
of threads does each step's writes while the loop goes on with others: the
step's screenshot (and tree), then its line, in one hand-off when the step
ends. An episode awaits it before its next step, so its files appear in order
(a file before the line that names it), and a write refused (a link planted
in the run) still ends that attempt as `runner_error`. No file is fsynced:
the run's end checks what it wrote, as it always has.
"""

from typing import Callable, Protocol

from .._util.workers import Workers
from ..runfolder.writer import TrajWriter, a11y_tree_name, screenshot_name

# Threads that write: two keep the disk busy while one waits on it; the loop's work per step is the
# same whatever their number.
WRITE_THREADS = 2


class AttemptWriter(Protocol):
    """Where an episode's steps go: its folder (AttemptWrites), or a stream to the run's owner (Ray).
    A step's screenshot and tree are named at once and written with its line, in one hand-off."""

    def screenshot(self, step: int, png: bytes) -> str: ...
    def rereader(self, name: str) -> Callable[[], bytes] | None: ...  # reads a file named here back, where it can
    def a11y_tree(self, step: int, xml: str) -> str: ...
    async def step(self, record: dict) -> None: ...
    def lease(self, record: dict) -> None: ...   # called by env code: on the loop, or in a blocking env's thread
    def video(self, mp4: bytes) -> str: ...
    def takeover(self) -> str | None: ...
    def holding(self, on: bool) -> None: ...


class Writes:
    """The write threads of one runner."""

    def __init__(self, threads: int = WRITE_THREADS):
        self.workers = Workers(threads, "cua-write")

    def attempt(self, traj: TrajWriter) -> "AttemptWrites":
        return AttemptWrites(traj, self.workers)

    def close(self) -> None:
        self.workers.close()


class AttemptWrites:
    """A TrajWriter whose steps are written in the runner's write threads: each step's files, then its line."""

    def __init__(self, traj: TrajWriter, workers: Workers):
        self.traj, self.workers = traj, workers
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
        await self.workers.run(self.traj.step, record, files)

    def lease(self, record: dict) -> None:
        self.traj.lease(record)  # a line appended to leases.jsonl: two an attempt, not worth a hand-off

    def video(self, mp4: bytes) -> str:
        return self.traj.video(mp4)  # from a blocking env's thread (OSWorld's recording)

    def takeover(self) -> str | None:
        return self.traj.takeover()  # a missing file's open, once a step

    def holding(self, on: bool) -> None:
        self.traj.holding(on)
