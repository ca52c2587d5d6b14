"""cua as DART's rollouter, on real parts: a rollout on real MiniWoB++ writes DART's trajectory
folders and DART's `rollout_run` rows into a real MariaDB; a database down mid-run loses nothing,
and `--resume` catches up without a duplicate row."""

import json

import pytest
from helpers.cli import run_cua
from helpers.mariadb import MariaDB

from cua_cli.runfolder.jsonl import read_lines


def _config(write, tmp_path, name: str, seeds: str) -> str:
    return str(write(f"{name}.yaml", f"""
run: {{name: {name}, results_dir: {tmp_path}/results-{name}}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test, click-button], seeds: {seeds}}}}}
env: {{url: local, local: {{max_envs: 2}}}}
model: {{provider: random, seed: 1, record_prompt: true}}
runner: {{num_envs: 2, max_steps: 4}}
storage:
  dart: {{root: {tmp_path}/dart}}
  mysql: {{url_env: CUA_TEST_MYSQL}}
"""))


def _rows(db) -> list[tuple]:
    return db.sql("SELECT run_id, trajectory_id, reward, num_chunks, split_dir FROM rollout_run ORDER BY id")


def _expected(run) -> list[dict]:
    """The final attempts DART's rule gives a row: a reward, or a 0 after at least 4 steps; never an error."""
    final = {}
    for rec in read_lines(run / "episodes.jsonl"):
        final[(rec["task_id"], rec["sample"])] = rec
    return [r for r in final.values() if r["outcome"] != "error" and (r["score"] > 0 or r["steps"] >= 4)]


@pytest.mark.slow
def test_rollout_fills_dart_folders_and_rows_and_survives_a_database_outage(write, tmp_path):
    with MariaDB(tmp_path) as db:
        env = {"CUA_TEST_MYSQL": db.url}
        r = run_cua("rollout", _config(write, tmp_path, "up", "[0, 1, 2]"), env=env)
        assert r.returncode == 0, r.stderr
        assert db.password not in r.stdout + r.stderr
        (run,) = (tmp_path / "results-up").iterdir()
        rows, expected = _rows(db), _expected(run)
        assert len(rows) == len(expected) and len({row[1] for row in rows}) == len(rows)
        for row in rows:
            folder = tmp_path / "dart" / row[1]
            assert row[4] == str(folder) and (folder / "task_config.json").is_file()
            assert float((folder / "reward.txt").read_text()) == row[2]
            assert len(list(folder.glob("data_for_step_*.pt"))) == row[3]
        stats = run_cua("stats", str(tmp_path / "dart"), "--format", "json")
        assert stats.returncode == 0 and json.loads(stats.stdout)["runs"][0]["layout"] == "dart"

        # The database goes down before a second run: the run finishes anyway, and says what is pending.
        db.stop()
        cfg = _config(write, tmp_path, "down", "[5, 6]")
        r = run_cua("rollout", cfg, env=env, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "not in storage yet" in r.stderr and db.password not in r.stderr
        (down,) = (tmp_path / "results-down").iterdir()
        db.start()
        r = run_cua("rollout", cfg, "--resume", str(down), env=env)
        assert r.returncode == 0, r.stderr
        caught_up = [row for row in _rows(db) if row[0] == json.loads((down / "run.json").read_text())["run_id"]]
        assert len(caught_up) == len(_expected(down))
        # A resume of a run whose rows are all in adds none.
        before = len(_rows(db))
        assert run_cua("rollout", cfg, "--resume", str(down), env=env).returncode == 0
        assert len(_rows(db)) == before
