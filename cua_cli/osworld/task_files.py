"""OSWorld's task files, read into cua's task dicts.

Three layouts:
- OSWorld's: a list file `{domain: [id, ...]}` (test_all.json) and `<examples>/<domain>/<id>.json`;
- a folder: its `*.json` files are tasks of the domain named by the folder, and each
  sub-folder's are tasks of that sub-folder's name (so `evaluation_examples/examples/` works);
- one task file, of the domain named by its folder.

A task becomes `{"task_id": id, "domain": folder, "instruction", "config": the whole example,
"evaluator"}`, the shape cua's Task is built from: the env receives the whole example
and finds OSWorld's setup steps in `config["config"]`. Files are input like a config:
sizes, nesting and counts are bounded, and anything wrong is a ConfigError naming the
file and the key. Ids are data; only the list layout makes paths of them, and there
only plain file names are accepted.
"""

import json
import re
from pathlib import Path
from typing import Iterable, Optional

from .._util.text import clip
from ..errors import ConfigError

MAX_LIST_BYTES = 32 << 20     # a task list
MAX_EXAMPLE_BYTES = 1 << 20   # one task file (OSWorld's largest is under 20 KB)
MAX_TASKS = 1_000_000
MAX_DEPTH = 32                # OSWorld's evaluators nest under 10 levels
MAX_ID = 1024
MAX_INSTRUCTION = 65_536

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")


def read_tasks(path, examples_dir=None, domains: Optional[Iterable[str]] = None,
               ids: Optional[Iterable[str]] = None) -> list[dict]:
    """The tasks at `path` (a list file, a folder or one task file), in file order, filtered by
    `domains` and `ids` (None: all; an id filter matches OSWorld's id or the `<domain>/<id>`
    that an id shared by several domains becomes). `examples_dir` is the list layout's
    examples folder (default: `examples` beside the list file)."""
    path = Path(path)
    domains = None if domains is None else set(domains)
    ids = None if ids is None else set(ids)

    def wanted(domain: str, task_id: str) -> bool:
        return ((domains is None or domain in domains)
                and (ids is None or task_id in ids or f"{domain}/{task_id}" in ids))

    if path.is_dir():
        names = _folder_files(path)
        tasks = [task_from_example(_read_json(f, MAX_EXAMPLE_BYTES), f, d) for d, f in names if wanted(d, _stem(f))]
        names = [(d, _stem(f)) for d, f in names]
    else:
        data = _read_bytes(path, MAX_LIST_BYTES + 1)
        obj = _parse_json(path, data, MAX_LIST_BYTES)
        if isinstance(obj, dict) and "instruction" not in obj and obj and all(isinstance(v, list) for v in obj.values()):
            names = _listing(path, obj)
            base = Path(examples_dir) if examples_dir else path.parent / "examples"
            tasks = [task_from_example(_read_json(base / d / f"{i}.json", MAX_EXAMPLE_BYTES), base / d / f"{i}.json", d)
                     for d, i in names if wanted(d, i)]
        else:
            if len(data) > MAX_EXAMPLE_BYTES:
                raise ConfigError(f"{path}: a task file is larger than {MAX_EXAMPLE_BYTES} bytes")
            tasks = [t for t in [task_from_example(obj, path, path.parent.name)] if wanted(t["domain"], t["task_id"])]
            names = []
    _qualify_shared_ids(tasks, names)
    for t in tasks:
        del t["_file"]
    return tasks


def _stem(file: Path) -> str:
    return file.name[:-5] if file.name.endswith(".json") else file.name


def _qualify_shared_ids(tasks: list[dict], names: list[tuple]) -> None:
    """OSWorld reuses an id across domains (bb5e4c0d-... is a chrome task and a thunderbird one):
    such ids become `<domain>/<id>`, as OSWorld's result folders tell them apart. Whether an id
    is shared is judged over the whole source, so filters never change a task's id. One id
    twice in one domain is an error."""
    seen: dict = {}
    for t in tasks:
        key = (t["domain"], t["task_id"])
        if key in seen:
            raise ConfigError(f"{t['_file']}: task id {clip(t['task_id'], 100)!r} of domain "
                              f"{clip(t['domain'], 60)!r} is also the id in {seen[key]}")
        seen[key] = t["_file"]
    domains_of: dict = {}
    for domain, task_id in names:
        domains_of.setdefault(task_id, set()).add(domain)
    for t in tasks:
        if len(domains_of.get(t["task_id"], ())) > 1:
            t["task_id"] = f"{t['domain']}/{t['task_id']}"


def _listing(list_path: Path, listing: dict) -> list[tuple]:
    """(domain, id) pairs of a list file; both become a path to read, so plain file names only."""
    pairs = []
    for domain, names in listing.items():
        for n, task_id in enumerate(names):
            for what, name in (("domain", domain), (f"{clip(domain, 60)}[{n}]", task_id)):
                if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name):
                    raise ConfigError(f"{list_path}: {what}: {clip(repr(name), 100)} is not a plain file name")
            pairs.append((domain, task_id))
            if len(pairs) > MAX_TASKS:
                raise ConfigError(f"{list_path}: more than {MAX_TASKS} tasks")
    return pairs


def _folder_files(folder: Path) -> list[tuple]:
    """(domain, file) of the folder's own *.json files (its domain) and each sub-folder's (theirs)."""
    files = [(folder.name, f) for f in _json_files(folder)]
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files += [(sub.name, f) for f in _json_files(sub)]
        if len(files) > MAX_TASKS:
            raise ConfigError(f"{folder}: more than {MAX_TASKS} task files")
    if not files:
        raise ConfigError(f"{folder}: no task files (*.json) in the folder or its sub-folders")
    return files


def _json_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".") and p.is_file())


def task_from_example(obj, file: Path, domain: str) -> dict:
    """One OSWorld example as a cua task dict; ConfigError naming `file` and the key when it is not one."""
    if not isinstance(obj, dict):
        raise ConfigError(f"{file}: a task file must hold a JSON object, not {type(obj).__name__}")
    stem = _stem(file)
    task_id = obj.get("id", stem)
    if not isinstance(task_id, str) or not task_id or len(task_id) > MAX_ID:
        raise ConfigError(f"{file}: id: must be a string of 1 to {MAX_ID} characters")
    if task_id != stem:
        raise ConfigError(f"{file}: id: {clip(task_id, 100)!r} does not match the file name {clip(stem, 100)!r}")
    instruction = obj.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise ConfigError(f"{file}: instruction: {'missing' if instruction is None else 'must be a non-empty string'}")
    if len(instruction) > MAX_INSTRUCTION:
        raise ConfigError(f"{file}: instruction: longer than {MAX_INSTRUCTION} characters")
    problem = _structure_problem(obj)
    if problem:
        raise ConfigError(f"{file}: {problem}")
    return {"task_id": task_id, "domain": domain, "instruction": instruction, "config": obj,
            "evaluator": obj["evaluator"], "_file": str(file)}


def _structure_problem(obj: dict) -> Optional[str]:
    """What keeps the example's config and evaluator from being OSWorld's shapes (None: nothing)."""
    problem = _steps_problem(obj.get("config", []), "config")
    if problem:
        return problem
    ev = obj.get("evaluator")
    if not isinstance(ev, dict):
        return "evaluator: " + ("missing" if ev is None else "must be an object")
    problem = _steps_problem(ev.get("postconfig", []), "evaluator.postconfig")
    if problem:
        return problem
    func = ev.get("func")
    if isinstance(func, str):
        for key in ("result", "expected"):
            if key in ev and ev[key] is not None and not _getter_ok(ev[key], allow_empty=True):
                return f"evaluator.{key}: must be a getter {{\"type\": ..., ...}}"
        if "options" in ev and not isinstance(ev["options"], dict):
            return "evaluator.options: must be an object"
        if func != "infeasible" and not ev.get("result"):
            return "evaluator.result: missing (every metric but infeasible needs a result)"
        return None
    if not (isinstance(func, list) and func and all(isinstance(f, str) for f in func)):
        return "evaluator.func: must be a metric name or a non-empty list of them"
    if ev.get("conj", "and") not in ("and", "or"):
        return "evaluator.conj: must be \"and\" or \"or\""
    for key in ("result", "expected", "options"):
        if key not in ev or (key != "result" and not ev[key]):
            if key == "result":
                return "evaluator.result: missing"
            continue
        value = ev[key]
        if not isinstance(value, list) or len(value) != len(func):
            return f"evaluator.{key}: must be a list as long as evaluator.func ({len(func)})"
        for n, item in enumerate(value):
            ok = (item is None or isinstance(item, dict)) if key == "options" else (
                _getter_ok(item, allow_empty=key == "expected"))
            if not ok:
                return f"evaluator.{key}[{n}]: must be " + ("an object" if key == "options" else "a getter")
    return None


def _getter_ok(g, allow_empty: bool) -> bool:
    if allow_empty and (g is None or g == {}):
        return True
    return isinstance(g, dict) and isinstance(g.get("type"), str)


def _steps_problem(steps, where: str) -> Optional[str]:
    if not isinstance(steps, list):
        return f"{where}: must be a list of steps"
    for n, step in enumerate(steps):
        if not (isinstance(step, dict) and isinstance(step.get("type"), str)):
            return f"{where}[{n}]: must be a step {{\"type\": ..., \"parameters\": {{...}}}}"
        if not isinstance(step.get("parameters", {}), dict):
            return f"{where}[{n}].parameters: must be an object"
    return None


def _read_bytes(path: Path, limit: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise ConfigError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None


def _int(text: str) -> int:
    if len(text) > 20:
        raise ValueError("an integer is beyond 64 bits")
    return int(text)


def _constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _read_json(path: Path, limit: int):
    return _parse_json(path, _read_bytes(path, limit + 1), limit)


def _parse_json(path: Path, data: bytes, limit: int):
    if len(data) > limit:
        raise ConfigError(f"{path}: larger than {limit} bytes")
    try:
        obj = json.loads(data.decode("utf-8-sig"), parse_int=_int, parse_constant=_constant)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid JSON: nested too deeply") from None
    except ValueError as e:
        raise ConfigError(f"{path}: not valid JSON: {e}") from None
    if _depth_over(obj, MAX_DEPTH):
        raise ConfigError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    return obj


def _depth_over(value, limit: int) -> bool:
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
    return False
