"""`cua demo` refuses what it cannot record, naming the key or the task, before it starts a desktop
or writes a run folder (the whole demonstration on a real desktop: test_demo_live.py)."""

import pytest
from helpers.cli import ROOT, run_cua

DATA = ROOT / "tests/data/osworld"


def _config(tmp_path, env: str = "kind: osworld, url: local", agent: str = "kind: uitars") -> str:
    cfg = tmp_path / "demo.yaml"
    cfg.write_text(f"""
run: {{name: demo, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/evaluation_examples/test_all.json,
                                  examples_dir: {DATA}/evaluation_examples/examples}}}}
env: {{{env}}}
agent: {{{agent}}}
""")
    return str(cfg)


@pytest.mark.parametrize("env, agent, task, said", [
    ("kind: osworld, url: local", "kind: uitars", "no-such-task", "--task 'no-such-task': no such task in"),
    ("kind: cluster, url: 'http://127.0.0.1:9'", "kind: uitars", "cua-os-move-notes", "env.kind: a demonstration"),
    ("kind: osworld, url: local", "kind: osworld, observation: a11y_tree", "cua-os-move-notes", "agent.observation"),
])
def test_what_cannot_be_recorded_is_refused_by_name(tmp_path, env, agent, task, said):
    r = run_cua("demo", _config(tmp_path, env, agent), "--task", task, "--no-browser", timeout=120)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "results").exists()  # no run folder for a demonstration that never began
