"""Task sets: MiniWoB++ names x seeds, OSWorld-style folders, a JSONL file, or AgentGym task numbers.

Task files are input like the config: their size, nesting, types and string
lengths are bounded, and anything wrong is a ConfigError naming the file and
the line or task.
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ._util.ranges import parse_ranges
from .config import MAX_NAME, Config, data_problem, read_text, show, text_problem
from .errors import BadTask, ConfigError
from .osworld.task_files import read_tasks

MAX_TASK_FILE_BYTES = 32 << 20   # a task list or JSONL file: 100k MiniWoB-sized tasks take ~15 MB
MAX_EXAMPLE_BYTES = 1 << 20      # one OSWorld example file
MAX_TASKS = 1_000_000            # tasks, and (task, sample) pairs: each pair is a queue file
MAX_TASK_DEPTH = 32              # nesting inside a task (OSWorld evaluators use under 10)
MAX_TASK_ID = 1024               # characters
MAX_INSTRUCTION = 65_536         # characters

# Becomes part of a path: a plain file name, at most 255 characters.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")


@dataclass
class Task:
    task_id: str
    domain: Optional[str]
    instruction: Optional[str] = None   # None: the env supplies it on allocate
    config: dict = field(default_factory=dict)      # sent to the env on allocate
    evaluator: dict = field(default_factory=dict)   # sent to the env on evaluate

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, "domain": self.domain, "instruction": self.instruction,
                "config": self.config, "evaluator": self.evaluator}


def load_tasks(cfg: Config) -> list[Task]:
    kind = cfg.tasks.kind
    if kind == "miniwob":
        tasks = _miniwob(cfg)
    elif kind == "osworld":
        tasks = _osworld(cfg)
    elif kind == "agentgym":
        tasks = _agentgym(cfg)
    else:
        tasks = _jsonl(cfg)
    seen = set()
    for t in tasks:
        if t.task_id in seen:
            raise ConfigError(f"{cfg.source}: tasks: duplicate task id {show(t.task_id)}")
        seen.add(t.task_id)
    if cfg.tasks.limit is not None:
        tasks = tasks[: cfg.tasks.limit]
    if not tasks:
        raise ConfigError(f"{cfg.source}: tasks: the task set is empty")
    if len(tasks) * cfg.tasks.rollout_n > MAX_TASKS:
        raise ConfigError(f"{cfg.source}: tasks.rollout_n: {len(tasks)} tasks x {cfg.tasks.rollout_n} samples "
                          f"is more than {MAX_TASKS} pairs")
    return tasks


def _too_many(cfg: Config, key: str) -> ConfigError:
    return ConfigError(f"{cfg.source}: {key}: more than {MAX_TASKS} tasks")


def _miniwob(cfg: Config) -> list[Task]:
    mw = cfg.tasks.miniwob
    if not mw.names:
        raise ConfigError(f"{cfg.source}: tasks.miniwob.names: list at least one MiniWoB task")
    if len(mw.names) * len(mw.seeds) > MAX_TASKS:
        raise _too_many(cfg, "tasks.miniwob")
    tasks = []
    for name in mw.names:
        if not _PLAIN_NAME.fullmatch(name):
            raise ConfigError(f"{cfg.source}: tasks.miniwob.names: {show(name)} is not a MiniWoB task name")
        for seed in mw.seeds:
            env_config = {"miniwob": name, "seed": seed}
            if mw.episode_max_time is not None:
                env_config["episode_max_time"] = mw.episode_max_time
            tasks.append(Task(f"{name}@{seed}", name, None, env_config, {"func": "miniwob_reward"}))
    return tasks


def _agentgym(cfg: Config) -> list[Task]:
    """AgentGym tasks are numbers on the env server: the id records env and number (`textcraft@17`)."""
    env = cfg.env.agentgym.env
    try:
        ranges = parse_ranges(cfg.tasks.agentgym.indices, 2 ** 53)
    except ValueError as e:
        raise ConfigError(f"{cfg.source}: tasks.agentgym.indices: {e}") from None
    if sum(map(len, ranges)) > MAX_TASKS:
        raise _too_many(cfg, "tasks.agentgym.indices")
    return [Task(f"{env}@{i}", env, None, {"agentgym": {"env": env, "idx": i}}) for r in ranges for i in r]


def _osworld(cfg: Config) -> list[Task]:
    """OSWorld's task files (osworld/task_files.py): a task list with its examples folder, a
    folder of task files, or one file."""
    ow = cfg.tasks.osworld
    found = read_tasks(cfg.resolve_path(ow.task_list), cfg.resolve_path(ow.examples_dir) if ow.examples_dir else None,
                       ow.domains, ow.ids)
    if len(found) > MAX_TASKS:
        raise _too_many(cfg, "tasks.osworld.task_list")
    return [task_from_dict(t) for t in found]


def _int(text: str) -> int:
    if len(text) > 20:  # int() would fail only past 4,300 digits, with advice about sys
        raise ValueError("an integer is beyond 64 bits")
    return int(text)


def _loads(text: str):
    """json.loads, with nesting too deep for its (recursive) decoder as a ValueError."""
    try:
        return json.loads(text, parse_int=_int)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _read_json(path: Path, what: str, max_bytes: int):
    try:
        return _loads(read_text(path, max_bytes, what))
    except ValueError as e:
        raise ConfigError(f"{path}: {what} is not valid JSON: {e}") from None


def _jsonl(cfg: Config) -> list[Task]:
    path = cfg.resolve_path(cfg.tasks.jsonl)
    text = read_text(path, MAX_TASK_FILE_BYTES, f"tasks.jsonl of {cfg.source}")
    tasks = []
    for n, line in enumerate(text.split("\n"), 1):  # not splitlines(): U+2028 may sit inside a string
        if not line.strip():
            continue
        if len(tasks) == MAX_TASKS:
            raise _too_many(cfg, "tasks.jsonl")
        try:
            tasks.append(task_from_dict(_loads(line)))
        except (ValueError, BadTask) as e:  # not JSON, or not a task
            raise ConfigError(f"{path}:{n}: bad task: {e}") from None
    return tasks


def task_from_dict(obj: dict) -> Task:
    """A task from its JSON form (task files, queue items); raises BadTask saying what is wrong."""
    if not isinstance(obj, dict):
        raise BadTask("a task must be a JSON object")
    task_id = obj.get("task_id")
    if not isinstance(task_id, str):
        raise BadTask("a task needs a string 'task_id'")
    problem = text_problem(task_id, MAX_TASK_ID, any_char=True)  # ids are data: encoded for every path
    if problem:
        raise BadTask(f"'task_id' {show(task_id)}: {problem}")
    name = f"task {show(task_id)}"
    for key, max_len in (("domain", MAX_NAME), ("instruction", MAX_INSTRUCTION)):
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise BadTask(f"{name}: {key!r} must be a string")
        if value is not None and len(value) > max_len:
            raise BadTask(f"{name}: {key!r} is longer than {max_len} characters")
    for key in ("config", "evaluator"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise BadTask(f"{name}: {key!r} must be an object")
    problem = data_problem(obj, MAX_TASK_DEPTH, MAX_TASK_FILE_BYTES, any_char=True)
    if problem:
        raise BadTask(f"{name}: {problem}")
    return Task(task_id, obj.get("domain"), obj.get("instruction"),
                obj.get("config") or {}, obj.get("evaluator") or {})
