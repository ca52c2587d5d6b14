"""Checkpoint-driven reloads (model.reload_from: mysql) against a real MariaDB holding DART's `checkpoint`
table; the fleet's rolling reload itself is tested with real vLLM in test_fleet_e2e.py."""

import time

from cua_cli.rollout import reloads
from cua_cli.sinks.mysql import MySQLSink
from mariadb import MariaDB


def _checkpoint(db, run_id: str, version: str, path: str) -> None:
    db.sql("INSERT INTO `checkpoint` (`name`, `version`, `run_id`, `status`, `path`, `source`) "
           "VALUES ('', %s, %s, 'PENDING', %s, 'train')", (version, run_id, path))


def test_new_checkpoints_reload_the_fleet_onto_their_path(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(reloads, "request_reload", lambda fleet, model, version, timeout, log: asked.append(
        (fleet, model, version)))
    with MariaDB(tmp_path) as db:
        MySQLSink(db.url).ping()  # creates DART's tables
        _checkpoint(db, "exp", "v0", "/ckpt/v0")  # there before the rollout: the past, no reload
        watcher = reloads.CheckpointWatcher(MySQLSink(db.url), "exp", tmp_path / "fleet.json", every_s=0.2)
        watcher.start()
        try:
            time.sleep(0.5)
            assert asked == []
            _checkpoint(db, "other", "v1", "/ckpt/other")  # another run's trainer
            _checkpoint(db, "exp", "v1", "/ckpt/v1")
            _checkpoint(db, "exp", "v2", "/ckpt/v2")  # two at once: straight to the newest
            deadline = time.monotonic() + 10
            while not asked and time.monotonic() < deadline:
                time.sleep(0.1)
            assert asked == [(tmp_path / "fleet.json", "/ckpt/v2", "/ckpt/v2")]  # DART matches rows by path
            db.stop()  # the database goes away: the watcher waits, and carries on when it is back
            time.sleep(0.6)
            db.start()
            _checkpoint(db, "exp", "v3", "/ckpt/v3")
            deadline = time.monotonic() + 10
            while len(asked) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert [a[1] for a in asked] == ["/ckpt/v2", "/ckpt/v3"]
        finally:
            watcher.stop()
