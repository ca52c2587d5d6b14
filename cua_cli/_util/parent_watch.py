"""Processes a rollout starts notice when the rollout itself is gone.

`cua rollout` can die without running any cleanup (SIGKILL, the OOM
killer). Its runner processes and its local env server then watch their
parent: once it is gone, they stop the way Ctrl-C would (episodes end as
interrupted, envs are released, claims go back to the queue) instead of
holding envs and memory forever.
"""

import os
import threading

CHECK_EVERY_S = 1.0


def watch_parent(parent_pid: int, on_gone, stop: threading.Event | None = None) -> threading.Thread:
    """Call `on_gone()` once `parent_pid` is no longer this process's parent.

    Comparing with getppid() rather than asking whether the pid exists is
    immune to pid reuse: an orphan is re-parented (to init or a subreaper)
    the moment its parent dies. `stop` ends the watch early.
    """
    stop = stop or threading.Event()

    def watch():
        while not stop.wait(CHECK_EVERY_S):
            if os.getppid() != parent_pid:
                on_gone()
                return

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
