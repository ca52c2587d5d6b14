"""What text agents share: the conversation, cut to a budget.

The prompt is AgentGym's shape: the env's instructions, an acknowledgement,
then observations (user) and answers (assistant) in turn. When the
conversation outgrows `history_chars`, the oldest steps go first; the
instructions, the first observation (which states the task) and the current
one always stay.
"""

from .._util.budget import Budget
from ..envs import Observation
from ..models import ModelSession
from . import Turn
from .asking import AskingEpisode

MAX_ANSWER_CHARS = 64 * 1024  # longer text is not an answer to parse
# Guided decoding bounds the reasoning before the action, so the action always fits in max_tokens.
GUIDED_THOUGHT_CHARS = 100
ACK = "OK. I will follow these instructions and give one action at a time."


class TextEpisode(AskingEpisode):
    def __init__(self, agent, instruction: str, model: ModelSession):
        super().__init__(model, agent.parse_retries)
        self.agent = agent
        task = f"\n\nYour task: {instruction}" if instruction else ""
        self.opening = [{"role": "user", "content": agent.instructions + task}, {"role": "assistant", "content": ACK}]
        self.steps: list[tuple[str, str]] = []  # (observation, answer) of every step that went on
        self.current: tuple[str, Turn] | None = None

    @property
    def observation(self) -> str:
        return self.current[0]

    async def ask(self, observation: Observation, turn: Turn, budget: Budget) -> None:
        if self.current is not None:  # the step before went on: it joins the conversation
            self.steps.append((self.current[0], self.current[1].reply.text))
        self.current = (observation.text or "", turn)
        self.step = len(self.steps)
        turn.prompt = self.messages()
        await self.answer(turn, budget)

    def messages(self) -> list[dict]:
        """The conversation, its oldest steps left out as far as the budget needs."""
        turns = [m for obs, answer in self.steps for m in (_user(obs), _assistant(answer))] + [_user(self.observation)]
        size = sum(len(m["content"]) for m in self.opening + turns)
        first, rest, dropped = turns[:1], turns[1:], 0
        while size > self.agent.history_chars and len(rest) > 2:  # keep the last answer and the current observation
            size -= len(rest[0]["content"]) + len(rest[1]["content"])  # one answer and the observation after it
            rest, dropped = rest[2:], dropped + 1
        if dropped:
            note = f"\n\n[{dropped} earlier step{'s' if dropped > 1 else ''} left out to keep the history short]"
            first = [_user(first[0]["content"] + note)]
        return self.opening + first + rest


def _user(text: str) -> dict:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}
