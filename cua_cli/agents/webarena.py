"""WebArena's format: free reasoning that ends with the action in a ``` fence.

`In summary, the next action I will perform is ```click [12]``` `. The action
is the first fence's content; its grammar (`click [id]`, `type [id] [text]
[0|1]`, `stop [answer]`, ...) is read into a structured record, and an action
outside it still goes to the env, which explains what it could not do.
"""

import random
import re

from ..errors import ParseError
from ..models import AnswerFormat, ModelSession
from . import Answer
from .agentgym_prompts import WEBARENA_ACTION_PATTERN, WEBARENA_INSTRUCTIONS
from .text import GUIDED_THOUGHT_CHARS, MAX_ANSWER_CHARS, TextEpisode

MAX_ACTION_CHARS = 4000
SUMMARY = "In summary, the next action I will perform is "
_FENCE = re.compile(r"```([^`]*)```")  # no backtick inside: one way to match, linear
_CALL = re.compile(r"([a-z_]+)((?:[ \t]*\[[^\]\n]*\])*)")
_ARG = re.compile(r"\[([^\]\n]*)\]")
_IDS = re.compile(r"^\s*\[(\d{1,9})\]", re.M)


def parse_webarena(text: str) -> tuple[str | None, str, dict]:
    """(reasoning, action, structured action) of a WebArena answer; ParseError without a fenced action."""
    if len(text) > MAX_ANSWER_CHARS:
        raise ParseError(f"answer longer than {MAX_ANSWER_CHARS} characters")
    fence = _FENCE.search(text)
    if not fence:
        raise ParseError("no action in a ``` fence")
    action = fence[1].strip()
    if not action:
        raise ParseError("empty ``` fence")
    if len(action) > MAX_ACTION_CHARS:
        raise ParseError(f"action longer than {MAX_ACTION_CHARS} characters")
    call = _CALL.fullmatch(action)
    structured = ({"type": call[1], "args": _ARG.findall(call[2]), "text": action} if call
                  else {"type": "text", "text": action})
    reasoning = text[:fence.start()].replace(SUMMARY, "").strip()
    return reasoning or None, action, structured


class WebArenaAgent:
    def __init__(self, history_chars: int = 32_000, parse_retries: int = 2):
        self.instructions = WEBARENA_INSTRUCTIONS
        self.history_chars = history_chars
        self.parse_retries = parse_retries

    @classmethod
    def from_config(cls, cfg) -> "WebArenaAgent":
        return cls(cfg.agent.history_chars, cfg.agent.parse_retries)

    def start(self, instruction: str, model: ModelSession) -> "WebArenaEpisode":
        return WebArenaEpisode(self, instruction, model)


class WebArenaEpisode(TextEpisode):
    def parse(self, text: str) -> Answer:
        reasoning, action, structured = parse_webarena(text)
        return Answer(reasoning, [structured], [action], "finished" if structured["type"] == "stop" else None)

    def answer_format(self) -> AnswerFormat:
        ids = _IDS.findall(self.observation)
        grammar = rf"[A-Za-z0-9 ,.']{{1,{GUIDED_THOUGHT_CHARS}}}\. {SUMMARY}```(?:{WEBARENA_ACTION_PATTERN})```"
        end = f"The recording ends here. {SUMMARY}```stop [N/A]```"
        return AnswerFormat(grammar, lambda rng: _random(rng, ids), end)


def _random(rng: random.Random, ids: list[str]) -> str:
    action = f"click [{rng.choice(ids)}]" if ids else "scroll [down]"
    return f"A random move. {SUMMARY}```{action}```"
