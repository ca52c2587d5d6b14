"""Model providers: anything that turns a step's prompt into response text.

A provider has `episode(task_id, sample) -> EpisodeModel`, and an
EpisodeModel has `complete(request) -> Reply` and `close()`. Per-episode objects let a
provider stick to one endpoint (prefix cache) or replay one trajectory.
"""

from dataclasses import dataclass, field


@dataclass
class Request:
    messages: list[dict]
    step: int
    width: int
    height: int
    should_stop: object = field(default=lambda: False)
    timeout: float = 120.0


@dataclass
class Reply:
    text: str
    endpoint: str | None = None
    model_version: str | None = None
    token_ids: list[int] | None = None     # with record_logprobs
    logprobs: list[float] | None = None


def make_provider(cfg, secrets: dict, router=None):
    """The provider named by `model.provider` in the config."""
    if cfg.model.provider == "openai":
        from .openai_chat import OpenAIChat
        fleet = cfg.resolve_path(cfg.model.fleet) if cfg.model.fleet else None
        return OpenAIChat(cfg.model, secrets.get("model"), router, fleet)
    if cfg.model.provider == "random":
        from .random_actions import RandomActions
        return RandomActions(cfg.model.seed, cfg.agent.coord_mode)
    from .replay import Replay
    return Replay(cfg.resolve_path(cfg.model.replay_run), cfg.agent.coord_mode)
