"""OSWorld's own answer format: fenced blocks of pyautogui code, or WAIT, DONE or FAIL.

So OSWorld's baselines (a model prompted or trained on its screenshot-in,
code-out action space) play through cua unchanged. The code is data: it goes
to the desktop as text (OSWorld's `/execute`), and cua never runs it itself.
DONE ends the episode as `finished`, FAIL as `fail` (what OSWorld's infeasible
tasks ask for).

What the model sees each step is OSWorld's observation_type (`agent.observation`):
the screenshot, the desktop's accessibility tree as OSWorld's table (cut to a
token budget, osworld/a11y_tree.py), or both; OSWorld's `som` is not offered.
The last `history_images` observations stay in the prompt, trees included.
"""

import re
from random import Random

from .._util.budget import Budget
from ..actions import Action, osworld_command
from ..envs import Observation
from ..errors import ParseError
from ..models import AnswerFormat, Image, ModelSession
from ..osworld.a11y_tree import cut, table
from . import Answer, Turn
from .asking import AskingEpisode

MAX_ANSWER_CHARS = 32_000
COMMANDS = ("WAIT", "DONE", "FAIL")
# A fenced block: ```python\n...```, ```\n...``` or ```DONE```.
_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n?(.*?)```", re.S | re.I)

PROMPT = """You control an Ubuntu computer through Python code that uses pyautogui, \
to do this task: {instruction}

After each of your answers you get {observation}. \
Answer with one or more fenced code blocks:
```python
pyautogui.click(100, 200)
```
Each block runs on its own, so import nothing and keep no state between blocks; \
pyautogui.locateOnScreen cannot see the screen, so use coordinates you read off {source}. \
Answer ```WAIT``` to let the computer work, ```DONE``` when the task is done, \
and ```FAIL``` if it cannot be done. Think first if you like; only the blocks are run."""
_TABLE = ("a table with a row per element you can see and use (its tag, name, text, class, description, "
          "the position of its top-left corner and its size)")
# agent.observation -> (what the model gets after each answer, where it reads coordinates)
OBSERVATIONS = {
    "screenshot": ("a new screenshot of the {width}x{height} screen", "the screenshot"),
    "a11y_tree": ("the accessibility tree of the {width}x{height} screen: " + _TABLE, "the table"),
    "screenshot_a11y_tree": ("a new screenshot of the {width}x{height} screen and its accessibility tree: " + _TABLE,
                             "the screenshot or the table"),
}
TREE = "The accessibility tree of the screen:\n{table}"


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
    def __init__(self, history_images: int = 3, parse_retries: int = 2, observation: str = "screenshot",
                 a11y_tree_max_tokens: int = 10_000):
        if history_images < 1:
            raise ValueError("history_images must be >= 1 (the current screenshot is always sent)")
        self.history_images = history_images
        self.parse_retries = parse_retries
        self.observation = observation
        self.a11y_tree_max_tokens = a11y_tree_max_tokens

    @classmethod
    def from_config(cls, cfg) -> "OSWorldAgent":
        a = cfg.agent
        return cls(a.history_images, a.parse_retries, a.observation, a.a11y_tree_max_tokens)

    def start(self, instruction: str, model: ModelSession) -> "OSWorldEpisode":
        return OSWorldEpisode(self, instruction, model)

    def answer_for(self, action: Action, width: int, height: int) -> str:
        """What this agent's model answers to take `action` (how a person's demonstration is written)."""
        code = osworld_command(action)
        return f"```{code}```" if code in COMMANDS else f"```python\n{code}\n```"


class OSWorldEpisode(AskingEpisode):
    """The task, then each step's observation (the last `history_images` kept) and answer."""

    def __init__(self, agent: OSWorldAgent, instruction: str, model: ModelSession):
        super().__init__(model, agent.parse_retries)
        self.agent = agent
        self.instruction = instruction
        self.history: list[tuple[list, str]] = []  # each step's message parts, and the answer to them
        self.current: tuple[Observation, list, Turn] | None = None

    async def ask(self, observation: Observation, turn: Turn, budget: Budget) -> None:
        if self.current is not None:
            _, parts, last = self.current
            self.history.append((parts, last.reply.text))
        parts = self._parts(observation)
        self.current = (observation, parts, turn)
        self.step = len(self.history)
        observes, source = OBSERVATIONS[self.agent.observation]
        prompt = PROMPT.replace("{observation}", observes).replace("{source}", source)
        prompt = prompt.replace("{width}", str(observation.width)).replace("{height}", str(observation.height))
        messages = [{"role": "system", "content": prompt.replace("{instruction}", self.instruction)}]
        first_shown = len(self.history) - (self.agent.history_images - 1)
        for i, (old, answer) in enumerate(self.history):
            if i >= first_shown:
                messages.append({"role": "user", "content": old})
            messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": parts})
        turn.prompt = messages
        await self.answer(turn, budget)

    def _parts(self, observation: Observation) -> list:
        """What the model is shown of one observation: the screenshot and/or the tree's table."""
        parts: list = []
        if self.agent.observation != "a11y_tree":
            parts.append(Image(observation.screenshot, observation.file, observation.reread))
        if self.agent.observation != "screenshot":
            text = cut(table(observation.a11y_tree), self.agent.a11y_tree_max_tokens)
            parts.append({"type": "text", "text": TREE.replace("{table}", text)})
        return parts

    def answer_format(self) -> AnswerFormat:
        obs = self.current[0]
        return AnswerFormat(random=lambda rng: random_answer(rng, obs.width or 1, obs.height or 1),
                            end="```DONE```", idle="```WAIT```")

    def parse(self, text: str) -> Answer:
        thought, blocks = parse_blocks(text)
        actions = [{"type": b.lower()} if b in COMMANDS else {"type": "code", "code": b} for b in blocks]
        stop = {"DONE": "finished", "FAIL": "fail"}.get(blocks[-1])
        return Answer(thought, actions, [b for b in blocks if b not in ("DONE", "FAIL")], stop)
