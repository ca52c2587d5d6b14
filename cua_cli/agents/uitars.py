"""UI-TARS: prompt messages, response parsing and coordinate mapping.

The model answers `Thought: ...` then `Action: name(arg='...')`, possibly several
calls separated by blank lines. Model text is only ever matched with regexes or
`ast.parse` (reading string constants); it is never evaluated.
"""
from __future__ import annotations

import ast
import base64
import math
import re
from dataclasses import dataclass

from cua_cli.actions import Action

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
_PT = r"'\(\d{1,4},\d{1,4}\)'"
_TEXT = r"[A-Za-z0-9 .,!?:-]{0,60}"
GUIDED_REGEX = (
    r"Thought: [A-Za-z0-9 ,.]{1,40}\nAction: (?:"
    rf"(?:click|left_double|right_single)\(start_box={_PT}\)"
    rf"|drag\(start_box={_PT}, end_box={_PT}\)"
    r"|hotkey\(key='[a-z]{1,8}(?: [a-z]{1,8}){0,2}'\)"
    rf"|type\(content='{_TEXT}'\)"
    rf"|scroll\(start_box={_PT}, direction='(?:up|down|left|right)'\)"
    rf"|wait\(\)|finished\(content='{_TEXT}'\))"
)


class ParseError(ValueError):
    pass


@dataclass
class Parsed:
    thought: str | None
    actions: list[Action]


def smart_resize(height, width, factor=28, min_pixels=100 * 28 * 28, max_pixels=16384 * 28 * 28) -> tuple[int, int]:
    """The (h, w) Qwen2-VL-family processors resize an image to: multiples of
    `factor`, pixel count within bounds, aspect ratio kept as far as possible."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = math.floor(height / beta / factor) * factor
        w = math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def _model_size(width, height, coord_mode) -> tuple[int, int]:
    """(w, h) of the coordinate space the model answers in."""
    if coord_mode == "qwen25vl":  # absolute pixels of the image the model actually saw
        h, w = smart_resize(height, width)
        return w, h
    if coord_mode == "qwen2vl":  # relative, 0..1000 on both axes
        return 1000, 1000
    raise ValueError(f"coord_mode must be one of {COORD_MODES}, got {coord_mode!r}")


def to_model_coords(x, y, width, height, coord_mode) -> tuple[int, int]:
    """Screen pixel -> the coordinates the model would write for it."""
    mw, mh = _model_size(width, height, coord_mode)
    return round(x / width * mw), round(y / height * mh)


_NUM = r"-?\d+(?:\.\d+)?"
_COORDS = re.compile(rf"[(\[]?\s*{_NUM}(?:\s*[,\s]\s*{_NUM})*\s*[)\]]?")
_WRAPPERS = re.compile(r"<\|box_start\|>|<\|box_end\|>|</?point>|</?bbox>")
_ACTION = re.compile(r"(?<!\S)Action:")
# A new call starts on a line after one that closed a call.
_CALL_SPLIT = re.compile(r"(?<=\))\s*\n\s*(?=[A-Za-z_]\w*\()")
_CALL = re.compile(r"([A-Za-z_]\w*)\((.*)\)", re.S)
# Greedy up to the last quote, because models leave inner quotes unescaped.
_CONTENT = re.compile(r"\s*content\s*=\s*(['\"])(.*)\1\s*", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}

_ALIASES = {"point": "start_box", "start_point": "start_box", "end_point": "end_box"}
_POINT_ACTIONS = {"click": "click", "left_single": "click", "left_double": "left_double",
                  "right_single": "right_single", "hover": "hover"}
# action -> (required, optional) arguments
_ARGS = {**{name: ({"start_box"}, set()) for name in _POINT_ACTIONS},
         "drag": ({"start_box", "end_box"}, set()), "hotkey": (set(), {"key", "hotkey"}),
         "press": ({"key"}, set()), "scroll": ({"direction"}, {"start_box"}),
         "wait": (set(), set()), "call_user": (set(), set())}


def _unescape(s: str) -> str:
    # Python-like: known escapes are decoded, unknown ones (e.g. C:\Users) kept as written.
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[0]), s, flags=re.S)


def _point(value: str, size, width, height) -> tuple[float, float]:
    inner = _WRAPPERS.sub("", value).strip()
    nums = [float(n) for n in re.findall(_NUM, inner)] if _COORDS.fullmatch(inner) else []
    if len(nums) == 4:  # a box: aim at its centre
        nums = [(nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2]
    if len(nums) != 2:
        raise ParseError(f"bad coordinates {value!r}")
    mw, mh = size
    return (float(min(max(nums[0] / mw * width, 0), width - 1)),
            float(min(max(nums[1] / mh * height, 0), height - 1)))


def _kwargs(call: str) -> dict[str, str]:
    """Keyword arguments of `call`, all of which must be string literals."""
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError as e:
        raise ParseError(f"cannot parse {call!r}: {e.msg}") from None
    if not isinstance(node, ast.Call) or node.args:
        raise ParseError(f"expected name(arg='...', ...), got {call!r}")
    for kw in node.keywords:
        if kw.arg is None or not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)):
            raise ParseError(f"arguments must be string literals: {call!r}")
    return {_ALIASES.get(kw.arg, kw.arg): kw.value.value for kw in node.keywords}


def _parse_call(call: str, size, width, height) -> Action:
    m = _CALL.fullmatch(call)
    if not m:
        raise ParseError(f"not an action call: {call!r}")
    name, args = m[1], m[2]
    if name in ("type", "finished"):
        content = _CONTENT.fullmatch(args)
        if not content and args.strip():
            raise ParseError(f"expected {name}(content='...'), got {call!r}")
        return Action(name, text=_unescape(content[2]) if content else None)
    if name not in _ARGS:
        raise ParseError(f"unknown action {name!r}")
    kw = _kwargs(call)
    required, optional = _ARGS[name]
    if set(kw) - required - optional or required - set(kw):
        raise ParseError(f"{name} takes {sorted(required)} and optionally {sorted(optional)}, got {call!r}")
    start = _point(kw["start_box"], size, width, height) if "start_box" in kw else (None, None)
    if name in _POINT_ACTIONS:
        return Action(_POINT_ACTIONS[name], *start)
    if name == "drag":
        return Action("drag", *start, *_point(kw["end_box"], size, width, height))
    if name in ("hotkey", "press"):  # press(key='enter') is a one-key hotkey
        return Action("hotkey", keys=tuple((kw.get("key") or kw.get("hotkey") or "").split()))
    if name == "scroll":
        return Action("scroll", *start, direction=kw["direction"].strip().lower())
    return Action(name)


def parse_response(text: str, width: int, height: int, coord_mode: str = "qwen25vl") -> Parsed:
    """Thought and actions from UI-TARS output; points mapped to screenshot pixels."""
    size = _model_size(width, height, coord_mode)
    text = (text or "").strip()
    m = _ACTION.search(text)
    if not m:
        raise ParseError(f"no 'Action:' in response: {text[:200]!r}")
    thought = re.sub(r"^(Thought|Action_Summary):\s*", "", text[:m.start()].strip()) or None
    block = text[m.end():].strip()
    if not block:
        raise ParseError("empty action after 'Action:'")
    actions = []
    for call in _CALL_SPLIT.split(block):
        try:
            actions.append(_parse_call(call.strip(), size, width, height))
        except ParseError:
            raise
        except ValueError as e:  # an Action that failed validation
            raise ParseError(f"{e} in {call.strip()!r}") from None
    return Parsed(thought, actions)


def _image(png: bytes) -> dict:
    return {"type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}


class UITarsAgent:
    def __init__(self, coord_mode="qwen25vl", history_images=5, language="English", prompt_template: str | None = None):
        _model_size(1, 1, coord_mode)  # reject a bad mode now, not at the first step
        if history_images < 1:
            raise ValueError("history_images must be >= 1 (the current screenshot is always sent)")
        self.coord_mode = coord_mode
        self.history_images = history_images
        self.language = language
        self.prompt_template = prompt_template or PROMPT

    def build_messages(self, instruction: str, history: list[tuple[bytes | None, str]], screenshot: bytes) -> list[dict]:
        # str.replace, not format: templates and instructions may contain braces.
        prompt = self.prompt_template.replace("{language}", self.language).replace("{instruction}", instruction)
        messages = [{"role": "user", "content": prompt}]
        first_with_image = len(history) - (self.history_images - 1)
        for i, (png, response) in enumerate(history):
            if i >= first_with_image:
                if png is None:
                    raise ValueError(f"screenshot of step {i} is needed (last {self.history_images} are sent)")
                messages.append({"role": "user", "content": [_image(png)]})
            messages.append({"role": "assistant", "content": response})
        messages.append({"role": "user", "content": [_image(screenshot)]})
        return messages

    def parse(self, text, width, height) -> Parsed:
        return parse_response(text, width, height, self.coord_mode)
