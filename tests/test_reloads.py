"""Checkpoint-driven reloads (model.reload_from: mysql) against a real MariaDB holding DART's `checkpoint`
table; the fleet's rolling reload itself is tested with real vLLM in test_fleet_e2e.py."""

import pytest
from helpers.mariadb import MariaDB
from helpers.waiting import wait_for

from cua_cli.dart import reloads
from cua_cli.dart.database import DartDatabase

pytestmark = pytest.mark.slow  # a real MariaDB server


def _checkpoint(db, run_id: str, *versions: tuple[str, str]) -> None:
    """Checkpoint rows (version, path) of a run, in one statement: several land at once."""
    db.sql("INSERT INTO `checkpoint` (`name`, `version`, `run_id`, `status`, `path`, `source`) VALUES "
           + ", ".join(["('', %s, %s, 'PENDING', %s, 'train')"] * len(versions)),
           [x for version, path in versions for x in (version, run_id, path)])


def test_new_checkpoints_reload_the_fleet_onto_their_path(tmp_path, monkeypatch, capfd):
    asked = []
    monkeypatch.setattr(reloads, "request_reload", lambda fleet, model, version, timeout, log: asked.append(
        (fleet, model, version)))
    said = []

    def saying(text):  # what the watcher printed so far
        said.append(capfd.readouterr().err)
        return text in "".join(said)

    with MariaDB(tmp_path) as db:
        DartDatabase(db.url).ping()  # creates DART's tables
        _checkpoint(db, "exp", ("v0", "/ckpt/v0"))  # there before the rollout: the past, no reload
        watcher = reloads.CheckpointWatcher(DartDatabase(db.url), "exp", tmp_path / "fleet.json", every_s=0.2)
        watcher.start()
        try:
            _checkpoint(db, "other", ("v1", "/ckpt/other"))  # another run's trainer
            _checkpoint(db, "exp", ("v1", "/ckpt/v1"), ("v2", "/ckpt/v2"))  # two at once: straight to the newest
            wait_for(lambda: asked, 60, "a reload")
            assert asked == [(tmp_path / "fleet.json", "/ckpt/v2", "/ckpt/v2")]  # DART matches rows by path
            db.stop()  # the database goes away: the watcher waits, and carries on when it is back
            wait_for(lambda: saying("looking again"), 60, "the watcher to find the database gone")
            db.start()
            _checkpoint(db, "exp", ("v3", "/ckpt/v3"))
            wait_for(lambda: len(asked) == 2, 60, "the reload after the outage")
            assert [a[1] for a in asked] == ["/ckpt/v2", "/ckpt/v3"]
        finally:
            watcher.stop()
