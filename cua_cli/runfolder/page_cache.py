"""A step's files leave the page cache once they are on disk: the runner never reads them back.

A rollout writes gigabytes of screenshots (about 10 GB a thousand episodes). Kept in the page cache,
they push out what the host does read (a model's weights, an env's images), and each new cached page
is fresh memory, which costs more than the copy into it (docs/design/runner-loop.md). So each file
written is advised DONTNEED at once, which starts its writeback, and again LAG files later, when its
pages are clean and can go. No fsync: nothing waits for the disk.
"""

import collections
import os
import threading

LAG = 64  # files whose descriptors stay open between the two advices (per process)

_held: collections.deque[int] = collections.deque()
_lock = threading.Lock()  # a runner's writers share the ring: its loop, then its write threads


def written(fd: int) -> None:
    """Take `fd`, a file just written: its pages go once on disk, and the descriptor is closed then."""
    _drop(fd)  # on dirty pages: starts their writeback, so they are clean by the second advice
    with _lock:
        _held.append(fd)
        old = _held.popleft() if len(_held) > LAG else None
    if old is not None:
        _drop(old)
        os.close(old)


def _drop(fd: int) -> None:
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):  # a FIFO (ESPIPE), a file system without it; macOS has no fadvise
        pass
