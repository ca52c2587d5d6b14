"""DART-GUI's sink: a finished trajectory becomes a folder and a `rollout_run` row, as DART's rollouter leaves them."""

from .._util.diag import warn
from ..errors import SinkUnavailable
from ..runfolder.finished import Finished
from .database import DartDatabase, InsertRule
from .folders import DartFolderSink


class DartSink:
    """What DART's rollouter leaves for DART-GUI's trainer: the trajectory's folder, then its
    `rollout_run` row pointing at that folder (either may be off)."""

    def __init__(self, folders=None, rows=None):
        self.folders, self.rows = folders, rows

    def write(self, t: Finished) -> None:
        split_dir = str(self.folders.root / self.folders.write(t)) if self.folders else None
        if self.rows:
            self.rows.write(t, split_dir)

    def close(self) -> None:
        if self.rows:
            self.rows.close()


def database(cfg, secrets: dict) -> DartDatabase:
    """A connection to storage.mysql's database (each thread needs its own)."""
    m = cfg.storage.mysql
    return DartDatabase(secrets["mysql"], InsertRule(m.min_steps_for_zero, m.skip_errors))


def dart_sinks(cfg, secrets: dict) -> list[DartSink]:
    """The sinks the config's `storage` section asks for; a database is reached now, so a bad URL fails at once."""
    dart = cfg.storage.dart
    folders = rows = None
    if dart.root:
        folders = DartFolderSink(cfg.resolve_path(dart.root))
    if cfg.storage.mysql.url_env:
        rows = database(cfg, secrets)
        try:
            rows.ping()
        except SinkUnavailable as e:  # down now, maybe not for long: rows follow once it is back
            warn(f"storage.mysql: {e}; the rollout starts, and its rows follow when the database is back")
    return [DartSink(folders, rows)] if folders or rows else []
