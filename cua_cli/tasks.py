"""Task sets: MiniWoB++ names x seeds, OSWorld-style folders, or a JSONL file."""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .config import Config, ConfigError

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


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
    else:
        tasks = _jsonl(cfg)
    seen = set()
    for t in tasks:
        if t.task_id in seen:
            raise ConfigError(f"{cfg.source}: tasks: duplicate task id {t.task_id!r}")
        seen.add(t.task_id)
    if cfg.tasks.limit is not None:
        tasks = tasks[: cfg.tasks.limit]
    if not tasks:
        raise ConfigError(f"{cfg.source}: tasks: the task set is empty")
    return tasks


def _miniwob(cfg: Config) -> list[Task]:
    mw = cfg.tasks.miniwob
    if not mw.names:
        raise ConfigError(f"{cfg.source}: tasks.miniwob.names: list at least one MiniWoB task")
    tasks = []
    for name in mw.names:
        if not _PLAIN_NAME.fullmatch(name):
            raise ConfigError(f"{cfg.source}: tasks.miniwob.names: {name!r} is not a MiniWoB task name")
        for seed in mw.seeds:
            env_config = {"miniwob": name, "seed": seed}
            if mw.episode_max_time is not None:
                env_config["episode_max_time"] = mw.episode_max_time
            tasks.append(Task(f"{name}@{seed}", name, None, env_config, {"func": "miniwob_reward"}))
    return tasks


def _osworld(cfg: Config) -> list[Task]:
    ow = cfg.tasks.osworld
    list_path = cfg.resolve_path(ow.task_list)
    base = cfg.resolve_path(ow.examples_dir)
    listing = _read_json(list_path, f"tasks.osworld.task_list of {cfg.source}")
    if not isinstance(listing, dict):
        raise ConfigError(f"{list_path}: expected {{domain: [task_id, ...]}}")
    tasks = []
    for domain, ids in listing.items():
        if ow.domains is not None and domain not in ow.domains:
            continue
        if not isinstance(ids, list):
            raise ConfigError(f"{list_path}: domain {domain!r}: expected a list of task ids")
        for task_id in ids:
            # These two become a path to read: only plain file names are allowed.
            for what, name in (("domain", domain), ("task id", task_id)):
                if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name):
                    raise ConfigError(f"{list_path}: {what} {name!r} is not a plain file name")
            tasks.append(_osworld_task(base / domain / f"{task_id}.json", task_id, domain))
    return tasks


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read {what}: {e.strerror}") from None
    except ValueError as e:
        raise ConfigError(f"{path}: {what} is not valid JSON: {e}") from None


def _osworld_task(path: Path, task_id: str, domain: str) -> Task:
    obj = _read_json(path, f"task {task_id!r}")
    if not isinstance(obj, dict):
        raise ConfigError(f"{path}: task {task_id!r} must be a JSON object")
    for key in ("instruction", "evaluator"):
        if key not in obj:
            raise ConfigError(f"{path}: task {task_id!r} has no {key!r}")
    # The env receives the whole example: OSWorld's setup steps live beside `config`.
    return Task(task_id, domain, obj["instruction"], obj, obj["evaluator"])


def _jsonl(cfg: Config) -> list[Task]:
    path = cfg.resolve_path(cfg.tasks.jsonl)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ConfigError(f"{cfg.source}: tasks.jsonl: cannot read {path}: {e.strerror}") from None
    tasks = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            tasks.append(task_from_dict(obj))
        except (ValueError, TypeError, KeyError) as e:
            raise ConfigError(f"{path}:{n}: bad task: {e}") from None
    return tasks


def task_from_dict(obj: dict) -> Task:
    """A task from its JSON form (task files, queue items); raises ValueError."""
    if not isinstance(obj, dict) or not isinstance(obj.get("task_id"), str):
        raise ValueError("a task needs a string 'task_id'")
    domain = obj.get("domain")
    if domain is not None and not isinstance(domain, str):
        raise ValueError(f"task {obj['task_id']!r}: 'domain' must be a string")
    return Task(obj["task_id"], domain, obj.get("instruction"),
                obj.get("config") or {}, obj.get("evaluator") or {})
