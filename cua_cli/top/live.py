"""The `cua top` loop: a frame redrawn in place on a terminal, one line per change in a log.

On a terminal the frame is redrawn every `interval` seconds (rich's Live,
not on the alternate screen, so the last frame stays when it ends). When
stdout is not a terminal (a log, a pipe) redrawing is noise: a line is
printed when the figures move, and the whole frame once at the end. Either
way it returns when the run has ended (watch.py says when); Ctrl-C is the
CLI's to turn into exit status 130.
"""

import time
from typing import Callable

from rich.console import Console
from rich.live import Live

from .frame import finished, frame, line
from .watch import RunWatch

# The live view's links: the page of all running desktops, and each one's page by (task, sample, attempt).
Links = Callable[[], tuple[str, dict[tuple[str, int, int], str]]]


class _Refresh:
    """A RunWatch's snapshots, with the live view's links when there are any."""

    def __init__(self, path, window: float, links: Links | None):
        self.watch, self.links = RunWatch(path, window), links

    def __call__(self) -> dict:
        snap = self.watch.refresh()
        if self.links is not None:
            snap["live_view"], snap["links"] = self.links()
        return snap


def once(path, window: float, console: Console, links: Links | None = None) -> dict:
    """Print one frame of the run at `path`; its snapshot."""
    snap = _Refresh(path, window, links)()
    console.print(frame(snap))
    return snap


def follow(path, interval: float, window: float, console: Console, links: Links | None = None) -> dict:
    """Show the run at `path` until it has ended; its last snapshot."""
    refresh = _Refresh(path, window, links)
    snap = refresh()
    if not console.is_terminal:
        return _log(refresh, snap, interval, console)
    with Live(frame(snap, interval), console=console, auto_refresh=False, transient=False) as live:
        while not snap["ended"]:
            _pause(snap, interval)
            snap = refresh()
            live.update(frame(snap, interval), refresh=True)
    return snap


def _log(refresh: _Refresh, snap: dict, interval: float, console: Console) -> dict:
    last = None
    if snap.get("live_view"):
        console.print(f"live view of every running desktop: {snap['live_view']}", markup=False, highlight=False,
                      soft_wrap=True)
    while True:
        state = (snap["status"], finished(snap), snap["queue"]["claimed"], snap["errors"])
        if state != last:
            console.print(line(snap), markup=False, highlight=False, soft_wrap=True)
            last = state
        if snap["ended"]:
            break
        _pause(snap, interval)
        snap = refresh()
    console.print(frame(snap))
    return snap


def _pause(snap: dict, interval: float) -> None:
    """Sleep what is left of `interval` after the refresh that made `snap`."""
    time.sleep(max(0.05, interval - (time.time() - snap["now"])))
