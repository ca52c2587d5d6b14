"""OSWorld task files (cua_cli/osworld/task_files.py): the three layouts, filters, clear errors for bad
files, and the support check (support.py)."""

import json
import shutil
from pathlib import Path

import pytest

from cua_cli.errors import ConfigError
from cua_cli.osworld.support import unsupported
from cua_cli.osworld.task_files import read_tasks

DATA = Path(__file__).parent / "data" / "osworld"
EXAMPLES = DATA / "evaluation_examples"
OS_IDS = ["cua-os-move-notes", "cua-os-idle-delay", "cua-os-kill-sleeper", "cua-os-terminal-product",
          "cua-os-infeasible-firmware"]


def example(task_id="t1", **over):
    obj = {"id": task_id, "snapshot": "os", "instruction": "Do it.", "source": "", "config": [],
           "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "true"},
                         "expected": {"type": "rule", "rules": {"expected": ""}}}}
    obj.update(over)
    return obj


def put(folder: Path, obj, name=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{obj['id']}.json")
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return path


def test_osworld_layout():
    tasks = read_tasks(EXAMPLES / "test_all.json")
    assert [t["task_id"] for t in tasks] == OS_IDS
    t = tasks[0]
    assert t["domain"] == "os" and t["instruction"].startswith("Move the file")
    assert t["config"]["config"][1]["type"] == "download"  # the whole example rides in config
    assert t["evaluator"] is t["config"]["evaluator"]
    assert set(t) == {"task_id", "domain", "instruction", "config", "evaluator"}


def test_every_test_task_is_supported():
    assert [unsupported(t) for t in read_tasks(EXAMPLES / "test_all.json")] == [[]] * len(OS_IDS)


def test_list_layout_with_another_examples_folder(tmp_path):
    shutil.copytree(EXAMPLES / "examples", tmp_path / "ex")
    lst = tmp_path / "lists" / "small.json"
    lst.parent.mkdir()
    lst.write_text(json.dumps({"os": ["cua-os-idle-delay"]}))
    assert [t["task_id"] for t in read_tasks(lst, examples_dir=tmp_path / "ex")] == ["cua-os-idle-delay"]


def test_filters():
    assert [t["task_id"] for t in read_tasks(EXAMPLES / "test_all.json", ids=["cua-os-kill-sleeper"])] == [
        "cua-os-kill-sleeper"]
    assert read_tasks(EXAMPLES / "test_all.json", domains=["chrome"]) == []
    assert len(read_tasks(EXAMPLES / "examples", domains=["os"])) == len(OS_IDS)


def test_folder_layouts(tmp_path):
    # evaluation_examples/examples/<domain>/: each sub-folder is a domain
    assert sorted(t["task_id"] for t in read_tasks(EXAMPLES / "examples")) == sorted(OS_IDS)
    # a folder of task files: the folder's name is the domain
    tasks = read_tasks(EXAMPLES / "examples" / "os")
    assert {t["domain"] for t in tasks} == {"os"} and len(tasks) == len(OS_IDS)
    put(tmp_path / "mine", example("a"))
    put(tmp_path / "mine" / "gimp", example("b"))
    assert [(t["task_id"], t["domain"]) for t in read_tasks(tmp_path / "mine")] == [("a", "mine"), ("b", "gimp")]


def test_one_file():
    [t] = read_tasks(EXAMPLES / "examples" / "os" / "cua-os-infeasible-firmware.json")
    assert t["task_id"] == "cua-os-infeasible-firmware" and t["domain"] == "os"
    assert t["evaluator"] == {"func": "infeasible"}


def test_ids_are_data(tmp_path):
    """Any id may be a task's (it becomes a path only through an encoder), but a list file's ids become
    paths to read, so there they must be plain file names."""
    odd = "über task; rm -rf ~"
    [t] = read_tasks(put(tmp_path / "d", example(odd)))
    assert t["task_id"] == odd
    lst = tmp_path / "list.json"
    lst.write_text(json.dumps({"os": ["../../etc/passwd"]}))
    with pytest.raises(ConfigError, match=r"list\.json: os\[0\]: '\.\./\.\./etc/passwd' is not a plain file name"):
        read_tasks(lst)


@pytest.mark.parametrize("content, message", [
    ("{not json", r"t1\.json: not valid JSON"),
    (b"\xff\xfe bad", r"t1\.json: not UTF-8 text"),
    ("[1, 2]", r"t1\.json: a task file must hold a JSON object, not list"),
    (json.dumps(example("t2")), r"t1\.json: id: 't2' does not match the file name 't1'"),
    (json.dumps(example(instruction=None)), r"t1\.json: instruction: missing"),
    (json.dumps(example(instruction=3)), r"t1\.json: instruction: must be a non-empty string"),
    (json.dumps(example(evaluator=None)), r"t1\.json: evaluator: missing"),
    (json.dumps(example(config=[{"parameters": {}}])), r"t1\.json: config\[0\]: must be a step"),
    (json.dumps(example(config={"type": "sleep"})), r"t1\.json: config: must be a list of steps"),
    (json.dumps(example(evaluator={"func": ["exact_match", "check_list"], "result": [{"type": "rule"}],
                                   "expected": []})),
     r"t1\.json: evaluator\.result: must be a list as long as evaluator\.func \(2\)"),
    (json.dumps(example(evaluator={"func": "exact_match"})), r"t1\.json: evaluator\.result: missing"),
    (json.dumps(example(evaluator={"func": ["a", "b"], "conj": "xor", "result": [{"type": "rule"}] * 2})),
     r"t1\.json: evaluator\.conj"),
    ('{"id": "t1", "x": ' + "[" * 100 + "]" * 100 + "}", r"t1\.json: nested deeper than 32 levels"),
    ('{"id": "t1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", r"t1\.json: not valid JSON: nested too deeply"),
    ('{"id": "t1", "n": NaN}', r"t1\.json: not valid JSON: NaN is not JSON"),
    ('{"id": "t1", "n": 1' + "0" * 30 + "}", r"t1\.json: not valid JSON: an integer is beyond 64 bits"),
])
def test_bad_files_name_file_and_key(tmp_path, content, message):
    path = tmp_path / "os" / "t1.json"
    path.parent.mkdir()
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError, match=message):
        read_tasks(path)
    with pytest.raises(ConfigError, match=message):  # the same through a folder and a list
        read_tasks(tmp_path / "os")
    (tmp_path / "test_all.json").write_text('{"os": ["t1"]}')
    with pytest.raises(ConfigError, match=message):
        read_tasks(tmp_path / "test_all.json", examples_dir=tmp_path)


def test_sizes_and_missing_files(tmp_path):
    big = put(tmp_path / "d", json.dumps(example(instruction="x" * (2 << 20))), "t1.json")
    with pytest.raises(ConfigError, match="larger than 1048576 bytes"):
        read_tasks(big)
    lst = tmp_path / "list.json"
    lst.write_text('{"os": ["gone"]}')
    with pytest.raises(ConfigError, match=r"gone\.json: cannot read: No such file"):
        read_tasks(lst)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no task files"):
        read_tasks(tmp_path / "empty")
    (tmp_path / "twice.json").write_text('{"os": ["t", "t"]}')
    put(tmp_path / "os", example("t"))
    with pytest.raises(ConfigError, match=r"os/t\.json: task id 't' of domain 'os' is also the id in .*os/t\.json"):
        read_tasks(tmp_path / "twice.json", examples_dir=tmp_path)


def test_an_id_shared_by_domains_is_qualified(tmp_path):
    """OSWorld's test_all.json lists bb5e4c0d-... under chrome and thunderbird, two different tasks."""
    put(tmp_path / "ex" / "chrome", example("x", instruction="Chrome"))
    put(tmp_path / "ex" / "thunderbird", example("x", instruction="Mail"))
    put(tmp_path / "ex" / "os", example("y"))
    (tmp_path / "all.json").write_text('{"chrome": ["x"], "thunderbird": ["x"], "os": ["y"]}')
    for source in (tmp_path / "all.json", tmp_path / "ex"):
        tasks = read_tasks(source, examples_dir=tmp_path / "ex")
        assert sorted((t["task_id"], t["instruction"]) for t in tasks) == [
            ("chrome/x", "Chrome"), ("thunderbird/x", "Mail"), ("y", "Do it.")]
        # filters never change an id: it is judged over the whole source
        assert [t["task_id"] for t in read_tasks(source, examples_dir=tmp_path / "ex", domains=["chrome"])] == [
            "chrome/x"]
        assert [t["task_id"] for t in read_tasks(source, examples_dir=tmp_path / "ex", ids=["thunderbird/x"])] == [
            "thunderbird/x"]
        assert len(read_tasks(source, examples_dir=tmp_path / "ex", ids=["x"])) == 2


def test_unsupported_names_each_part_once(tmp_path):
    task = example(config=[{"type": "open_the_pod_bay_doors", "parameters": {}},
                           {"type": "execute", "parameters": {"command": "true"}},
                           {"type": "googledrive", "parameters": {}}],
                   evaluator={"postconfig": [{"type": "open_the_pod_bay_doors", "parameters": {}}],
                              "func": ["compare_telepathy", "exact_match", "compare_telepathy"],
                              "result": [{"type": "vm_file"}, {"type": "googledrive_file"}, {"type": "vm_file"}],
                              "expected": [{"type": "cloud_file"}, {"type": "rule"}, {}]})
    assert unsupported(task) == ["step 'open_the_pod_bay_doors'",
                                 "step 'googledrive' (needs credentials: a Google account)",
                                 "metric 'compare_telepathy'",
                                 "getter 'googledrive_file' (needs credentials: a Google account)"]
    assert unsupported(example(evaluator={"func": "infeasible"})) == []
    assert unsupported(example(evaluator={"func": ["infeasible"], "result": [{"type": "rule"}]})) == [
        "metric 'infeasible'"]
    # a cua task dict (the example inside `config`) reads the same
    [cua_task] = read_tasks(put(tmp_path / "x", task))
    assert unsupported(cua_task) == unsupported(task)
