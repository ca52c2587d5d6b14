"""Task files are input too: anything wrong is a ConfigError naming the file and the line or task."""

import json
import time

import pytest
from helpers.cli import run_cua
from hypothesis import given
from hypothesis import strategies as st

from cua_cli import tasks as tasks_module
from cua_cli.config import load_config
from cua_cli.errors import BadTask, ConfigError
from cua_cli.tasks import Task, load_tasks, task_from_dict


def _jsonl_config(tmp_path, body: bytes):
    (tmp_path / "t.jsonl").write_bytes(body)
    path = tmp_path / "j.yaml"
    path.write_text("tasks: {kind: jsonl, jsonl: t.jsonl}\n")
    return load_config(str(path))


def _refused(cfg, *expected):
    start = time.monotonic()
    with pytest.raises(ConfigError) as e:
        load_tasks(cfg)
    assert time.monotonic() - start < 10  # refused at once, not after a blow-up (generous: a loaded machine)
    for text in expected:
        assert text in str(e.value)
    return str(e.value)


GOOD_LINE = b'{"task_id": "ok"}\n'


@pytest.mark.parametrize("line, expected", [
    (b'{"task_id": "caf\xe9"}', "line 2"),
    (b'[1, 2]', "t.jsonl:2: bad task: a task must be a JSON object"),
    (b'"just a string"', "t.jsonl:2: bad task: a task must be a JSON object"),
    (b'{"task_id": "a", "config": [1]}', "t.jsonl:2: bad task: task 'a': 'config' must be an object"),
    (b'{"task_id": "a", "evaluator": "exact"}', "t.jsonl:2: bad task: task 'a': 'evaluator' must be an object"),
    (b'{"task_id": "' + b"x" * 5000 + b'"}', "t.jsonl:2: bad task: 'task_id'"),
    (b'{"task_id": "a", "instruction": "' + b"x" * 70000 + b'"}', "'instruction' is longer than"),
    (b'{"task_id": "a", "instruction": ["x"]}', "'instruction' must be a string"),
    (b'{"task_id": "a", "config": {"x": NaN}}', "t.jsonl:2: bad task: task 'a': nan"),
    (b'{"task_id": "a", "config": {"x": -Infinity}}', "t.jsonl:2: bad task: task 'a': -inf"),
    (b'{"task_id": "a", "config": {"x": 1e999}}', "t.jsonl:2: bad task: task 'a': inf"),
    (b'{"task_id": "a", "config": {"x": ' + b"9" * 5000 + b'}}', "t.jsonl:2: bad task: an integer is beyond 64 bits"),
    (b'{"task_id": "a", "config": {"x": ' + b"[" * 100 + b"]" * 100 + b'}}', "nested deeper than 32"),
    (b'{"task_id": "a", "config": {"x": ' + b"[" * 200000 + b"]" * 200000 + b'}}', "t.jsonl:2: bad task: nested"),
])
def test_bad_jsonl_lines_name_file_and_line(tmp_path, line, expected):
    _refused(_jsonl_config(tmp_path, GOOD_LINE + line + b"\n"), str(tmp_path / "t.jsonl"), expected)


def test_oversized_task_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks_module, "MAX_TASK_FILE_BYTES", 100)
    _refused(_jsonl_config(tmp_path, GOOD_LINE * 10), "t.jsonl", "larger than 100 bytes")


def test_bad_jsonl_through_the_cli(tmp_path):
    _jsonl_config(tmp_path, GOOD_LINE + b'{"task_id": "a", "config": {"x": NaN}}\n')
    r = run_cua("rollout", str(tmp_path / "j.yaml"), timeout=60)
    assert r.returncode == 2 and "t.jsonl:2" in r.stderr and "Traceback" not in r.stderr


def test_jsonl_lines_split_on_newlines_only(tmp_path):
    cfg = _jsonl_config(tmp_path, '{"task_id": "a\u2028b"}\r\n{"task_id": "c"}\n'.encode())
    assert [t.task_id for t in load_tasks(cfg)] == ["a\u2028b", "c"]


def test_too_many_pairs_refused_before_building_them(write):
    names, seeds = [f"t{i}" for i in range(1001)], list(range(1001))
    cfg = load_config(str(write("m.yaml", json.dumps({"tasks": {"miniwob": {"names": names, "seeds": seeds}}}))))
    _refused(cfg, "m.yaml", "tasks.miniwob", "more than 1000000")
    cfg = load_config(str(write("n.yaml", json.dumps({"tasks": {"miniwob": {"names": names}, "rollout_n": 1000}}))))
    _refused(cfg, "n.yaml", "tasks.rollout_n", "pairs")


def _osworld(write, listing_text, examples):
    write("ow/test_all.json", listing_text)
    for (domain, tid), body in examples.items():
        write(f"ow/examples/{domain}/{tid}.json", body)
    return load_config(str(write("ow.yaml", "tasks:\n  kind: osworld\n"
                                            "  osworld: {task_list: ow/test_all.json, examples_dir: ow/examples}\n")))


@pytest.mark.parametrize("listing, example, expected", [
    ('{"chrome": ["t1"]}', '{"instruction": "x", "evaluator": []}', "evaluator: must be an object"),
    ('{"chrome": ["t1"]}', '{"instruction": 5, "evaluator": {}}', "instruction: must be a non-empty string"),
    ('{"chrome": ["t1"]}', '{"instruction": "x", "evaluator": {"v": NaN}}', "NaN is not JSON"),
    ('{"chrome": ["t1"]}', '[' * 100000, "not valid JSON: nested too deeply"),
    ('[' * 100000, None, "not valid JSON: nested too deeply"),
    ('{"chrome": ["' + "x" * 300 + '"]}', None, "is not a plain file name"),
])
def test_bad_osworld_files(write, listing, example, expected):
    cfg = _osworld(write, listing, {("chrome", "t1"): example} if example else {})
    _refused(cfg, "ow/", expected)


def test_osworld_example_not_utf8(write, tmp_path):
    cfg = _osworld(write, '{"chrome": ["t1"]}', {})
    (tmp_path / "ow/examples/chrome").mkdir(parents=True)
    (tmp_path / "ow/examples/chrome/t1.json").write_bytes(b'{"instruction": "\xff", "evaluator": {}}')
    _refused(cfg, "t1.json", "not UTF-8")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3), max_leaves=10)
task_like = st.fixed_dictionaries({"task_id": st.text(max_size=10) | json_values},
                                  optional={k: json_values for k in ("domain", "instruction", "config", "evaluator")})


def _plain(task: Task) -> None:
    """What the queue needs of a loaded task: objects where objects belong, strict JSON."""
    assert isinstance(task.config, dict) and isinstance(task.evaluator, dict)
    json.dumps(task.to_dict(), allow_nan=False)


@given(obj=json_values | task_like)
def test_task_from_dict_returns_a_task_or_raises_bad_task(obj):
    try:
        task = task_from_dict(obj)
    except BadTask:
        return
    _plain(task)


@given(lines=st.lists(st.text(max_size=30) | (json_values | task_like).map(json.dumps), max_size=5))
def test_any_jsonl_loads_or_is_refused(tmp_path_factory, lines):
    folder = tmp_path_factory.getbasetemp() / "jsonl-properties"
    folder.mkdir(exist_ok=True)
    cfg = _jsonl_config(folder, "\n".join(lines).encode("utf-8", "surrogatepass"))
    try:
        tasks = load_tasks(cfg)
    except ConfigError as e:
        assert "t.jsonl" in str(e) or "j.yaml" in str(e)
        return
    for task in tasks:
        _plain(task)


def test_task_ids_and_run_names_may_hold_any_character(tmp_path):
    # They are data: every path made from them is encoded, so a lone surrogate or a NUL is fine.
    (tmp_path / "t.jsonl").write_text('{"task_id": "a\\ud800\\u0000b", "domain": "d\\udcff"}\n')
    (tmp_path / "c.yaml").write_text('run: {name: "r\\udcff"}\ntasks: {kind: jsonl, jsonl: t.jsonl}\n')
    cfg = load_config(str(tmp_path / "c.yaml"))
    assert cfg.run.name == "r\udcff"
    (task,) = load_tasks(cfg)
    assert task.task_id == "a\ud800\x00b" and task.domain == "d\udcff"


def _agentgym_config(tmp_path, indices: str, env: str = "textcraft"):
    path = tmp_path / "ag.yaml"
    path.write_text(f"tasks: {{kind: agentgym, agentgym: {{indices: {json.dumps(indices)}}}}}\n"
                    f"env: {{kind: agentgym, agentgym: {{env: {env}}}}}\nagent: {{kind: react}}\n")
    return load_config(str(path))


def test_agentgym_tasks_are_numbers_of_the_env_server(tmp_path):
    tasks = load_tasks(_agentgym_config(tmp_path, "0-2, 7,10-11"))
    assert [t.task_id for t in tasks] == ["textcraft@0", "textcraft@1", "textcraft@2", "textcraft@7",
                                          "textcraft@10", "textcraft@11"]
    assert tasks[3].config == {"agentgym": {"env": "textcraft", "idx": 7}} and tasks[3].domain == "textcraft"


@pytest.mark.parametrize("indices, expected", [
    ("3-1", "needs low <= high"), ("1,1", "listed twice"), ("0-5,3-9", "3 is listed twice"),
    ("a-3", "'a-3' is not a number"), ("1,,2", "'' is not"), ("0-9999999999", "more than 1000000 tasks"),
    ("-1", "'-1' is not"), ("٣", "is not a number"), ("1" * 30, "is not a number"), ("1-2-3", "is not a number"),
])
def test_bad_agentgym_indices_name_the_key(tmp_path, indices, expected):
    _refused(_agentgym_config(tmp_path, indices), "tasks.agentgym.indices", expected)


def test_unknown_agentgym_env_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="env.agentgym.env: must be one of webarena, textcraft"):
        _agentgym_config(tmp_path, "0", env="nethack")


def test_an_agent_that_cannot_play_the_env_is_refused_before_anything_starts(write, tmp_path):
    cfg = write("pair.yaml", f"run: {{results_dir: {tmp_path}/results}}\n"
                             "tasks: {kind: agentgym}\nenv: {kind: agentgym, url: 'http://127.0.0.1:9'}\n")
    r = run_cua("rollout", str(cfg))
    assert r.returncode == 2 and "agent.kind: uitars plays gui envs, but env.kind agentgym is a text env" in r.stderr
    assert not (tmp_path / "results").exists()
