"""Stop signals: handlers that only count, and the exit status a stopped command owes its caller.

SIGINT (Ctrl-C), SIGTERM (a batch scheduler, `timeout`, systemd, a container
stop) and SIGHUP (a closed terminal) all mean "stop": the first asks for an
orderly end, a second for an end now. Child processes ignore them and let
their parent decide, which a signal sent to the whole process group needs:
otherwise every runner dies mid-write while its parent is still stopping.
"""

import asyncio
import faulthandler
import signal
import sys
import threading
from collections import Counter
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopFlags:
    """Handlers for the stop signals that only count; the main loop acts on the count."""

    def __init__(self, signals=STOP_SIGNALS):
        self.signals = signals
        self.count = 0
        self.first: int | None = None  # the signal that started the stop: it names the exit status
        self._old = {}

    def _handler(self, signum, frame):
        self.count += 1
        if self.first is None:
            self.first = signum

    def install(self) -> None:
        """Put the handlers in place; __exit__ puts back those they replaced."""
        for sig in self.signals:
            old = signal.signal(sig, self._handler)
            self._old.setdefault(sig, old)

    def __enter__(self):
        self.install()
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)

    @property
    def exit_status(self) -> int:
        """128 + the signal's number, as a shell reports a process a signal ended (130, 143, 129)."""
        return 128 + (self.first or signal.SIGINT)


def dump_stacks_on_sigusr1() -> None:
    """`kill -USR1 PID` prints every thread's stack to stderr and the process goes on: what a run
    that seems stuck is doing, without a debugger on the host. A runner's episodes are coroutines on
    its event loop, whose thread's stack shows only the loop's wait: each place where coroutines
    wait follows, with how many wait there."""
    try:
        signal.signal(signal.SIGUSR1, _dump_tasks)  # faulthandler dumps the threads first, then hands it on
    except ValueError:  # not the main thread: the threads' stacks alone
        pass
    for stream in (sys.stderr, sys.__stderr__):  # a captured stderr (a test's) may have no file behind it
        try:
            faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True, chain=True)
            return
        except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is both an OSError and a ValueError
            continue


def _dump_tasks(signum, frame) -> None:
    try:
        loop = asyncio.get_running_loop()  # the handler runs on the main thread: the loop's, if one runs
    except RuntimeError:
        return
    waits = Counter(tuple(_awaiting(task.get_coro())) for task in asyncio.all_tasks(loop))
    out = [f"{n} coroutine(s) waiting at:\n" + "".join(f"  {place}\n" for place in chain)
           for chain, n in waits.most_common()]
    try:
        sys.stderr.write("".join(out))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _awaiting(coro) -> list[str]:
    """Where a coroutine waits, outermost first: the chain of the coroutines it awaits."""
    places = []
    while coro is not None and len(places) < 50:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        places.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return places


def ignore_stop_signals() -> None:
    """For child processes: the parent got the same signal and stops them in order."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised wherever a command is that has nothing to end in order (stats, view,
    export, ...), so that its clean-ups run (temporary files go) before it exits with 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_on_stop_signals() -> None:
    """Every stop signal raises Interrupted; commands that stop in order put their own handlers in place."""
    def handler(signum, frame):
        raise Interrupted(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def serve_until_stopped(server, announce: Callable[[], None]) -> None:
    """`server.serve_forever()` until a stop signal, then the handlers before are put back.
    `announce` runs once the handlers are in: whoever reads it may signal at once."""
    def on_signal(signum, frame):
        # shutdown() waits for serve_forever() to return, so it must run on another thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        announce()
        server.serve_forever()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
