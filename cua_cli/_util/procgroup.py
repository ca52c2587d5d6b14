"""Stopping a whole process group (a server and every process it started) and
checking that it is gone. Zombies do not count: a container's init may never
reap them, and they hold nothing."""

import os
import signal
import time

import psutil


def live(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of a process group."""
    out = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                out.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return out


def kill_group(pgid: int, grace: float, kill_wait: float = 10.0) -> bool:
    """SIGTERM the group, SIGKILL after `grace` s; True once no live member is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not group_members(pgid):
                return True
            time.sleep(0.2)
    return not group_members(pgid)
