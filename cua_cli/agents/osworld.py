"""OSWorld's own answer format: fenced blocks of pyautogui code, or WAIT, DONE or FAIL.

So OSWorld's baselines (a model prompted or trained on its screenshot-in,
code-out action space) play through cua unchanged. The code is data: it goes
to the desktop as text (OSWorld's `/execute`), and cua never runs it itself.
DONE ends the episode as `finished`, FAIL as `fail` (what OSWorld's infeasible
tasks ask for).
"""

import re
from random import Random

from .._util.budget import Budget
from ..envs import Observation
from ..errors import ParseError
from ..models import AnswerFormat, Image, ModelSession
from . import Answer, Turn
from .asking import AskingEpisode

MAX_ANSWER_CHARS = 32_000
COMMANDS = ("WAIT", "DONE", "FAIL")
# A fenced block: ```python\n...```, ```\n...``` or ```DONE```.
_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n?(.*?)```", re.S | re.I)

PROMPT = """You control an Ubuntu computer through Python code that uses pyautogui, \
to do this task: {instruction}

After each of your answers you get a new screenshot of the {width}x{height} screen. \
Answer with one or more fenced code blocks:
```python
pyautogui.click(100, 200)
```
Each block runs on its own, so import nothing and keep no state between blocks; \
pyautogui.locateOnScreen cannot see the screen, so use coordinates you read off the screenshot. \
Answer ```WAIT``` to let the computer work, ```DONE``` when the task is done, \
and ```FAIL``` if it cannot be done. Think first if you like; only the blocks are run."""


def parse_blocks(text: str) -> tuple[str | None, list[str]]:
    """(thought, blocks) of an answer: each block is code or one of WAIT/DONE/FAIL; a bare
    WAIT/DONE/FAIL answer counts too. ParseError when there is no block, or a command is not last."""
    if len(text) > MAX_ANSWER_CHARS:
        raise ParseError(f"answer longer than {MAX_ANSWER_CHARS} characters")
    if text.strip() in COMMANDS:
        return None, [text.strip()]
    found = list(_BLOCK.finditer(text))
    blocks = [m.group(1).strip() for m in found]
    blocks = [b for b in blocks if b]
    if not blocks:
        raise ParseError("no code block: answer with ```python ...```, or ```WAIT```, ```DONE```, ```FAIL```")
    ends = [i for i, b in enumerate(blocks) if b in ("DONE", "FAIL")]
    if ends and ends[0] != len(blocks) - 1:
        raise ParseError(f"{blocks[ends[0]]} must be the last block")
    thought = text[:found[0].start()].strip()
    return thought or None, blocks


def random_answer(rng: Random, width: int, height: int) -> str:
    """A well-formed answer at a random point (the `random` baseline)."""
    x, y = rng.randrange(max(width, 1)), rng.randrange(max(height, 1))
    return f"A random move.\n```python\npyautogui.click({x}, {y})\n```"


class OSWorldAgent:
    def __init__(self, history_images: int = 3, parse_retries: int = 2):
        if history_images < 1:
            raise ValueError("history_images must be >= 1 (the current screenshot is always sent)")
        self.history_images = history_images
        self.parse_retries = parse_retries

    @classmethod
    def from_config(cls, cfg) -> "OSWorldAgent":
        return cls(cfg.agent.history_images, cfg.agent.parse_retries)

    def start(self, instruction: str, model: ModelSession) -> "OSWorldEpisode":
        return OSWorldEpisode(self, instruction, model)


class OSWorldEpisode(AskingEpisode):
    """The task, then each step's screenshot (the last `history_images` kept) and answer."""

    def __init__(self, agent: OSWorldAgent, instruction: str, model: ModelSession):
        super().__init__(model, agent.parse_retries)
        self.agent = agent
        self.instruction = instruction
        self.history: list[tuple[Image, str]] = []
        self.current: tuple[Observation, Image, Turn] | None = None

    def ask(self, observation: Observation, turn: Turn, budget: Budget) -> None:
        if self.current is not None:
            _, image, last = self.current
            self.history.append((image, last.reply.text))
        image = Image(observation.screenshot, observation.file)
        self.current = (observation, image, turn)
        self.step = len(self.history)
        prompt = PROMPT.replace("{width}", str(observation.width)).replace("{height}", str(observation.height))
        messages = [{"role": "system", "content": prompt.replace("{instruction}", self.instruction)}]
        first_with_image = len(self.history) - (self.agent.history_images - 1)
        for i, (old, answer) in enumerate(self.history):
            if i >= first_with_image:
                messages.append({"role": "user", "content": [old]})
            messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": [image]})
        turn.prompt = messages
        self.answer(turn, budget)

    def answer_format(self) -> AnswerFormat:
        obs = self.current[0]
        return AnswerFormat(random=lambda rng: random_answer(rng, obs.width or 1, obs.height or 1),
                            end="```DONE```", idle="```WAIT```")

    def parse(self, text: str) -> Answer:
        thought, blocks = parse_blocks(text)
        actions = [{"type": b.lower()} if b in COMMANDS else {"type": "code", "code": b} for b in blocks]
        stop = {"DONE": "finished", "FAIL": "fail"}.get(blocks[-1])
        return Answer(thought, actions, [b for b in blocks if b not in ("DONE", "FAIL")], stop)
