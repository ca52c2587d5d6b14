"""Checkpoint-driven reloads: DART-GUI's trainer inserts a `checkpoint` row after saving weights;
a `--watch` rollout with `model.reload_from: mysql` sees it and rolls the fleet onto that path.

The reload runs beside the rollout: servers restart one at a time while the
others keep serving, and every later step carries the new model_version (the
checkpoint's path, which DART's trainer matches its rows against) and policy_version.
"""

import threading

from .._util.diag import note
from ..errors import CuaError, SinkUnavailable
from ..fleet.control import request_reload


class CheckpointWatcher:
    def __init__(self, rows, run_id: str, fleet_file, every_s: float = 5.0, reload_timeout_s: float = 3600.0):
        self.rows = rows            # a DartDatabase of its own: a connection is not shared between threads
        self.run_id = run_id
        self.fleet_file = fleet_file
        self.every_s = every_s
        self.reload_timeout_s = reload_timeout_s
        self.latest = None          # the newest checkpoint version seen
        self._stop = threading.Event()

    def start(self) -> None:
        """Checkpoints there before the rollout started are the past: only newer ones reload the fleet."""
        try:
            known = self.rows.checkpoints(self.run_id)
            self.latest = known[-1]["version"] if known else None
        except SinkUnavailable as e:
            note(f"checkpoints: {e}; looking again in {self.every_s:.0f} s")
        self._thread = threading.Thread(target=self._follow, name="cua-reloads", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                new = self.rows.checkpoints(self.run_id, after=self.latest)
            except SinkUnavailable as e:
                note(f"checkpoints: {e}; looking again in {self.every_s:.0f} s")
                continue
            if not new:
                continue
            newest = new[-1]  # a trainer faster than the reloads: skip to its latest weights
            self.latest = newest["version"]
            note(f"checkpoint {newest['version']} of {self.run_id}: reloading the fleet onto {newest['path']}")
            try:
                request_reload(self.fleet_file, newest["path"], newest["path"], self.reload_timeout_s, note)
            except CuaError as e:  # the fleet stays on what it serves; the next checkpoint tries again
                note(f"reload onto {newest['path']} failed: {e}")

    def stop(self) -> None:
        self._stop.set()
        # A reload under way goes on in the fleet's supervisor; the rollout need not wait for it.
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            self.rows.close()

