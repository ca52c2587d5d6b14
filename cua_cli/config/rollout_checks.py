"""What `cua rollout` accepts beyond a valid config, checked before anything starts.

A config that loads may still not be playable: the agent must play the kind
of env it is given, adaptive rounds run only as a service, the local env
server speaks one AgentGym env only, and a fleet file must list healthy
servers. Other commands (`cua config show`) read a config without these.
"""

from ..errors import ConfigError, FleetFileError
from ..kinds import AGENT_MODALITIES, ENV_MODALITIES
from .fleet_file import api_base, read_fleet
from .models import Config


def for_rollout(cfg: Config, watch: bool) -> None:
    """Refuse what a rollout cannot play (a ConfigError naming the key), and point cfg.model at the
    servers of model.fleet."""
    _check_pairing(cfg)
    if cfg.tasks.adaptive.rounds and not watch:
        raise ConfigError(f"{cfg.source}: tasks.adaptive: adaptive rounds run as a service: add --watch")
    if cfg.env.url == "local" and cfg.env.kind == "agentgym":
        _check_local_agentgym(cfg)
    if cfg.model.fleet:
        _use_fleet(cfg)


def _check_pairing(cfg: Config) -> None:
    """The agent must play the kind of env it is given: screenshots and GUI actions, or text; only
    OSWorld's agent reads a desktop's accessibility tree."""
    env, agent = ENV_MODALITIES[cfg.env.kind], AGENT_MODALITIES[cfg.agent.kind]
    if env != agent:
        raise ConfigError(f"{cfg.source}: agent.kind: {cfg.agent.kind} plays {agent} envs, "
                          f"but env.kind {cfg.env.kind} is a {env} env")
    if cfg.agent.observation != "screenshot" and (cfg.agent.kind, cfg.env.kind) != ("osworld", "osworld"):
        raise ConfigError(f"{cfg.source}: agent.observation: {cfg.agent.observation} is a desktop's accessibility "
                          "tree: it needs agent.kind osworld on env.kind osworld")


def _check_local_agentgym(cfg: Config) -> None:
    """The local env server serves AgentGym's WebArena protocol, over the MiniWoB tasks the config lists."""
    if cfg.env.agentgym.env != "webarena":
        raise ConfigError(f"{cfg.source}: env.agentgym.env: the local env server speaks AgentGym's webarena "
                          f"protocol only, not {cfg.env.agentgym.env}; point env.url at that env's server")
    if not cfg.env.local.agentgym_tasks:
        raise ConfigError(f"{cfg.source}: env.local.agentgym_tasks: list the MiniWoB tasks the local server's "
                          "AgentGym routes serve")


def _use_fleet(cfg: Config) -> None:
    """Point the model client at the servers of a `cua start-models` fleet file."""
    path = cfg.resolve_path(cfg.model.fleet)
    try:
        doc = read_fleet(path)
    except FleetFileError as e:
        raise ConfigError(f"{cfg.source}: model.fleet: {e}") from None
    if not doc["servers"]:
        raise ConfigError(f"{cfg.source}: model.fleet: {path} lists no healthy server")
    cfg.model.provider = "openai"
    cfg.model.endpoints = [api_base(s["url"]) for s in doc["servers"]]
    cfg.model.name = doc["servers"][0].get("served_model_name") or cfg.model.name
