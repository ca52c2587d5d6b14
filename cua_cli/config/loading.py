"""Reading a config: a bounded YAML file, `--set KEY=VALUE` overrides, validation by the models.

Unknown keys, wrong types, values out of range and unreadable files are
errors that name the file and the key path (`runner.num_envs`), so a typo
never silently falls back to a default. Loading any input either returns a
config or raises ConfigError, quickly.
"""

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from .bounded_yaml import apply_override, read_yaml_mapping
from .messages import problem
from .models import Config
from .start_models import FleetConfig

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], raw: dict, path: str) -> M:
    """`raw` as a `model`, or a ConfigError naming the file, the key and what was expected."""
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(f"{path}: {problem(e, model, raw)}") from None


def load_config(path: str, overrides: tuple[str, ...] = ()) -> Config:
    """Read, override (`a.b=value`) and validate a rollout config file."""
    raw = read_yaml_mapping(path)
    for item in overrides:
        apply_override(raw, item, path)
    cfg = validated(Config, raw, path)
    cfg._source = str(path)
    return cfg


def load_fleet_config(path: str) -> FleetConfig:
    """Read and validate a `cua start-models --config` file."""
    return validated(FleetConfig, read_yaml_mapping(path), path)
