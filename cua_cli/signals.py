"""Signal handling that only sets flags; the main loop acts on them."""

import signal


class StopFlags:
    """SIGINT/SIGTERM handlers that only count; the main loop acts on the count."""

    def __init__(self):
        self.count = 0
        self._old = {}

    def _handler(self, signum, frame):
        self.count += 1

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
