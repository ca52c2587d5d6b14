"""OSWorld's own `os` task files (tests/data/osworld_os, unchanged) on cua's GNOME desktops, played as
an agent plays them on OSWorld's Ubuntu: Ctrl+Alt+T, then typing in the terminal (sudo's password at
its prompt), through a real `cua check-tasks`: each scores 0 when nothing is done and 1 after the
actions, as on OSWorld's image."""

import json
from pathlib import Path

import pytest
from helpers.cli import run_cua
from helpers.desktops import needs_desktops

from cua_cli.runfolder.jsonl import read_lines

pytestmark = [needs_desktops, pytest.mark.slow]
DATA = Path(__file__).parent / "data" / "osworld_os"
# Six of the nine, one of each kind: check_text_enlarged (3ce045a0); exact_match on a command given as
# a list (bedcedc4); sudo at its prompt (43c2d64c); check_include_exclude after a postconfig sleep
# (cc9d4f34); infeasible after a four-step setup (4783cc41); mv after a setup through sudo -S
# (7688b85f). The others take the same paths: a4d98375 and f9be0997 are gsettings and exact_match,
# e0df059f an mv.
TASKS = ["3ce045a0-877b-42aa-8d2c-b4a863336ab8", "43c2d64c-bab5-4dcb-a30c-b888321c319a",
         "4783cc41-c03c-4e1b-89b4-50658f642bd5", "7688b85f-87a4-4e4a-b2f8-f3d6c3f29b82",
         "bedcedc4-4d72-425e-ad62-21960b11fe0d", "cc9d4f34-1ca0-4a1b-8ff2-09302696acb9"]


def test_osworlds_os_tasks_score_0_untouched_and_1_when_solved_through_the_gui(tmp_path):
    task_list = tmp_path / "tasks.json"
    task_list.write_text(json.dumps({"os": TASKS}))
    cfg = tmp_path / "os.yaml"
    cfg.write_text(f"""
run: {{name: os, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {task_list}, examples_dir: {DATA}/examples}}}}
env: {{kind: osworld, url: local, local: {{max_envs: 2}}, osworld: {{session: gnome, pause_s: 1.0}}}}
agent: {{kind: osworld}}
runner: {{num_envs: 2, max_steps: 3, step_timeout_s: 300, episode_timeout_s: 900}}
""")
    r = run_cua("check-tasks", str(cfg), "--oracle", str(DATA / "oracle.json"), "--repeat", "1", timeout=2400)
    (folder,) = (tmp_path / "results").glob("os-check-*")
    report = {x["task_id"][:8]: x for x in read_lines(folder / "report.jsonl")}
    assert len(report) == len(TASKS), r.stderr[-3000:]
    assert {t: x["status"] for t, x in report.items()} == dict.fromkeys(report, "ok"), (report, r.stderr[-3000:])
    assert r.returncode == 0
    for task, x in report.items():
        if task != "4783cc41":  # infeasible: its no-op is not judged
            assert (x["oracle"]["scores"], x["noop"]["scores"]) == ([1.0], [0.0]), x
