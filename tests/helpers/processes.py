"""Signals to a test's child processes. A process group is signalled only when it is provably the
child's own: the child still runs unreaped (so its pid is not yet anyone else's), leads its group,
and that group is not the test runner's. Otherwise a SIGTERM meant for a child can reach pytest
itself (a child that shares pytest's group, a pid reused after the child was reaped).

Children that are meant to be signalled as a group start with `start_new_session=True`."""

import os
import signal
import subprocess


def owns_group(p: subprocess.Popen) -> bool:
    """True while `p` runs, unreaped, as the leader of a process group other than the runner's."""
    if p.poll() is not None:  # reaped: its pid may already be another process's
        return False
    try:
        pgid = os.getpgid(p.pid)
    except ProcessLookupError:
        return False
    return pgid == p.pid and pgid != os.getpgrp()


def signal_group(p: subprocess.Popen, sig: int) -> bool:
    """Send `sig` to the process group that `p` leads: False if `p` has already ended (nothing is
    sent). Fails the test if `p` runs but does not lead a group of its own: a bug of the test."""
    if p.poll() is not None:
        return False
    if not owns_group(p):
        raise AssertionError(f"pid {p.pid} does not lead a process group of its own (start it with "
                             "start_new_session=True); not signalling its group")
    os.killpg(p.pid, sig)
    return True


def kill_group(p: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """`sig` to the group of `p` if it leads one, else to `p` alone (if it runs): the clean-up after
    a test of a child, or SIGUSR1 for its stacks."""
    if owns_group(p):
        os.killpg(p.pid, sig)
    elif p.poll() is None:
        p.send_signal(sig)
