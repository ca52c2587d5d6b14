"""UI-TARS: prompt messages, response parsing and coordinate mapping.

The model answers `Thought: ...` then `Action: name(arg='...')`, possibly several
calls on separate lines. Model text is never evaluated: a small scanner reads the
calls, and every regex it uses runs in linear time, so any answer (at most
MAX_RESPONSE_CHARS) parses or fails within milliseconds, and `parse_response`
raises nothing but ParseError.
"""
from __future__ import annotations

import functools
import math
import random
import re
from dataclasses import dataclass

from .._util.budget import Budget
from ..actions import TERMINAL, Action, Cost
from ..envs import Observation
from ..errors import ParseError
from ..models import AnswerFormat, Image, ModelSession
from ..pyautogui_vocab import KEY_NAMES, MAX_CALLS
from . import Answer, Turn
from .asking import AskingEpisode

COORD_MODES = ("qwen25vl", "qwen2vl")

# Our wording; the action names, argument names and Thought/Action layout are
# what the model was trained on, so they must not change.
PROMPT = r"""You operate a computer through its graphical interface to complete a user's task. You are shown the task, your earlier steps and the latest screenshots; reply with the one next step.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space
click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='ctrl c') # lowercase key names joined by spaces, no more than 3 keys
type(content='xxx') # content must read as a Python string, so write \', \" and \n as escapes; a final \n submits the input
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() # pause, then look at a new screenshot
finished(content='xxx') # the task is complete; content may carry the answer, escaped like type
call_user() # the task cannot continue without help from the user

## Note
- Write the Thought in {language}.
- In the Thought, plan briefly, then say in one sentence which action comes next and which element it targets.

## User Instruction
{instruction}
"""


# The action grammar as a regex for vLLM's guided decoding (`structured_outputs`):
# a model held to it cannot answer something `parse_response` rejects.
_PT = r"'\([0-9]{1,4},[0-9]{1,4}\)'"
_TEXT = r"[A-Za-z0-9 .,!?:-]"
_KEY = "(?:" + "|".join(sorted(KEY_NAMES)) + "|[a-z0-9])"
GUIDED_REGEX = (
    r"Thought: [A-Za-z0-9 ,.]{1,40}\nAction: (?:"
    rf"(?:click|left_double|right_single)\(start_box={_PT}\)"
    rf"|drag\(start_box={_PT}, end_box={_PT}\)"
    rf"|hotkey\(key='{_KEY}(?: {_KEY}){{0,2}}'\)"
    rf"|type\(content='{_TEXT}{{1,60}}'\)"
    rf"|scroll\(start_box={_PT}, direction='(?:up|down|left|right)'\)"
    rf"|wait\(\)|finished\(content='{_TEXT}{{0,60}}'\))"
)


@dataclass
class Parsed:
    thought: str | None
    actions: list[Action]


def smart_resize(height, width, factor=28, min_pixels=100 * 28 * 28, max_pixels=16384 * 28 * 28) -> tuple[int, int]:
    """The (h, w) Qwen2-VL-family processors resize an image to: multiples of
    `factor`, pixel count within bounds, aspect ratio kept as far as possible
    (the rule of transformers' Qwen2-VL image processor, edges included)."""
    h = round(height / factor) * factor
    w = round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def _model_size(width, height, coord_mode, resize: dict | None = None) -> tuple[int, int]:
    """(w, h) of the coordinate space the model answers in. `resize`: the server's smart_resize
    settings (factor, min_pixels, max_pixels) when known, else the processor's defaults."""
    if coord_mode == "qwen25vl":  # absolute pixels of the image the model actually saw
        h, w = smart_resize(height, width, **(resize or {}))
        return w, h
    if coord_mode == "qwen2vl":  # relative, 0..1000 on both axes
        return 1000, 1000
    raise ValueError(f"coord_mode must be one of {COORD_MODES}, got {coord_mode!r}")


def to_model_coords(x, y, width, height, coord_mode, resize: dict | None = None) -> tuple[int, int]:
    """Screen pixel -> the coordinates the model would write for it."""
    mw, mh = _model_size(width, height, coord_mode, resize)
    return round(x / width * mw), round(y / height * mh)


MAX_RESPONSE_CHARS = 64 * 1024
_MAX_BOX_CHARS = 200  # a point or box, wrappers and spaces included
_MAX_ARG_CHARS = 4096  # any other argument but type/finished content: keys, direction

_ACTION = re.compile(r"(?<!\S)Action:")
_LABEL = re.compile(r"^(Thought|Action_Summary):\s*")
_WS = re.compile(r"\s*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CALL_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\(")
# String literals as an unrolled loop: no two ways to match the same text, so no exponential backtracking.
_STRING = {q: re.compile(rf"{q}([^{q}\\]*(?:\\.[^{q}\\]*)*){q}", re.S) for q in "'\""}
# What may follow a call: the end, or a newline and the next call. `[^\S\n]*\n` takes the
# first newline only, so a run of blank lines is not retried at every newline in it.
_BOUNDARY = r"\s*\Z|[^\S\n]*\n\s*(?=[A-Za-z_][A-Za-z0-9_]*\()"
_NEXT_CALL = re.compile(_BOUNDARY)
_CONTENT = re.compile(r"\s*content\s*=\s*(['\"])")
_CONTENT_END = {q: re.compile(rf"{q}\s*\)(?={_BOUNDARY})") for q in "'\""}
_WRAPPERS = re.compile(r"<\|box_start\|>|<\|box_end\|>|</?point>|</?bbox>")
# Between two numbers: one comma, or whitespace.
_SEP = re.compile(r"\s*,\s*|\s+")
# At most six integer digits, so float() is always finite.
_NUM = re.compile(r"-?[0-9]{1,6}(?:\.[0-9]+)?")

_ALIASES = {"point": "start_box", "start_point": "start_box", "end_point": "end_box"}
_POINT_ACTIONS = {"click": "click", "left_single": "click", "left_double": "left_double",
                  "right_single": "right_single", "hover": "hover"}
# action -> (required, optional) arguments
_ARGS = {**{name: ({"start_box"}, set()) for name in _POINT_ACTIONS},
         "drag": ({"start_box", "end_box"}, set()), "hotkey": (set(), {"key", "hotkey"}),
         "press": ({"key"}, set()), "scroll": ({"direction"}, {"start_box"}),
         "wait": (set(), set()), "call_user": (set(), set())}
# No action takes more, so a flood of arguments is refused at the first extra one.
_MAX_ARGS = max(len(required | optional) for required, optional in _ARGS.values())


def _snippet(text: str, at: int = 0) -> str:
    """Model text for an error message, cut short: answers may be 64 KB."""
    s = text[at:at + 60]
    return repr(s) + ("..." if len(text) > at + 60 else "")


def _unescape(s: str) -> str:
    """Decode \\n, \\t, \\\\, \\' and \\" as Python would; keep other backslashes as written (C:\\Users)."""
    if "\\" not in s:
        return s
    # Pairs of backslashes go first, left to right; the pieces between them hold no
    # backslash followed by another, so the replacements below cannot overlap.
    return "\\".join(p.replace("\\n", "\n").replace("\\t", "\t").replace("\\'", "'").replace('\\"', '"')
                     for p in s.split("\\\\"))


def _point(value: str, size, width, height) -> tuple[float, float]:
    if len(value) > _MAX_BOX_CHARS:
        raise ParseError(f"coordinates longer than {_MAX_BOX_CHARS} characters")
    inner = _WRAPPERS.sub("", value).strip()
    inner = inner[1:] if inner.startswith(("(", "[")) else inner
    inner = inner[:-1] if inner.endswith((")", "]")) else inner
    parts = _SEP.split(inner.strip())
    if len(parts) not in (2, 4) or not all(_NUM.fullmatch(p) for p in parts):
        raise ParseError(f"bad coordinates {value!r}")
    nums = [float(p) for p in parts]
    if len(nums) == 4:  # a box: aim at its centre
        nums = [(nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2]
    mw, mh = size
    return (float(min(max(nums[0] / mw * width, 0), width - 1)),
            float(min(max(nums[1] / mh * height, 0), height - 1)))


def _content(block: str, pos: int) -> tuple[str | None, int]:
    """The content='...' argument of type/finished, which starts at `pos`, and where the call ends.

    Models leave inner quotes unescaped, so the literal runs to the first quote
    that is followed by `)` and then by the next call or the end."""
    m = _CONTENT.match(block, pos)
    if not m:
        end = _WS.match(block, pos).end()
        if block.startswith(")", end):  # finished()
            return None, end + 1
        raise ParseError(f"expected content='...' at {_snippet(block, pos)}")
    close = _CONTENT_END[m[1]].search(block, m.end())
    if not close:
        raise ParseError(f"unterminated content at {_snippet(block, pos)}")
    return _unescape(block[m.end():close.start()]), close.end()


def _kwargs(block: str, pos: int) -> tuple[dict[str, str], int]:
    """Keyword arguments `key='str', ...` from `pos` to the closing parenthesis, and where the call ends."""
    kw = {}
    pos = _WS.match(block, pos).end()
    while not block.startswith(")", pos):
        key = _NAME.match(block, pos)
        if not key:
            raise ParseError(f"expected key='...' at {_snippet(block, pos)}")
        pos = _WS.match(block, key.end()).end()
        if not block.startswith("=", pos):
            raise ParseError(f"expected '=' at {_snippet(block, pos)}")
        pos = _WS.match(block, pos + 1).end()
        literal = _STRING.get(block[pos:pos + 1])
        literal = literal and literal.match(block, pos, pos + _MAX_ARG_CHARS)  # an unclosed one scans no further
        if not literal:
            raise ParseError(f"arguments must be string literals of at most {_MAX_ARG_CHARS} characters, "
                             f"at {_snippet(block, pos)}")
        name = _ALIASES.get(key[0], key[0])
        if name in kw or len(kw) == _MAX_ARGS:
            raise ParseError(f"repeated or too many arguments at {_snippet(block, key.start())}")
        kw[name] = _unescape(literal[1])
        pos = _WS.match(block, literal.end()).end()
        if block.startswith(",", pos):
            pos = _WS.match(block, pos + 1).end()
        elif not block.startswith(")", pos):
            raise ParseError(f"expected ',' or ')' at {_snippet(block, pos)}")
    return kw, pos + 1


def _parse_call(block: str, pos: int, size, width, height) -> tuple[Action, int]:
    """The call starting at `pos`, and where it ends."""
    m = _CALL_START.match(block, pos)
    if not m:
        raise ParseError(f"not an action call: {_snippet(block, pos)}")
    name = m[0][:-1]
    if name in ("type", "finished"):
        text, end = _content(block, m.end())
        return Action(name, text=text), end
    if name not in _ARGS:
        raise ParseError(f"unknown action {name!r:.60}")
    kw, end = _kwargs(block, m.end())
    required, optional = _ARGS[name]
    if set(kw) - required - optional or required - set(kw):
        raise ParseError(f"{name} takes {sorted(required)} and optionally {sorted(optional)}, "
                         f"got {sorted(kw)} at {_snippet(block, pos)}")
    start = _point(kw["start_box"], size, width, height) if "start_box" in kw else (None, None)
    if name in _POINT_ACTIONS:
        return Action(_POINT_ACTIONS[name], *start), end
    if name == "drag":
        return Action("drag", *start, *_point(kw["end_box"], size, width, height)), end
    if name in ("hotkey", "press"):  # press(key='enter') is a one-key hotkey
        return Action("hotkey", keys=(kw.get("key") or kw.get("hotkey") or "",)), end
    if name == "scroll":
        return Action("scroll", *start, direction=kw["direction"].strip().lower()), end
    return Action(name), end


def parse_response(text: str, width: int, height: int, coord_mode: str = "qwen25vl",
                   resize: dict | None = None) -> Parsed:
    """Thought and actions from UI-TARS output; points mapped to screenshot pixels (through the
    server's resize settings when known, see `resize_of`).

    The actions' commands must fit one program of the env's code subset, so an
    answer the env would refuse is the agent's ParseError, not an env error.
    finished() or call_user() must come last: nothing after them would run."""
    size = _model_size(width, height, coord_mode, resize)
    if not isinstance(text, str):
        raise ParseError(f"response must be a string, got {type(text).__name__}")
    if len(text) > MAX_RESPONSE_CHARS:
        raise ParseError(f"response longer than {MAX_RESPONSE_CHARS} characters")
    text = text.strip()
    m = _ACTION.search(text)
    if not m:
        raise ParseError(f"no 'Action:' in response: {_snippet(text)}")
    thought = _LABEL.sub("", text[:m.start()].strip()) or None
    block = text[m.end():].strip()
    if not block:
        raise ParseError("empty action after 'Action:'")
    actions, cost, pos = [], Cost(), 0
    while pos < len(block):
        if len(actions) == MAX_CALLS:
            raise ParseError(f"more than {MAX_CALLS} actions")
        if actions and actions[-1].type in TERMINAL:
            raise ParseError(f"nothing may follow {actions[-1].type}(): {_snippet(block, pos)}")
        try:
            action, end = _parse_call(block, pos, size, width, height)
            cost += Cost.of(action)
            cost.check()
        except ParseError:
            raise
        except ValueError as e:  # an Action that failed validation, or limits exceeded
            raise ParseError(f"{e} in {_snippet(block, pos)}") from None
        actions.append(action)
        after = _NEXT_CALL.match(block, end)
        if not after:
            raise ParseError(f"unexpected text after a call: {_snippet(block, end)}")
        pos = after.end()
    return Parsed(thought, actions)


# What the replay model answers once a recorded trajectory runs out.
END_ANSWER = "Thought: the recorded trajectory ends here.\nAction: finished(content='end of replay')"
_WORDS = ["hello", "yes", "submit", "cua", "42"]


def random_answer(rng: random.Random, width: int, height: int, coord_mode: str) -> str:
    """A well-formed answer at a random point of the screenshot (the `random` baseline)."""
    def point() -> str:
        x, y = to_model_coords(rng.uniform(0, width - 1), rng.uniform(0, height - 1), width, height, coord_mode)
        return f"'({x},{y})'"

    roll = rng.random()
    if roll < 0.75:
        action = f"click(start_box={point()})"
    elif roll < 0.85:
        action = f"left_double(start_box={point()})"
    elif roll < 0.95:
        action = f"type(content='{rng.choice(_WORDS)}')"
    else:
        action = "finished(content='random baseline gives up')"
    return f"Thought: a random move.\nAction: {action}"


def _escaped(text: str) -> str:
    """Text as a quoted argument the parser reads back as it was (_unescape's inverse)."""
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\t", "\\t")


def action_text(action: Action, width: int, height: int, coord_mode: str = "qwen25vl") -> str:
    """The call a UI-TARS model writes for `action` on a width x height screenshot (a person's
    demonstration, written in the agent's action space). ValueError for an action it has no call for."""
    def box(x, y) -> str:
        mx, my = to_model_coords(x, y, width, height, coord_mode)
        return f"'<|box_start|>({mx},{my})<|box_end|>'"

    t = action.type
    if t in ("click", "left_double", "right_single"):
        return f"{t}(start_box={box(action.x, action.y)})"
    if t == "drag":
        return f"drag(start_box={box(action.x, action.y)}, end_box={box(action.x2, action.y2)})"
    if t == "hotkey":
        return f"hotkey(key='{' '.join(action.keys)}')"
    if t == "type":
        return f"type(content='{_escaped(action.text)}')"
    if t == "scroll":
        return f"scroll(start_box={box(action.x, action.y)}, direction='{action.direction}')"
    if t == "finished":
        return f"finished(content='{_escaped(action.text or '')}')"
    if t in ("wait", "call_user"):
        return f"{t}()"
    raise ValueError(f"UI-TARS has no call for {t}")


class UITarsAgent:
    def __init__(self, coord_mode="qwen25vl", history_images=5, language="English", parse_retries=2,
                 prompt_template: str | None = None):
        _model_size(1, 1, coord_mode)  # reject a bad mode now, not at the first step
        if history_images < 1:
            raise ValueError("history_images must be >= 1 (the current screenshot is always sent)")
        self.coord_mode = coord_mode
        self.history_images = history_images
        self.language = language
        self.parse_retries = parse_retries
        self.prompt_template = prompt_template or PROMPT

    @classmethod
    def from_config(cls, cfg) -> "UITarsAgent":
        a = cfg.agent
        return cls(a.coord_mode, a.history_images, a.language, a.parse_retries)

    def start(self, instruction: str, model: ModelSession) -> "UITarsEpisode":
        return UITarsEpisode(self, instruction, model)

    def build_messages(self, instruction: str, history: list[tuple[Image | None, str]],
                       screenshot: Image) -> list[dict]:
        """The prompt: the task, every earlier answer, and the last `history_images` screenshots."""
        # str.replace, not format: templates and instructions may contain braces.
        prompt = self.prompt_template.replace("{language}", self.language).replace("{instruction}", instruction)
        messages = [{"role": "user", "content": prompt}]
        first_with_image = len(history) - (self.history_images - 1)
        for i, (image, response) in enumerate(history):
            if i >= first_with_image:
                messages.append({"role": "user", "content": [image]})
            messages.append({"role": "assistant", "content": response})
        messages.append({"role": "user", "content": [screenshot]})
        return messages

    def parse(self, text, width, height, resize: dict | None = None) -> Parsed:
        return parse_response(text, width, height, self.coord_mode, resize)

    def answer_for(self, action: Action, width: int, height: int) -> str:
        """What this agent's model answers to take `action` (how a person's demonstration is written)."""
        return f"Action: {action_text(action, width, height, self.coord_mode)}"


def resize_of(reply) -> dict | None:
    """The smart_resize settings the server applied to the images of this reply's prompt, when its
    provider knows them (models/image_processor.py); None: the processor's defaults. A server
    started with other pixel bounds answers in another coordinate space."""
    p = getattr(reply, "image_processor", None) or {}
    keys = ("factor", "min_pixels", "max_pixels")
    if p.get("rule") != "smart_resize" or not all(type(p.get(k)) is int and p[k] > 0 for k in keys):
        return None
    return {k: p[k] for k in keys}


class UITarsEpisode(AskingEpisode):
    """One episode's conversation; only the screenshots still in the window are kept."""

    def __init__(self, agent: UITarsAgent, instruction: str, model: ModelSession):
        super().__init__(model, agent.parse_retries)
        self.agent = agent
        self.instruction = instruction
        self.history: list[tuple[Image | None, str]] = []   # (screenshot while in the window, answer)
        self.current: tuple[Observation, Image, Turn] | None = None

    async def ask(self, observation: Observation, turn: Turn, budget: Budget) -> None:
        if self.current is not None:  # the step before went on, so its answer joins the history
            _, image, last = self.current
            self.history.append((image, last.reply.text))
            gone = len(self.history) - self.agent.history_images  # the screenshot that just left the window
            if gone >= 0:
                self.history[gone] = (None, self.history[gone][1])
        image = Image(observation.screenshot, observation.file, observation.reread)
        self.current = (observation, image, turn)
        self.step = len(self.history)
        turn.prompt = self.agent.build_messages(self.instruction, self.history, image)
        await self.answer(turn, budget)

    def answer_format(self) -> AnswerFormat:
        obs = self.current[0]
        return AnswerFormat(GUIDED_REGEX, functools.partial(random_answer, width=obs.width, height=obs.height,
                                                            coord_mode=self.agent.coord_mode), END_ANSWER,
                            "Thought: wait for the screen.\nAction: wait()")

    def parse(self, text: str) -> Answer:
        obs, _, turn = self.current
        parsed = self.agent.parse(text, obs.width, obs.height, resize_of(turn.reply))
        last = parsed.actions[-1].type
        return Answer(parsed.thought, [a.to_dict() for a in parsed.actions],
                      [a for a in parsed.actions if a.type not in TERMINAL],
                      ("finished" if last == "finished" else "call_user") if last in TERMINAL else None)
