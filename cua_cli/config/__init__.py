"""Configs: YAML -> validated pydantic models, with errors that name the file and the key.

    models.py          the rollout config (`cua rollout CONFIG`): every key, its range and description
    start_models.py    the fleet's config (`cua start-models --config`), and vLLM's flags from it
    fields.py          the value types keys are made of (ranges, names, URLs, kind names)
    loading.py         load_config / load_fleet_config: read, override with --set, validate
    bounded_yaml.py    YAML within bounds (depth, alias expansion, 64-bit integers, keys given twice)
    bounds.py          how far input is trusted (also task files from other processes), `show`
    messages.py        a pydantic error as one line: "key.path: what was expected, got <value>"
    rollout_checks.py  what `cua rollout` needs beyond a valid config; model.fleet -> endpoints
    fleet_file.py      reading the fleet file `cua start-models` writes (a contract)
    describe.py        the JSON Schema, and a config with its defaults, for `cua config`

Imports nothing above it but errors, _util and kinds: kind names are checked
against the kinds.py tables, not against the plug-ins.
"""

from .bounds import MAX_NAME, data_problem, read_text, show, text_problem
from .describe import fleet_json_schema, json_schema, resolved_yaml
from .loading import load_config, load_fleet_config
from .models import Config
from .rollout_checks import for_rollout
from .start_models import FleetConfig, vllm_flags

__all__ = ["MAX_NAME", "Config", "FleetConfig", "data_problem", "fleet_json_schema", "for_rollout", "json_schema",
           "load_config", "load_fleet_config", "read_text", "resolved_yaml", "show", "text_problem", "vllm_flags"]
