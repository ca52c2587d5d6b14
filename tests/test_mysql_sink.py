"""The DART MySQL sink against a real MariaDB: DART's schema, DART's insert rule, one row per
trajectory however often it is written, a database that goes away and comes back, checkpoints."""

import json
import sys
import time
import uuid
from urllib.parse import quote

import pytest
from helpers.mariadb import MariaDB

from cua_cli.dart.database import DartDatabase, InsertRule, trajectory_id
from cua_cli.errors import CuaError, InputError, SinkUnavailable
from cua_cli.runfolder.finished import Finished

pytestmark = pytest.mark.slow  # a real MariaDB server


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    with MariaDB(tmp_path_factory.mktemp("mysql_sink")) as server:
        yield server


@pytest.fixture
def sink(db):
    s = DartDatabase(db.url, connect_timeout=2)
    yield s
    s.close()


def finished(tmp_path, score=1.0, steps=5, outcome=None, task_id="task-1", versions=None, instruction="Do it",
             error=None) -> Finished:
    """A finished trajectory as the sink follower hands it over, with its traj.jsonl on disk."""
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    traj_dir = tmp_path / run_id / "trajectories" / "t" / "0_0"
    traj_dir.mkdir(parents=True)
    versions = versions or [f"/ckpt/v{i // 2}" for i in range(steps)]
    (traj_dir / "traj.jsonl").write_text("".join(json.dumps({"step": i, "model_version": v}) + "\n"
                                                 for i, v in enumerate(versions)))
    outcome = outcome or ("success" if score == 1 else "failure")
    record = {"task_id": task_id, "domain": "d", "sample": 0, "attempt": 0, "outcome": outcome,
              "reward": score, "score": score, "steps": steps, "stop_reason": "done", "error": error,
              "traj": "trajectories/t/0_0", "instruction": instruction}
    task = {"task_id": task_id, "domain": "d", "instruction": instruction, "config": [], "evaluator": {}}
    return Finished(run_id, tmp_path / run_id, record, traj_dir, task, uuid.uuid4().hex[:16])


def rows(db, t: Finished) -> list[dict]:
    cols = ["run_id", "trajectory_id", "task_id", "trace_id", "split_dir", "reward", "num_chunks", "used",
            "model_version", "instruction"]
    found = db.sql(f"SELECT {', '.join(cols)} FROM rollout_run WHERE trace_id = %s", (t.trace_id,))
    return [dict(zip(cols, r)) for r in found]


def test_tables_have_darts_schema(db, sink):
    sink.ping()
    columns = db.sql("SELECT table_name, column_name, data_type, character_maximum_length, is_nullable, "
                     "collation_name FROM information_schema.columns WHERE table_schema = 'cua_test' "
                     "ORDER BY table_name, ordinal_position")
    uni = "utf8mb4_unicode_ci"
    assert [c[1:] for c in columns if c[0] == "rollout_run"] == [
        ("id", "bigint", None, "NO", None), ("run_id", "varchar", 191, "YES", uni),
        ("trajectory_id", "varchar", 191, "NO", uni), ("task_id", "varchar", 191, "NO", uni),
        ("trace_id", "varchar", 191, "NO", uni), ("split_dir", "varchar", 512, "YES", uni),
        ("reward", "double", None, "YES", None), ("num_chunks", "int", None, "YES", None),
        ("used", "int", None, "NO", None), ("model_version", "varchar", 512, "YES", uni),
        ("instruction", "varchar", 1024, "YES", uni), ("create_at", "timestamp", None, "NO", None)]
    assert [c[1:5] for c in columns if c[0] == "checkpoint"] == [
        ("id", "bigint", None, "NO"), ("name", "varchar", 50, "NO"), ("version", "varchar", 50, "NO"),
        ("run_id", "varchar", 191, "NO"), ("status", "varchar", 20, "NO"), ("path", "varchar", 255, "NO"),
        ("source", "varchar", 50, "YES"), ("operator", "varchar", 50, "YES"), ("remark", "varchar", 1024, "YES"),
        ("config_yaml", "text", 65535, "YES"), ("created_at", "timestamp", None, "NO"),
        ("updated_at", "timestamp", None, "NO"), ("deleted_at", "timestamp", None, "YES"),
        ("started_at", "timestamp", None, "YES"), ("finished_at", "timestamp", None, "YES")]
    indexes = db.sql("SELECT table_name, index_name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index) "
                     "FROM information_schema.statistics WHERE table_schema = 'cua_test' "
                     "GROUP BY table_name, index_name, non_unique")
    assert {i[1]: i[2:] for i in indexes if i[0] == "rollout_run"} == {
        "PRIMARY": (0, "id"), "uq_rollout_run_id": (0, "id"), "uk_rollout_run_traj_run": (0, "trajectory_id,run_id"),
        "idx_rollout_run_task": (1, "task_id")}
    assert {i[1]: i[2:] for i in indexes if i[0] == "checkpoint"} == {
        "PRIMARY": (0, "id"), "idx_status": (1, "status"), "idx_created_at": (1, "created_at"),
        "idx_updated_at": (1, "updated_at")}
    tables = db.sql("SELECT table_name, engine, table_collation FROM information_schema.tables "
                    "WHERE table_schema = 'cua_test' ORDER BY table_name")
    assert [t[:2] for t in tables] == [("checkpoint", "InnoDB"), ("rollout_run", "InnoDB")]
    assert tables[1][2] == uni and tables[0][2].startswith("utf8mb4")
    defaults = dict(db.sql("SELECT column_name, column_default FROM information_schema.columns "
                           "WHERE table_schema = 'cua_test' AND table_name = 'rollout_run'"))
    assert defaults["used"] == "0" and defaults["create_at"].lower().startswith("current_timestamp")


def test_darts_insert_rule(tmp_path, db, sink):
    cases = [(dict(score=1.0, steps=2), True), (dict(score=0.0, steps=3), False), (dict(score=0.0, steps=4), True),
             (dict(score=0.5, steps=1), True),
             (dict(score=None, steps=9, outcome="error", error="eval_error: the checker crashed"), False)]
    for kwargs, wanted in cases:
        t = finished(tmp_path, **kwargs)
        assert sink.write(t) is wanted, kwargs
        assert len(rows(db, t)) == wanted, kwargs


def test_the_rule_is_configurable(tmp_path, db, sink):
    lenient = DartDatabase(db.url, rule=InsertRule(min_steps_for_zero=0, skip_errors=False))
    try:
        short, error = finished(tmp_path, score=0.0, steps=1), finished(tmp_path, score=None, outcome="error")
        assert lenient.write(short) and lenient.write(error)
        assert rows(db, short)[0]["reward"] == 0.0 and rows(db, error)[0]["reward"] is None
    finally:
        lenient.close()


def test_row_values(tmp_path, db, sink):
    t = finished(tmp_path, score=1.0, steps=3, versions=["/ckpt/v0", "/ckpt/v1", None], instruction="Open the file")
    assert sink.write(t)
    [row] = rows(db, t)
    assert row == {"run_id": t.run_id, "trajectory_id": f"task-1_{t.trace_id}", "task_id": "task-1",
                   "trace_id": t.trace_id, "split_dir": str(t.traj_dir), "reward": 1.0, "num_chunks": 3, "used": 0,
                   "model_version": "/ckpt/v1", "instruction": "Open the file"}
    other = finished(tmp_path)
    assert sink.write(other, split_dir="/dart/root/task-1_" + other.trace_id)
    assert rows(db, other)[0]["split_dir"] == "/dart/root/task-1_" + other.trace_id


def test_long_and_odd_values_fit_and_stay_distinct(tmp_path, db, sink):
    long_ids = ["é" * 300 + "a", "é" * 300 + "b"]
    written = [finished(tmp_path, task_id=task, instruction="x" * 5000, versions=["m" * 600]) for task in long_ids]
    for t in written:
        assert sink.write(t)
    stored = [rows(db, t)[0] for t in written]
    assert stored[0]["task_id"] != stored[1]["task_id"]
    for t, row in zip(written, stored):
        assert len(row["task_id"]) <= 191 and len(row["model_version"]) <= 512
        assert len(row["instruction"]) == 1024
        assert row["trajectory_id"] == trajectory_id(t.record["task_id"], t.trace_id)
    odd = finished(tmp_path, task_id="a/b \udcff", instruction="bad \udcff text")
    assert sink.write(odd, split_dir="/x" * 300)
    row = rows(db, odd)[0]
    assert row["split_dir"] is None and row["trajectory_id"] == f"a%2Fb%20%ED%B3%BF_{odd.trace_id}"
    assert row["instruction"] == "bad ? text"


def test_writing_again_never_makes_a_second_row(tmp_path, db, sink):
    t = finished(tmp_path)
    assert sink.write(t) and sink.write(t)
    db.sql("UPDATE rollout_run SET used = 1 WHERE trace_id = %s", (t.trace_id,))
    resumed = DartDatabase(db.url)  # a resumed run replays what it wrote before
    try:
        assert resumed.write(t)
    finally:
        resumed.close()
    [row] = rows(db, t)
    assert row["used"] == 1  # the trainer's count is kept


def test_a_dropped_connection_is_replaced_at_once(tmp_path, db, sink):
    assert sink.write(finished(tmp_path))
    [(conn_id,)] = db.sql("SELECT id FROM information_schema.processlist WHERE user = 'root' AND db = 'cua_test' "
                          "AND id <> CONNECTION_ID()")
    db.sql(f"KILL {int(conn_id)}")
    t = finished(tmp_path)
    assert sink.write(t) and len(rows(db, t)) == 1


def test_a_database_that_is_down_is_unavailable_until_it_is_back(tmp_path, db, sink, capsys):
    assert sink.write(finished(tmp_path))  # a connection kept open when the database goes
    t = finished(tmp_path)
    db.stop()
    try:
        for _ in range(2):  # first with the connection kept from before, then without one
            start = time.monotonic()
            with pytest.raises(SinkUnavailable) as e:
                sink.write(t)
            assert time.monotonic() - start < 15  # refused at once, no retry loop (generous: a loaded machine)
            assert e.value.__cause__ is None and e.value.__suppress_context__
            assert "root@127.0.0.1" in str(e.value) and db.password not in str(e.value)
            assert quote(db.password, safe="") not in str(e.value)
        with pytest.raises(SinkUnavailable):
            sink.checkpoints("any")
    finally:
        db.start()
    assert capsys.readouterr().err == ""
    assert rows(db, t) == []  # nothing half-written
    assert sink.write(t) and len(rows(db, t)) == 1


def test_a_database_that_hangs_is_unavailable_after_the_timeouts(tmp_path, db):
    s = DartDatabase(db.url, connect_timeout=1, io_timeout=1)
    try:
        s.ping()
        db.pause()
        try:
            start = time.monotonic()
            with pytest.raises(SinkUnavailable):
                s.write(finished(tmp_path))
            assert time.monotonic() - start < 20  # 1 s for the kept connection's read, 1 s for a new handshake; generous
        finally:
            db.resume()
        t = finished(tmp_path)
        assert s.write(t) and len(rows(db, t)) == 1
    finally:
        s.close()


def test_checkpoints_newest_after_a_version_oldest_first(db, sink):
    run = f"run-{uuid.uuid4().hex[:8]}"
    sink.ping()
    for version, status, source, extra in [("v0", "PENDING", "initial", ""), ("v10", "PENDING", "train", ""),
                                           ("v2", "PENDING", "train", ""), ("v1", "COMPLETED", "train", ""),
                                           ("v3", "FAILED", "train", ""), ("v4", "PENDING", "train", "deleted"),
                                           ("latest", "PENDING", "train", "")]:
        db.sql("INSERT INTO checkpoint (version, run_id, status, path, source, deleted_at) VALUES (%s, %s, %s, %s, %s, "
               + ("NOW())" if extra else "NULL)"), (version, run, status, f"/ckpt/{version}", source))
    db.sql("INSERT INTO checkpoint (version, run_id, status, path, source) VALUES ('v5', 'other', 'PENDING', '/o', "
           "'train')")
    got = sink.checkpoints(run, None)
    assert [c["version"] for c in got] == ["v0", "v1", "v2", "v10"]
    assert got[0]["path"] == "/ckpt/v0" and got[0]["source"] == "initial" and got[0]["run_id"] == run
    assert [c["version"] for c in sink.checkpoints(run, "v1")] == ["v2", "v10"]
    assert sink.checkpoints(run, "v10") == [] and sink.checkpoints("nobody", None) == []
    with pytest.raises(InputError):
        sink.checkpoints(run, "latest")


def test_refusals_and_bad_urls_mask_the_password(db):
    wrong = "s3cr3t@:/%pw"
    bad = DartDatabase(db.url.replace(quote(db.password, safe=""), quote(wrong, safe="")))
    with pytest.raises(CuaError) as e:
        bad.ping()
    assert not isinstance(e.value, SinkUnavailable) and "Access denied" in str(e.value)
    for url in (f"postgres://root:{quote(wrong, safe='')}@h/db", f"mysql://root:{quote(wrong, safe='')}@h:99999/db",
                f"mysql://root:{quote(wrong, safe='')}@h/db?ssl=1", f"mysql://root:{quote(wrong, safe='')}@h/"):
        with pytest.raises(InputError) as e:
            DartDatabase(url)
        assert wrong not in str(e.value) and quote(wrong, safe="") not in str(e.value) and "***" in str(e.value)


def test_a_unix_socket_url_works(tmp_path, db):
    s = DartDatabase(db.socket_url)
    try:
        t = finished(tmp_path)
        assert s.write(t) and len(rows(db, t)) == 1
    finally:
        s.close()


def test_a_missing_driver_names_the_extra(monkeypatch, db):
    monkeypatch.setitem(sys.modules, "pymysql", None)
    with pytest.raises(CuaError, match=r"pip install -e \.\[dart\]"):
        DartDatabase(db.url)
