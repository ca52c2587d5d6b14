"""ReAct for AgentGym's text envs: `Thought: ...` then `Action: <one action>`.

The instructions (each env's action vocabulary and output format) are in
agentgym_prompts.py. Only the answer's format is checked here: whether the
action means anything is the env's to say, in its next observation.
"""

import random
import re

from ..errors import ParseError
from ..models import AnswerFormat, ModelSession
from . import Answer
from .agentgym_prompts import ACTION_PATTERNS, EXAMPLES, INSTRUCTIONS
from .text import GUIDED_THOUGHT_CHARS, MAX_ANSWER_CHARS, TextEpisode

MAX_ACTION_CHARS = 4000
_ACTION = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*", re.M)
_THOUGHT = re.compile(r"^\s*Thought\s*:\s*")


def parse_react(text: str) -> tuple[str | None, str]:
    """(thought, action) of a ReAct answer; ParseError unless it holds exactly one action."""
    if len(text) > MAX_ANSWER_CHARS:
        raise ParseError(f"answer longer than {MAX_ANSWER_CHARS} characters")
    labels = list(_ACTION.finditer(text))
    if len(labels) != 1:
        raise ParseError("expected exactly one 'Action:' line" + (f", got {len(labels)}" if labels else ""))
    action = text[labels[0].end():].strip()
    if not action:
        raise ParseError("empty action after 'Action:'")
    if len(action) > MAX_ACTION_CHARS:
        raise ParseError(f"action longer than {MAX_ACTION_CHARS} characters")
    thought = _THOUGHT.sub("", text[:labels[0].start()]).strip()
    return thought or None, action


class ReactAgent:
    def __init__(self, env: str, history_chars: int = 32_000, parse_retries: int = 2):
        self.env = env
        self.instructions = INSTRUCTIONS[env]
        self.history_chars = history_chars
        self.parse_retries = parse_retries

    @classmethod
    def from_config(cls, cfg) -> "ReactAgent":
        return cls(cfg.env.agentgym.env, cfg.agent.history_chars, cfg.agent.parse_retries)

    def start(self, instruction: str, model: ModelSession) -> "ReactEpisode":
        return ReactEpisode(self, instruction, model)


class ReactEpisode(TextEpisode):
    def parse(self, text: str) -> Answer:
        thought, action = parse_react(text)
        return Answer(thought, [{"type": "text", "text": action}], [action])

    def answer_format(self) -> AnswerFormat:
        env = self.agent.env
        return AnswerFormat(rf"Thought: [^\n]{{1,{GUIDED_THOUGHT_CHARS}}}\nAction: (?:{ACTION_PATTERNS[env]})",
                            lambda rng: _random(rng, env))


def _random(rng: random.Random, env: str) -> str:
    return f"Thought: a random move.\nAction: {rng.choice(EXAMPLES[env])}"
