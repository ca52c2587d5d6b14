"""How every agent deals with its model within a step: ask until an answer parses,
and ask again after the env refused an action, up to the agent's retry limit."""

import time

from .._util.budget import Budget
from ..errors import ParseError
from ..models import AnswerFormat, ModelSession, Params
from . import Answer, Turn


class AskingEpisode:
    """Base of an agent's episode; subclasses say how to read an answer and what answers look like."""

    def __init__(self, model: ModelSession, retries: int):
        self.model = model
        self.retries = retries
        self.step = 0  # steps asked before the current one

    def parse(self, text: str) -> Answer:
        raise NotImplementedError

    def answer_format(self) -> AnswerFormat:
        raise NotImplementedError

    async def refused(self, turn: Turn, error: str, budget: Budget) -> None:
        turn.failed(f"env refused the action: {error}", "action_refused", commands=list(turn.sent))
        if turn.tries <= self.retries:
            await self.answer(turn, budget)

    async def answer(self, turn: Turn, budget: Budget) -> None:
        """Ask with `turn.prompt` until an answer parses or the tries run out."""
        answers = self.answer_format()
        while True:
            t = time.monotonic()
            try:
                reply = await self.model.complete(turn.prompt, Params(self.step, budget, answers))
            finally:
                turn.model_s += time.monotonic() - t
            turn.answered(reply)
            try:
                a = self.parse(reply.text)
            except ParseError as e:
                turn.failed(f"parse: {e}", "parse_error")
                if turn.tries > self.retries:
                    return
                continue
            turn.thought, turn.actions, turn.send, turn.stop = a.thought, a.actions, a.send, a.stop
            return
