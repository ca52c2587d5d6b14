"""Desktops leased and desktops kept warm.

`limit` bounds the desktops that exist at once (leased + warm + starting), so a warm pool never
pushes the machine past what it was sized for. Up to `warm` are kept ready (session up, first
screenshot answered) by one background thread, which builds one at a time (a desktop start is
CPU-bound and a 2-core machine gains nothing from building several at once). A lease is reserved
under the lock before any desktop is built, so the quota holds under concurrent requests; a
released desktop is torn down at once (every process gone, its home removed) and the warm pool
refills behind it.

No desktop is started while the host is short of memory or disk (allocate answers PoolFull with
the reason, as a full pool: the client waits or tries another server). A watcher looks at the
leased desktops' limits twice a second and stops one that hit a limit even while nobody asks it
anything (a fork bomb's /execute never returns by itself).
"""

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cua_cli._util.allowlist import HostAllowList
from cua_cli.envserver.desktop.desktop import LocalDesktop
from cua_cli.envserver.desktop.limits import Cgroups, DesktopQuota, host_shortage

log = logging.getLogger(__name__)


WATCH_S = 0.5  # how often leased desktops' limits are looked at
SHORT_RETRY_S = 5.0  # how often a warm pool held back by a short host looks again


class PoolFull(Exception):
    """Every desktop the limit allows is leased, or the host has no room for another."""


@dataclass
class Lease:
    desktop: LocalDesktop
    token: str
    started_at: float = field(default_factory=time.time)


class DesktopPool:
    def __init__(self, workdir: Path, host: str, screen: tuple[int, int], limit: int, warm: int,
                 verbose: bool = False, session: str = "gnome", limits: DesktopQuota = DesktopQuota(enforce=False),
                 cgroups: Cgroups | None = None, web: HostAllowList | None = None):
        self.workdir, self.host, self.screen, self.verbose, self.session = workdir, host, screen, verbose, session
        self.limits, self.cgroups, self.web = limits, cgroups, web
        self.limit, self.warm_target = limit, min(warm, limit)
        self.leases: dict[str, Lease] = {}
        self.warm: list[LocalDesktop] = []
        self._reserved = 0  # allocations between reservation and lease
        self._building = 0
        self._closing = False
        self._cond = threading.Condition()
        self._filler = threading.Thread(target=self._fill, name="desktop-warm-pool", daemon=True)
        self._filler.start()
        self._watcher = threading.Thread(target=self._watch, name="desktop-limits", daemon=True)
        self._watcher.start()

    def _new_desktop(self) -> LocalDesktop:
        return LocalDesktop(self.workdir, self.host, self.screen, self.verbose, self.session, self.limits,
                            self.cgroups, self.web)

    # -- allocation ---------------------------------------------------------------------------------
    def allocate(self, token: str) -> Lease:
        with self._cond:
            if self._closing:
                raise PoolFull("the server is stopping")
            if len(self.leases) + self._reserved >= self.limit:
                raise PoolFull(f"all {self.limit} desktops are in use")
            short = None if self.warm else host_shortage(self.limits, self.workdir)
            if short:
                raise PoolFull(short)
            self._reserved += 1
            desktop = self.warm.pop(0) if self.warm else None
            if desktop is None and len(self.leases) + self._reserved + self._building + len(self.warm) > self.limit:
                # a warm one is being built in the slot we need: wait for it rather than overshoot
                while not self.warm and self._building and not self._closing:
                    self._cond.wait()
                desktop = self.warm.pop(0) if self.warm else None
        try:
            if desktop is not None and not (desktop.sandbox.alive() and desktop.screenshot_ready()):
                threading.Thread(target=desktop.close, daemon=True).start()
                desktop = None
            if desktop is None:
                desktop = self._new_desktop()
                if not desktop.screenshot_ready():
                    desktop.close()
                    raise RuntimeError("the new desktop's /screenshot does not answer")
        except BaseException:
            with self._cond:
                self._reserved -= 1
                self._cond.notify_all()
            raise
        lease = Lease(desktop, token)
        with self._cond:
            self._reserved -= 1
            self.leases[desktop.id] = lease
            self._cond.notify_all()
        return lease

    def release(self, desktop_id: str) -> bool:
        with self._cond:
            lease = self.leases.pop(desktop_id, None)
        if lease is None:
            return False
        try:
            lease.desktop.close()
        finally:
            with self._cond:
                self._cond.notify_all()  # room for a warm one
        return True

    def get(self, desktop_id: str) -> Lease | None:
        with self._cond:
            return self.leases.get(desktop_id)

    def counts(self) -> dict:
        with self._cond:
            return {"leased": len(self.leases), "warm": len(self.warm), "starting": self._building,
                    "limit": self.limit}

    def wait_warm(self, count: int, timeout: float) -> bool:
        """Block until `count` desktops are warm (True) or the timeout passes (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.warm) >= count, timeout)

    # -- the warm pool ------------------------------------------------------------------------------
    def _wanted(self) -> bool:
        room = self.limit - len(self.leases) - self._reserved - len(self.warm) - self._building
        return not self._closing and room > 0 and len(self.warm) + self._building < self.warm_target

    def _fill(self) -> None:
        while True:
            with self._cond:
                while not self._wanted():
                    if self._closing:
                        return
                    self._cond.wait()
            short = host_shortage(self.limits, self.workdir)
            if short:  # a warm desktop is no use if it pushes the host over: look again later
                log.warning("no warm desktop started: %s", short)
                with self._cond:
                    self._cond.wait_for(lambda: self._closing, SHORT_RETRY_S)
                continue
            with self._cond:
                if not self._wanted():
                    continue
                self._building += 1
            desktop = None
            try:
                desktop = self._new_desktop()
                if not desktop.screenshot_ready():
                    raise RuntimeError("a warm desktop's /screenshot does not answer")
            except Exception:
                log.exception("could not prepare a warm desktop")
                if desktop is not None:
                    desktop.close()
                desktop = None
                time.sleep(1.0)  # do not spin on a broken machine
            with self._cond:
                self._building -= 1
                if desktop is not None and self._closing:
                    closing = desktop
                    desktop = None
                else:
                    closing = None
                if desktop is not None:
                    self.warm.append(desktop)
                self._cond.notify_all()
            if closing is not None:
                closing.close()

    # -- limits -----------------------------------------------------------------------------------------
    def _watch(self) -> None:
        while True:
            with self._cond:
                if self._cond.wait_for(lambda: self._closing, WATCH_S):
                    return
                leased = [lease.desktop for lease in self.leases.values()]
            for desktop in leased:
                if desktop.stopped_at_limit is None and desktop.check_limits():
                    log.warning("desktop %s stopped: %s", desktop.id, desktop.stopped_at_limit)

    def close_all(self) -> None:
        """Stop refilling and tear every desktop down (leased and warm)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._filler.join()
        self._watcher.join()
        with self._cond:
            desktops = [lease.desktop for lease in self.leases.values()] + self.warm
            self.leases, self.warm = {}, []
        for desktop in desktops:
            try:
                desktop.close()
            except Exception:
                log.exception("tearing down desktop %s", desktop.id)
