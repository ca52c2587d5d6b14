"""Answers read from a file, one per step: `{task_id: [answer text, ...]}` (`model.script`).

For oracle checks of task files (the right answers must score 1) and for tests.
Each answer is parsed by the configured agent as any model's would be. Once a
task's answers run out, the agent is told nothing more: every later step gets
the agent's answer that does nothing (its `idle`, else the one that ends the
episode), so the episode ends on the agent's own DONE/FAIL or at max_steps.
"""

import json

from ..config import read_text
from ..errors import ConfigError, ModelError
from . import Params, Reply

MAX_SCRIPT_BYTES = 64 << 20


class Script:
    def __init__(self, answers: dict[str, list[str]]):
        self.answers = answers

    @classmethod
    def from_config(cls, cfg, secrets: dict, shared) -> "Script":
        return cls(read_script(cfg.resolve_path(cfg.model.script)))

    def session(self, task_id: str, sample: int) -> "_Session":
        return _Session(list(self.answers.get(task_id, [])))


def read_script(path) -> dict[str, list[str]]:
    """The answers file, checked: a JSON object of task id -> list of answer strings."""
    text = read_text(path, MAX_SCRIPT_BYTES, "model.script")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ConfigError(f"model.script: {path} is not JSON: {e}") from None
    if not isinstance(doc, dict) or not all(
            isinstance(v, list) and all(isinstance(a, str) for a in v) for v in doc.values()):
        raise ConfigError(f"model.script: {path} must be a JSON object of task id -> list of answer strings")
    return doc


class _Session:
    def __init__(self, answers: list[str]):
        self.answers = answers

    async def complete(self, messages: list[dict], params: Params) -> Reply:
        if params.step < len(self.answers):
            return Reply(self.answers[params.step], "script")
        nothing = params.answers.idle or params.answers.end
        if nothing is None:
            raise ModelError("the script has no answer for this step, and the agent has none that does nothing")
        return Reply(nothing, "script")

    def close(self) -> None:
        pass
