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


def started(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch, as the kernel keeps it), None if it is gone:
    with the pid, it names one process, never a later one that got the same pid."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None


def same_group(pgid: int, leader_started: float | None) -> bool:
    """Whether process group `pgid` is still the one whose leader started at `leader_started`: the
    leader is that very process, or it is gone and the group lives on (a pgid is not given to a
    new process while its group has members). Never the caller's own group."""
    if pgid == os.getpgrp():
        return False
    now = started(pgid)
    return now is None or leader_started is None or now == leader_started


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
