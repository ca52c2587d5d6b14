"""Rollout config: YAML -> validated, typed dataclasses.

Unknown keys, wrong types and missing files are errors that name the file
and the key path (`runner.num_envs`), so a typo never silently falls back to
a default.
"""

import dataclasses
import json
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

import yaml


class ConfigError(Exception):
    """Bad config: the message names the file and the key."""


@dataclass
class RunConfig:
    name: str = "run"                 # run folder = <results_dir>/<name>-<timestamp>
    results_dir: str = "results"


@dataclass
class MiniwobTasks:
    names: list[str] = field(default_factory=list)   # e.g. click-test-2 (no miniwob/ prefix, no -v1)
    seeds: list[int] = field(default_factory=lambda: [0])
    episode_max_time: Optional[float] = None          # MiniWoB's own time limit per episode, s


@dataclass
class OsworldTasks:
    task_list: str = ""              # {"domain": [task_id, ...]}
    examples_dir: str = ""           # <examples_dir>/<domain>/<task_id>.json
    domains: Optional[list[str]] = None


@dataclass
class TasksConfig:
    kind: Literal["miniwob", "osworld", "jsonl"] = "miniwob"
    miniwob: MiniwobTasks = field(default_factory=MiniwobTasks)
    osworld: OsworldTasks = field(default_factory=OsworldTasks)
    jsonl: str = ""                  # one task object per line
    rollout_n: int = 1               # samples per task
    limit: Optional[int] = None      # first N tasks only


@dataclass
class LocalEnvServer:
    max_envs: int = 4
    port: int = 0                    # 0: pick a free port


@dataclass
class EnvConfig:
    url: str = "local"               # "local" starts the built-in MiniWoB server
    local: LocalEnvServer = field(default_factory=LocalEnvServer)
    token_env: Optional[str] = None  # name of the env var holding the token
    os: str = "linux"
    timeout_s: float = 60.0          # per request
    retries: int = 3                 # per request, with exponential backoff
    allocate_wait_s: float = 300.0   # how long to wait for a free env (HTTP 503)


@dataclass
class ModelConfig:
    provider: Literal["openai", "random", "replay"] = "random"
    endpoints: list[str] = field(default_factory=list)   # http://host:port/v1
    fleet: Optional[str] = None      # a `cua start-models` fleet file: its servers become the endpoints
    name: str = "ui-tars"            # served model name
    api_key_env: Optional[str] = None
    temperature: float = 0.0
    max_tokens: int = 512
    timeout_s: float = 120.0
    retries: int = 3
    guided: bool = False             # constrain answers to the agent's action grammar (vLLM structured_outputs)
    routing: Literal["sticky", "round_robin"] = "sticky"  # sticky: one server per episode (prefix cache)
    record_prompt: bool = False      # RL: store the exact messages sent (images by file name)
    record_logprobs: bool = False    # RL: store sampled token ids and their logprobs
    seed: int = 0                    # random provider
    replay_run: Optional[str] = None  # replay provider: run folder to replay


@dataclass
class AgentConfig:
    kind: Literal["uitars"] = "uitars"
    coord_mode: Literal["qwen25vl", "qwen2vl"] = "qwen25vl"
    history_images: int = 5
    language: str = "English"
    parse_retries: int = 2           # re-ask the model this often on unparseable text


@dataclass
class RunnerConfig:
    num_envs: int = 4                # concurrent episodes overall
    processes: Optional[int] = None  # runner processes; default: min(num_envs, CPU count)
    max_steps: int = 15
    step_timeout_s: float = 180.0
    episode_timeout_s: float = 1800.0
    max_attempts: int = 3            # infrastructure errors before a pair is failed
    lease_ttl_s: float = 60.0        # a claim whose heartbeat is older is reclaimed
    poll_s: float = 1.0              # --watch: how often to look for new task files


@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
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
    model: Optional[str] = None
    served_model_name: Optional[str] = None
    gpus: Optional[str] = None
    cpu: Optional[int] = None
    tp: int = 1
    base_port: int = 8000
    vllm_args: dict = field(default_factory=dict)   # {max-model-len: 4096, enforce-eager: true, ...}
    env: dict = field(default_factory=dict)         # extra environment for the servers
    ready_timeout_s: float = 900.0
    check_interval_s: float = 5.0


def load_fleet_config(path: str) -> FleetConfig:
    raw = _read_yaml(path)
    cfg = _build(FleetConfig, raw, path, "")
    for key, value in cfg.env.items():
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{path}: env.{key}: expected a string or number")
    return cfg


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


def _read_yaml(path: str) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config: {e.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: malformed YAML: {e}") from None
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


def _apply_override(raw: dict, item: str, path: str) -> None:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected KEY.PATH=VALUE")
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{path}: --set {key}: {part} is not a section")
    node[parts[-1]] = yaml.safe_load(value) if value else ""


def _build(cls, raw, path: str, prefix: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: {prefix or 'top level'}: expected a mapping, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    for key in raw:
        if key not in fields:
            where = f"{prefix}.{key}" if prefix else str(key)
            raise ConfigError(f"{path}: unknown key {where!r} (known: {', '.join(fields)})")
    kwargs = {}
    for name, value in raw.items():
        kwargs[name] = _coerce(hints[name], value, path, f"{prefix}.{name}" if prefix else name)
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
            raise ConfigError(f"{path}: {key}: must be one of {', '.join(map(str, choices))}, got {value!r}")
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
        raise ConfigError(f"{path}: {key}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
    return value


def _check(cfg: Config, path: str) -> None:
    """Value checks that types alone cannot express."""
    positive = {
        "tasks.rollout_n": cfg.tasks.rollout_n, "runner.num_envs": cfg.runner.num_envs,
        "runner.max_steps": cfg.runner.max_steps, "runner.max_attempts": cfg.runner.max_attempts,
        "runner.lease_ttl_s": cfg.runner.lease_ttl_s, "runner.step_timeout_s": cfg.runner.step_timeout_s,
        "runner.episode_timeout_s": cfg.runner.episode_timeout_s, "env.local.max_envs": cfg.env.local.max_envs,
    }
    if cfg.runner.processes is not None:
        positive["runner.processes"] = cfg.runner.processes
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{path}: {key}: must be > 0, got {value}")
    if cfg.model.provider == "openai" and not cfg.model.endpoints and not cfg.model.fleet:
        raise ConfigError(f"{path}: model.endpoints: the openai provider needs endpoints or model.fleet")
    if cfg.model.provider == "replay" and not cfg.model.replay_run:
        raise ConfigError(f"{path}: model.replay_run: the replay provider needs a run folder")
    for key in ("env.token_env", "model.api_key_env"):
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if value is not None and not value.replace("_", "").isalnum():
            raise ConfigError(f"{path}: {key}: must name an environment variable, got {value!r}")
