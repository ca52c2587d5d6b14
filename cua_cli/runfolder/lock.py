"""The queue's lock: one holder at a time across threads, processes and hosts.

Threads of a process line up on a threading lock, so only one of them at a
time waits for the file lock, and that wait is a blocking flock that the
kernel hands over in turn. A polling lock (filelock's) has every waiting
thread wake up to retry: with hundreds of episode slots per process, the
polling alone kept the queue from keeping up.
"""

import fcntl
import os
import threading

from .confined import open_writable


class QueueLock:
    def __init__(self, path):
        self.path = path
        self._threads = threading.Lock()
        self._fd: int | None = None
        self._pid = 0

    def __enter__(self) -> "QueueLock":
        self._threads.acquire()
        try:
            if self._pid != os.getpid():  # never a descriptor (and its lock) inherited through fork
                # Never through a link: O_CREAT would make the file it points to, outside the run.
                self._fd = open_writable(self.path, os.O_RDWR | os.O_CREAT)
                self._pid = os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()
