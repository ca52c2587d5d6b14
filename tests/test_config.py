"""Bad input gets a clear error naming the file and key, through the real CLI (exit 2)."""

import json

import pytest

from conftest import run_cua
from cua_cli.config import ConfigError, load_config
from cua_cli.tasks import load_tasks

GOOD = """
tasks:
  kind: miniwob
  miniwob: {names: [click-test], seeds: [0, 1]}
runner: {num_envs: 2}
"""


def test_good_config_and_set_override(write):
    cfg = load_config(str(write("c.yaml", GOOD)), ("runner.num_envs=8", "model.temperature=0.7", "run.name=x"))
    assert cfg.runner.num_envs == 8 and cfg.model.temperature == 0.7 and cfg.run.name == "x"
    assert [t.task_id for t in load_tasks(cfg)] == ["click-test@0", "click-test@1"]


@pytest.mark.parametrize("text, expected", [
    ("tasks: [unclosed", "malformed YAML"),
    ("runner: {num_envz: 2}", "unknown key 'runner.num_envz'"),
    ("runner: {num_envs: two}", "runner.num_envs: expected int"),
    ("runner: {num_envs: 0}", "runner.num_envs: must be > 0"),
    ("tasks: {kind: webarena}", "tasks.kind: must be one of"),
    ("model: {provider: openai}", "model.endpoints"),
    ("env: {token_env: 'x y'}", "env.token_env"),
])
def test_bad_config_errors_name_file_and_key(write, text, expected):
    path = write("bad.yaml", text)
    with pytest.raises(ConfigError) as e:
        cfg = load_config(str(path))
        load_tasks(cfg)
    assert str(path) in str(e.value) and expected in str(e.value)


def test_cli_exit_code_2_for_bad_config(write, tmp_path):
    path = write("bad.yaml", "runner: {num_envz: 2}\n")
    r = run_cua("rollout", str(path))
    assert r.returncode == 2
    assert "bad.yaml" in r.stderr and "runner.num_envz" in r.stderr
    r = run_cua("rollout", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "missing.yaml" in r.stderr
    r = run_cua("rollout", str(write("ok.yaml", GOOD)), "--set", "runner.max_steps=-1")
    assert r.returncode == 2 and "runner.max_steps" in r.stderr
    assert not (tmp_path / "results").exists(), "no run folder for bad input"


def test_cli_names_missing_token_variable(write):
    path = write("tok.yaml", GOOD + "env: {token_env: CUA_TEST_NOT_SET_TOKEN}\n")
    r = run_cua("rollout", str(path))
    assert r.returncode == 2 and "CUA_TEST_NOT_SET_TOKEN" in r.stderr


def _osworld(write, listing, examples):
    write("ow/test_all.json", json.dumps(listing))
    for (domain, tid), body in examples.items():
        write(f"ow/examples/{domain}/{tid}.json", json.dumps(body))
    return write("ow.yaml", "tasks:\n  kind: osworld\n  osworld: {task_list: ow/test_all.json, examples_dir: ow/examples}\n")


def test_osworld_tasks_load(write):
    ex = {"instruction": "Open the file", "config": [{"type": "launch"}], "evaluator": {"func": "exact_match"}}
    path = _osworld(write, {"chrome": ["t1", "t2"]}, {("chrome", "t1"): ex, ("chrome", "t2"): ex})
    tasks = load_tasks(load_config(str(path)))
    assert [(t.task_id, t.domain, t.instruction) for t in tasks] == [
        ("t1", "chrome", "Open the file"), ("t2", "chrome", "Open the file")]
    assert tasks[0].evaluator == {"func": "exact_match"}


def test_osworld_duplicate_and_traversal_ids(write):
    ex = {"instruction": "x", "evaluator": {}}
    path = _osworld(write, {"chrome": ["t1"], "gimp": ["t1"]}, {("chrome", "t1"): ex, ("gimp", "t1"): ex})
    r = run_cua("rollout", str(path))
    assert r.returncode == 2 and "duplicate task id 't1'" in r.stderr
    path = _osworld(write, {"chrome": ["../secret"]}, {})
    r = run_cua("rollout", str(path))
    assert r.returncode == 2 and "'../secret' is not a plain file name" in r.stderr


def test_jsonl_tasks_keep_any_id(write):
    write("t.jsonl", '{"task_id": "../x", "domain": "d", "config": {"miniwob": "click-test", "seed": 0}}\n'
                     '{"task_id": "a/b"}\n')
    cfg = load_config(str(write("j.yaml", "tasks: {kind: jsonl, jsonl: t.jsonl}\n")))
    assert [t.task_id for t in load_tasks(cfg)] == ["../x", "a/b"]
    write("dup.jsonl", '{"task_id": "a"}\n{"task_id": "a"}\n')
    with pytest.raises(ConfigError, match="duplicate task id 'a'"):
        load_tasks(load_config(str(write("d.yaml", "tasks: {kind: jsonl, jsonl: dup.jsonl}\n"))))
