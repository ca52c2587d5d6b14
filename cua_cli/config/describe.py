"""What `cua config` prints: the JSON Schema of the config files, and a config with every default filled in."""

import yaml

from .._util.redact import mask_userinfo
from .models import Config
from .start_models import FleetConfig

_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict:
    """The JSON Schema of a rollout config (what editors check configs/*.yaml against)."""
    return {"$schema": _DIALECT, **Config.model_json_schema()}


def fleet_json_schema() -> dict:
    """The JSON Schema of a `cua start-models --config` file."""
    return {"$schema": _DIALECT, **FleetConfig.model_json_schema()}


def resolved_yaml(cfg: Config) -> str:
    """`cfg` as YAML with every key, defaults included; URL passwords masked. Loads back as the same config."""
    return yaml.safe_dump(_masked(cfg.to_dict()), sort_keys=False, allow_unicode=True)


def _masked(value):
    if isinstance(value, str):
        return mask_userinfo(value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value
