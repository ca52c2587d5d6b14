"""`cua start-models --config FILE`: the fleet's settings as a pydantic model, and vLLM's flags from them."""

import json
from typing import Optional

from pydantic import ConfigDict, Field

from .fields import Duration, EnvVars, Name, NonEmpty, Section, VllmArgs, between


class FleetConfig(Section):
    """A `cua start-models --config FILE` file: everything the command line can say (the command line wins),
    plus vllm_args and env."""
    model_config = ConfigDict(title="cua start-models config")

    model: Optional[NonEmpty] = Field(None, description="Model folder or hub name, as `vllm serve` takes it.")
    served_model_name: Optional[Name] = Field(None, description="The name clients use (null: the model's folder "
                                                                "name).")
    gpus: Optional[NonEmpty] = Field(None, description="GPUs to use: 0-7, 0,2,4 or 0-3,6 (or cpu, not both).")
    cpu: Optional[between(int, 0, 256, above=True)] = Field(None, description="Start N servers without GPUs.")
    tp: between(int, 0, 64, above=True) = Field(1, description="Tensor-parallel size: GPUs per server.")
    base_port: between(int, 0, 65535, above=True) = Field(8000, description="First port; taken ports are skipped.")
    vllm_args: VllmArgs = Field({}, description="Flags for every `vllm serve`, e.g. {max-model-len: 4096, "
                                                "enforce-eager: true, limit-mm-per-prompt: {image: 5}}.")
    env: EnvVars = Field({}, description="Extra environment variables for the servers.")
    ready_timeout_s: Duration = Field(900.0, description="Seconds to wait for every server to serve.")
    check_interval_s: Duration = Field(5.0, description="Seconds between health checks of the servers.")


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
