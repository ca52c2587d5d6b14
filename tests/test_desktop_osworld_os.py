"""OSWorld's own `os` task files (tests/data/osworld_os, unchanged) on cua's GNOME desktops, played as
an agent plays them on OSWorld's Ubuntu: Ctrl+Alt+T, then typing in the terminal (sudo's password at
its prompt), through a real `cua check-tasks`: each scores 0 when nothing is done and 1 after the
actions, as on OSWorld's image."""

from pathlib import Path

import pytest
from helpers.cli import run_cua
from helpers.desktops import needs_desktops

from cua_cli.runfolder.jsonl import read_lines

pytestmark = [needs_desktops, pytest.mark.slow]
DATA = Path(__file__).parent / "data" / "osworld_os"


def test_osworlds_os_tasks_score_0_untouched_and_1_when_solved_through_the_gui(tmp_path):
    cfg = tmp_path / "os.yaml"
    cfg.write_text(f"""
run: {{name: os, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/test_all.json, examples_dir: {DATA}/examples}}}}
env: {{kind: osworld, url: local, local: {{max_envs: 2}}, osworld: {{session: gnome, pause_s: 1.0}}}}
agent: {{kind: osworld}}
runner: {{num_envs: 2, max_steps: 3, step_timeout_s: 300, episode_timeout_s: 900}}
""")
    r = run_cua("check-tasks", str(cfg), "--oracle", str(DATA / "oracle.json"), "--repeat", "1", timeout=2400)
    (folder,) = (tmp_path / "results").glob("os-check-*")
    report = {x["task_id"][:8]: x for x in read_lines(folder / "report.jsonl")}
    assert len(report) == 9, r.stderr[-3000:]
    assert {t: x["status"] for t, x in report.items()} == dict.fromkeys(report, "ok"), (report, r.stderr[-3000:])
    assert r.returncode == 0
    for task, x in report.items():
        if task != "4783cc41":  # infeasible: its no-op is not judged
            assert (x["oracle"]["scores"], x["noop"]["scores"]) == ([1.0], [0.0]), x
