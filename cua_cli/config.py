"""Rollout config: YAML -> validated, typed dataclasses.

Unknown keys, wrong types, values out of range and unreadable files are
errors that name the file and the key path (`runner.num_envs`), so a typo
never silently falls back to a default. Input is bounded before it is
trusted: file size, nesting depth and size after alias expansion, and every
numeric key has a range (the `_Between` next to each field). Loading
any input either returns a config or raises ConfigError, quickly.
"""

import dataclasses
import json
import math
import os
import re
import reprlib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional
from urllib.parse import urlsplit

import yaml

from ._util.redact import mask_userinfo
from .errors import ConfigError
from .kinds import AGENTGYM_ENVS, AGENTS, BACKENDS, ENVS, PROVIDERS

# PyYAML's pure-Python loader (the one whose parsing can be bounded) reads under
# 1 MB/s: these keep the worst input near 0.4 s, still far above any real config.
MAX_FILE_BYTES = 256 << 10  # a config is a few KB
MAX_DEPTH = 20              # the deepest real key is 4 levels (tasks.miniwob.seeds[0])
MAX_NODES = 10_000          # values once aliases are expanded
MAX_TEXT = 4096             # characters in any string (PATH_MAX)
MAX_NAME = 256              # characters in names: run.name, model.name, ...
MAX_INT = 2 ** 63 - 1       # no key needs more; bigger YAML integers are refused while reading
DAY_S = 86_400              # upper bound of every duration and timeout
MAX_RETRIES = 10            # backoff doubles per retry: the 10th already waits ~8 minutes


_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 80


def show(value) -> str:
    """repr() clipped to a few dozen characters: a value can be megabytes long. A URL's password
    is masked first, so that no clip leaves part of it in an error message."""
    if isinstance(value, str):
        value = mask_userinfo(value)
    elif isinstance(value, list):
        value = [mask_userinfo(v) if isinstance(v, str) else v for v in value]
    return _SHOW.repr(value)


_BAD_CHAR = re.compile("[\0\ud800-\udfff]")   # NUL breaks paths, argv and env; surrogates break UTF-8 output


def text_problem(s: str, max_len: int = MAX_TEXT, any_char: bool = False) -> Optional[str]:
    """What is wrong with a string from the input (None if nothing).

    any_char: the string is data that cua encodes wherever it goes (task ids,
    the run name), so only its length is bounded.
    """
    if len(s) > max_len:
        return f"string longer than {max_len} characters"
    if not any_char and _BAD_CHAR.search(s):
        return "string with a NUL or an unpaired surrogate character"
    return None


def data_problem(value, max_depth: int, max_text: int = MAX_TEXT, any_char: bool = False) -> Optional[str]:
    """What keeps `value` from being plain JSON data (None if nothing).

    Finite floats, integers within 64 bits, clean strings, string keys and
    at most `max_depth` levels. Iterative, so deep input cannot exhaust the stack.
    """
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(v, str):
            problem = text_problem(v, max_text, any_char)
            if problem:
                return problem
        elif v is None or isinstance(v, bool):
            continue
        elif isinstance(v, int):
            if not -MAX_INT - 1 <= v <= MAX_INT:
                return "an integer is beyond 64 bits"
        elif isinstance(v, float):
            if not math.isfinite(v):
                return f"{v} is not allowed (numbers must be finite)"
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str) or text_problem(k, max_text, any_char):
                    return f"key {show(k)} is not a clean string"
                stack.append((x, depth + 1))
        else:
            return f"{type(v).__name__} values are not allowed"
    return None


@dataclass(frozen=True)
class _Between:
    """Check for numbers in [lo, hi], or (lo, hi] with above=True. NaN fails every comparison."""
    lo: int
    hi: int
    above: bool = False

    def __call__(self, v) -> Optional[str]:
        if not ((self.lo < v) if self.above else (self.lo <= v)) or not v <= self.hi:
            return f"must be {'>' if self.above else '>='} {self.lo} and <= {self.hi}, got {show(v)}"
        return None


def _nonempty(v: str) -> Optional[str]:
    return "must not be empty" if not v.strip() else None


def _name(v: str) -> Optional[str]:
    return _nonempty(v) or (f"longer than {MAX_NAME} characters" if len(v) > MAX_NAME else None)


def _run_name(v: str) -> Optional[str]:
    """Any characters (the folder name encodes them) but NUL, which run.json's readers in C would cut at."""
    return _name(v) or ("must not hold a NUL character" if "\0" in v else None)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")


def _env_name(v: str) -> Optional[str]:
    return None if _ENV_NAME.fullmatch(v) else f"must name an environment variable, got {show(v)}"


def _http_url(v: str) -> Optional[str]:
    try:
        u = urlsplit(v)
        u.port  # raises ValueError for a bad port
    except ValueError:
        u = None
    if u is None or u.scheme not in ("http", "https") or not u.hostname or re.search(r"\s", v):
        return f"must be an http(s)://host[:port] URL, got {show(v)}"
    return None


_TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def _task_name(v: str) -> Optional[str]:
    return None if _TASK_NAME.fullmatch(v) else f"must be a MiniWoB task name like click-test-2, got {show(v)}"


def _one_of(registry: dict):
    """Check for a name in a registry (env kinds, agent kinds, providers, backends)."""
    def check(v: str) -> Optional[str]:
        return None if v in registry else f"must be one of {', '.join(registry)}, got {show(v)}"
    return check


def _env_url(v: str) -> Optional[str]:
    return None if v == "local" or not _http_url(v) else f"must be 'local' or an http(s) URL, got {show(v)}"


_FLAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")


def _vllm_args(d: dict) -> Optional[str]:
    for key, value in d.items():
        if not isinstance(key, str) or not _FLAG.fullmatch(key):
            return f"{show(key)} is not a vLLM flag name"
        problem = data_problem(value, MAX_DEPTH)
        if problem:
            return f"{key}: {problem}"
    return None


def _env_vars(d: dict) -> Optional[str]:
    for key, value in d.items():
        if not isinstance(key, str) or _env_name(key):
            return f"{show(key)} is not an environment variable name"
        if not isinstance(value, (str, int, float)) or data_problem(value, 0):
            return f"{key}: expected a string or a finite number, got {show(value)}"
    return None


def _checked(default, check, any_char: bool = False):
    """A field whose value (each element of a list; unless None) must pass `check`.

    Its strings must also be clean text (see text_problem) unless `any_char`.
    """
    meta = {"check": check, "any_char": any_char}
    if isinstance(default, (list, dict)):
        return field(default_factory=default.copy, metadata=meta)
    return field(default=default, metadata=meta)


_DURATION = _Between(0, DAY_S, above=True)
_RETRIES = _Between(0, MAX_RETRIES)


@dataclass
class RunConfig:
    name: str = _checked("run", _run_name, any_char=True)  # run folder = <results_dir>/<encoded name>-<timestamp>
    results_dir: str = _checked("results", _nonempty)


@dataclass
class MiniwobTasks:
    names: list[str] = field(default_factory=list)   # e.g. click-test-2 (no miniwob/ prefix, no -v1)
    seeds: list[int] = _checked([0], _Between(0, 2 ** 31 - 1))
    # MiniWoB's own time limit per episode, s; the env server allows up to an hour
    episode_max_time: Optional[float] = _checked(None, _Between(0, 3600, above=True))


@dataclass
class OsworldTasks:
    task_list: str = ""              # {"domain": [task_id, ...]}
    examples_dir: str = ""           # <examples_dir>/<domain>/<task_id>.json
    domains: Optional[list[str]] = None


@dataclass
class AgentgymTasks:
    indices: str = _checked("0", _nonempty)   # task numbers of env.agentgym.env's server, e.g. "0-99,200-210"


@dataclass
class AdaptiveTasks:
    """DART's adaptive rollouts (cua_cli/dart/adaptive.py): with --watch, after each round every task gets the
    samples the rule gives for its recent scores. The defaults are DART's."""
    rounds: int = _checked(0, _Between(0, 1_000_000))     # 0: off
    rollout_n: int = _checked(8, _Between(0, 10_000, above=True))   # samples below the threshold, and at first
    threshold: float = _checked(1.0, _Between(0, 1))      # a task this successful gets max(min_n, int(9/rate - 7))
    min_n: int = _checked(1, _Between(0, 10_000, above=True))
    min_failure_steps: int = _checked(4, _Between(0, 10_000))   # a shorter failure does not count (DART stores none)


@dataclass
class TasksConfig:
    kind: Literal["miniwob", "osworld", "jsonl", "agentgym"] = "miniwob"
    miniwob: MiniwobTasks = field(default_factory=MiniwobTasks)
    osworld: OsworldTasks = field(default_factory=OsworldTasks)
    agentgym: AgentgymTasks = field(default_factory=AgentgymTasks)
    adaptive: AdaptiveTasks = field(default_factory=AdaptiveTasks)
    jsonl: str = ""                  # one task object per line
    rollout_n: int = _checked(1, _Between(0, 10_000, above=True))    # samples per task
    limit: Optional[int] = _checked(None, _Between(0, 1_000_000))   # first N tasks only


@dataclass
class LocalEnvServer:
    max_envs: int = _checked(4, _Between(0, 1024, above=True))   # browsers on this host
    port: int = _checked(0, _Between(0, 65535))                   # 0: pick a free port
    # env.kind agentgym: the MiniWoB tasks and seeds behind the server's AgentGym WebArena routes
    agentgym_tasks: list[str] = _checked([], _task_name)
    agentgym_seeds: str = _checked("0", _nonempty)


@dataclass
class AgentgymEnv:
    env: str = _checked("webarena", _one_of(AGENTGYM_ENVS))   # which AgentGym env server env.url points at


@dataclass
class EnvConfig:
    kind: str = _checked("cluster", _one_of(ENVS))       # the protocol the env speaks
    url: str = _checked("local", _env_url)                 # "local" starts the built-in MiniWoB server
    local: LocalEnvServer = field(default_factory=LocalEnvServer)
    agentgym: AgentgymEnv = field(default_factory=AgentgymEnv)
    token_env: Optional[str] = _checked(None, _env_name)   # name of the env var holding the token
    os: str = _checked("linux", _name)
    timeout_s: float = _checked(60.0, _DURATION)           # per request
    retries: int = _checked(3, _RETRIES)                   # per request, with exponential backoff
    allocate_wait_s: float = _checked(300.0, _Between(0, DAY_S))   # how long to wait for a free env (HTTP 503)


@dataclass
class ModelConfig:
    provider: str = _checked("random", _one_of(PROVIDERS))
    endpoints: list[str] = _checked([], _http_url)     # http://host:port/v1
    # a `cua start-models` fleet file: its servers become the endpoints
    fleet: Optional[str] = _checked(None, _nonempty)
    name: str = _checked("ui-tars", _name)             # served model name
    api_key_env: Optional[str] = _checked(None, _env_name)
    temperature: float = _checked(0.0, _Between(0, 10))
    max_tokens: int = _checked(512, _Between(0, 1_000_000, above=True))
    timeout_s: float = _checked(120.0, _DURATION)
    retries: int = _checked(3, _RETRIES)
    guided: bool = False             # constrain answers to the agent's action grammar (vLLM structured_outputs)
    # send each screenshot's bytes once per server, then only its uuid (vLLM's multimodal cache);
    # auto: on for endpoints whose /v1/models says vLLM
    image_uuids: Literal["auto", True, False] = "auto"
    routing: Literal["sticky", "round_robin"] = "sticky"  # sticky: one server per episode (prefix cache)
    record_prompt: bool = False      # RL: store the exact messages sent (images by file name)
    record_logprobs: bool = False    # RL: store sampled token ids and their logprobs
    # RL: store prompt and response token ids, response logprobs, finish reason, sampling parameters (and the prompt)
    record_tokens: bool = False
    # "mysql": with --watch, roll the fleet onto each new row of storage.mysql's `checkpoint` table (DART-GUI's trainer)
    reload_from: Optional[Literal["mysql"]] = None
    seed: int = _checked(0, _Between(-MAX_INT - 1, MAX_INT))   # random provider
    replay_run: Optional[str] = _checked(None, _nonempty)      # replay provider: run folder to replay


@dataclass
class AgentConfig:
    kind: str = _checked("uitars", _one_of(AGENTS))
    coord_mode: Literal["qwen25vl", "qwen2vl"] = "qwen25vl"
    history_images: int = _checked(5, _Between(0, 100, above=True))
    language: str = _checked("English", _name)
    parse_retries: int = _checked(2, _RETRIES)   # re-ask the model this often on unparseable text
    # text agents: the conversation kept, in characters; the oldest turns go first, the task statement stays
    history_chars: int = _checked(32_000, _Between(1000, 10_000_000))


@dataclass
class RayRunner:
    address: Optional[str] = _checked(None, _nonempty)   # the cluster to join (default: start a local one)
    # runner actors (default: one per node with num_cpus free, and one per 256 episode slots)
    actors: Optional[int] = _checked(None, _Between(0, 10_000, above=True))
    num_cpus: float = _checked(1.0, _Between(0, 1024))    # CPUs each runner actor reserves


@dataclass
class RunnerConfig:
    backend: str = _checked("local", _one_of(BACKENDS))   # where runners run: local processes, or ray actors
    num_envs: int = _checked(4, _Between(0, 100_000, above=True))   # concurrent episodes overall
    # runner processes; default: one per 256 episode slots, at most one per CPU
    processes: Optional[int] = _checked(None, _Between(0, 1024, above=True))
    ray: "RayRunner" = field(default_factory=lambda: RayRunner())   # backend: ray
    max_steps: int = _checked(15, _Between(0, 10_000, above=True))
    step_timeout_s: float = _checked(180.0, _DURATION)
    episode_timeout_s: float = _checked(1800.0, _DURATION)
    max_attempts: int = _checked(3, _Between(0, 100, above=True))   # infrastructure errors before a pair is failed
    lease_ttl_s: float = _checked(60.0, _DURATION)   # a claim whose heartbeat is older is reclaimed
    poll_s: float = _checked(1.0, _DURATION)         # --watch: how often to look for new task files


@dataclass
class DartStorage:
    root: Optional[str] = _checked(None, _nonempty)   # write DART's trajectory folders here


@dataclass
class MysqlStorage:
    url_env: Optional[str] = _checked(None, _env_name)   # NAME of the variable holding mysql://user:pass@host:port/db
    # DART's run id: rollout_run rows carry it and checkpoint rows are looked up by it (default: the cua run's id)
    run_id: Optional[str] = _checked(None, _name)
    min_steps_for_zero: int = _checked(4, _Between(0, 10_000))   # DART's rule: a reward of 0 needs this many steps
    skip_errors: bool = True                                     # DART never inserts infrastructure failures


@dataclass
class StorageConfig:
    """Where finished trajectories go besides the run folder (DART-GUI's trainer reads these)."""
    dart: DartStorage = field(default_factory=DartStorage)
    mysql: MysqlStorage = field(default_factory=MysqlStorage)


@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    source: str = field(default="", metadata={"internal": True})  # the YAML file read

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("source")
        return d

    def resolve_path(self, p: str) -> Path:
        """Paths in a config are relative to the config file."""
        path = Path(os.path.expanduser(p))
        if not path.is_absolute() and self.source:
            path = Path(self.source).parent / path
        return Path(os.path.normpath(path))


@dataclass
class FleetConfig:
    """`cua start-models --config FILE`: everything the command line can say."""
    model: Optional[str] = _checked(None, _nonempty)
    served_model_name: Optional[str] = _checked(None, _name)
    gpus: Optional[str] = _checked(None, _nonempty)
    cpu: Optional[int] = _checked(None, _Between(0, 256, above=True))   # servers without GPUs
    tp: int = _checked(1, _Between(0, 64, above=True))
    base_port: int = _checked(8000, _Between(0, 65535, above=True))
    vllm_args: dict = _checked({}, _vllm_args)   # {max-model-len: 4096, enforce-eager: true, ...}
    env: dict = _checked({}, _env_vars)          # extra environment for the servers
    ready_timeout_s: float = _checked(900.0, _DURATION)
    check_interval_s: float = _checked(5.0, _DURATION)


def load_fleet_config(path: str) -> FleetConfig:
    return _build(FleetConfig, _read_yaml(path), path, "")


def vllm_flags(args: dict) -> list[str]:
    """{max-model-len: 4096, enforce-eager: true, limit-mm-per-prompt: {image: 5}} -> CLI flags."""
    out = []
    for key, value in args.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (dict, list)):
            out += [flag, json.dumps(value)]
        else:
            out += [flag, str(value)]
    return out


def read_text(path, max_bytes: int, what: str) -> str:
    """A UTF-8 text file of at most `max_bytes`; anything else is a ConfigError naming it."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise ConfigError(f"{path}: cannot read {what}: {getattr(e, 'strerror', None) or e}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{path}: {what} is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{path}: line {line}: {what} is not UTF-8 text") from None


class _Refused(yaml.MarkedYAMLError):
    """Input beyond a bound, or a scalar Python cannot convert; `key` says where."""

    def __init__(self, problem, mark, path):
        super().__init__(problem=problem, problem_mark=mark)
        self.key = _key_text(path)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting, alias bombs and recursive aliases.

    Every node is counted as it is composed, an alias as the whole size of
    its target, so a few hundred bytes cannot expand to megabytes. A key given
    twice in one mapping is refused (`<<` merges may still be overridden). Scalars
    PyYAML fails to convert without a YAML error (a date 2020-13-45, `!!bool x`)
    become YAML errors, and integers beyond 64 bits are refused.
    """

    def __init__(self, text: str, base: tuple = ()):
        super().__init__(text)
        self._path = list(base)  # key of the node being composed; None for a mapping key
        self._keys = {}          # node -> its key, for construction errors
        self._nodes = 0
        self._sizes = {}         # anchored node -> its size, aliases expanded

    def _count(self, n, mark):
        self._nodes += n
        if self._nodes > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} values once aliases are expanded", mark, self._path)

    def compose_node(self, parent, index):
        event = self.peek_event()
        self._path.append(index.value if isinstance(index, yaml.ScalarNode) else index)
        if len(self._path) > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark, self._path)
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node not in self._sizes:  # its anchor is still being composed
                raise _Refused("an alias inside its own anchor (recursive data)", event.start_mark, self._path)
            self._count(self._sizes[node], event.start_mark)
            self._path.pop()
            return node
        before = self._nodes
        self._count(1, event.start_mark)
        node = super().compose_node(parent, index)
        self._keys[node] = tuple(self._path)
        self._path.pop()
        if event.anchor is not None:
            self._sizes[node] = self._nodes - before
        return node

    def construct_mapping(self, node, deep=False):
        # YAML lets a later key silently win; in a config that hides a typo or a bad merge.
        seen = set()
        for key, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if key.value in seen:
                    raise _Refused(f"key {show(key.value)} given twice", key.start_mark, self._keys.get(node, ()))
                seen.add(key.value)
        return super().construct_mapping(node, deep)

    def construct_object(self, node, deep=False):
        if node.tag == "tag:yaml.org,2002:int" and len(node.value) > 100:  # 1:59:59:... is quadratic
            raise _Refused("integer literal longer than 100 characters", node.start_mark, self._keys.get(node, ()))
        try:
            data = super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception:  # PyYAML's converters fail in many ways on explicit tags: `!!bool x`, `!!int ''`
            raise _Refused(f"cannot read {show(node.value)} as {node.tag.rsplit(':', 1)[-1]}",
                           node.start_mark, self._keys.get(node, ())) from None
        if type(data) is int and not -MAX_INT - 1 <= data <= MAX_INT:
            raise _Refused("integer beyond 64 bits", node.start_mark, self._keys.get(node, ()))
        return data


def _key_text(path) -> str:
    """('tasks', 'miniwob', 'seeds', 3) -> 'tasks.miniwob.seeds[3]'; mapping keys (None) are skipped."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str):
            out += ("." if out else "") + show(part)[1:-1]
    return (out if len(out) <= 200 else out[:200] + "...") or "top level"


def _load_yaml(text: str, source: str, base: tuple = ()):
    """Parse one YAML document within the bounds; `source` starts every error message."""
    try:
        loader = _BoundedLoader(text, base)  # already checks the characters
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except _Refused as e:
        raise ConfigError(f"{source}: {e.key}: {e.problem} (line {e.problem_mark.line + 1})") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: malformed YAML: {_yaml_problem(e)}") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    # PyYAML's own text names a placeholder "<unicode string>" and can quote megabytes.
    mark = getattr(e, "problem_mark", None)
    if mark is not None:
        text = f"line {mark.line + 1}, column {mark.column + 1}: " + ", ".join(filter(None, (e.context, e.problem)))
    elif isinstance(e, yaml.reader.ReaderError):
        text = f"character {e.position}: unacceptable character #x{e.character:04x}"
    else:
        text = str(e)
    return text if len(text) <= 300 else text[:300] + "..."


def _read_yaml(path: str) -> dict:
    raw = _load_yaml(read_text(path, MAX_FILE_BYTES, "config"), str(path))
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
    return raw


def load_config(path: str, overrides: tuple[str, ...] = ()) -> Config:
    """Read, override (`a.b=value`) and validate a config file."""
    raw = _read_yaml(path)
    for item in overrides:
        _apply_override(raw, item, path)
    cfg = _build(Config, raw, path, "")
    cfg.source = str(path)
    _check(cfg, path)
    return cfg


_KEY_PART = re.compile(r"[A-Za-z0-9_-]{1,100}")


def _apply_override(raw: dict, item: str, path: str) -> None:
    key, sep, value = item.partition("=")
    source = f"{path}: --set {show(item)}"
    parts = key.split(".")
    if not sep or len(parts) >= MAX_DEPTH or not all(_KEY_PART.fullmatch(p) for p in parts):
        raise ConfigError(f"{source}: expected KEY.PATH=VALUE")
    if len(value) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}: the value is longer than {MAX_FILE_BYTES} characters")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: {part} is not a section")
    node[parts[-1]] = _load_yaml(value, source, tuple(parts)) if value else ""


def _build(cls, raw, path: str, prefix: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: {prefix or 'top level'}: expected a mapping, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    for key in raw:
        if key not in fields:
            where = f"{prefix}.{key}" if prefix else str(key)
            raise ConfigError(f"{path}: unknown key {show(where)} (known: {', '.join(fields)})")
    kwargs = {}
    for name, value in raw.items():
        key = f"{prefix}.{name}" if prefix else name
        kwargs[name] = value = _coerce(hints[name], value, path, key)
        check = fields[name].metadata.get("check")
        any_char = fields[name].metadata.get("any_char", False)
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for i, v in items:
            problem = isinstance(v, str) and text_problem(v, any_char=any_char)
            problem = problem or (check and v is not None and check(v))
            if problem:
                raise ConfigError(f"{path}: {key}{'' if i is None else f'[{i}]'}: {problem}")
    return cls(**kwargs)


def _coerce(tp, value, path: str, key: str):
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path, key)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(inner, value, path, key)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{path}: {key}: must be one of {', '.join(map(str, choices))}, got {show(value)}")
        return value
    if origin is list:
        (inner,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{path}: {key}: expected a list, got {type(value).__name__}")
        return [_coerce(inner, v, path, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {key}: expected a mapping, got {type(value).__name__}")
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, tp) or (tp is not bool and isinstance(value, bool)):
        raise ConfigError(f"{path}: {key}: expected {tp.__name__}, got {type(value).__name__} {show(value)}")
    if tp is float and not math.isfinite(value):
        raise ConfigError(f"{path}: {key}: must be a finite number, got {value}")
    return value


def _check(cfg: Config, path: str) -> None:
    """Checks across keys; each key's own range is checked while building."""
    if cfg.model.provider == "openai" and not cfg.model.endpoints and not cfg.model.fleet:
        raise ConfigError(f"{path}: model.endpoints: the openai provider needs endpoints or model.fleet")
    if cfg.model.reload_from == "mysql" and not (cfg.storage.mysql.url_env and cfg.model.fleet):
        raise ConfigError(f"{path}: model.reload_from: mysql needs storage.mysql.url_env and a fleet "
                          "(model.fleet or --fleet) to reload")
    if cfg.runner.backend == "ray" and cfg.env.url == "local":
        raise ConfigError(f"{path}: env.url: 'local' starts an env server on this host only; with "
                          "runner.backend: ray, start `cua env-server` where every Ray node can reach it "
                          "and set env.url to it")
    if cfg.model.provider == "replay" and not cfg.model.replay_run:
        raise ConfigError(f"{path}: model.replay_run: the replay provider needs a run folder")
