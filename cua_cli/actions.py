"""Structured GUI actions, and the pyautogui code an env server runs for them.

Agents turn model text into `Action`s; only `to_command` produces code, and it
builds that code from validated fields (strings via `repr`), so nothing the
model wrote is ever pasted into a command verbatim. An `Action` only constructs
when its command stays inside the subset and limits of `pyautogui_vocab`, which the
env server enforces: a key it does not know, text it cannot type or coordinates
no screen has are the agent's mistake (ValueError here), never an env error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

from .pyautogui_vocab import (
    MAX_CALLS,
    MAX_CODE_CHARS,
    MAX_COORD,
    MAX_KEY_PRESSES,
    MAX_SCROLL,
    MAX_STATEMENTS,
    MAX_TEXT_CHARS,
    MAX_TOTAL_SLEEP,
    canonical_key,
    untypeable,
)

POINT_TYPES = frozenset({"click", "left_double", "right_single", "hover"})
TYPES = POINT_TYPES | {"drag", "hotkey", "type", "scroll", "wait", "finished", "call_user"}
TERMINAL = frozenset({"finished", "call_user"})
DIRECTIONS = frozenset({"up", "down", "left", "right"})
SCROLL_CLICKS = 5
DRAG_SECONDS = 0.5  # within MAX_SLEEP, the env's limit on one duration; Cost checks their sum

# The fields each type may set besides `type`.
_FIELDS = {**{t: {"x", "y"} for t in POINT_TYPES}, "drag": {"x", "y", "x2", "y2"}, "hotkey": {"keys"},
           "type": {"text"}, "finished": {"text"}, "scroll": {"x", "y", "direction", "clicks"},
           "wait": set(), "call_user": set()}
_KEY_TOKEN = re.compile(r"\+|[^\s+]+")


def normalize_key(key: str) -> str:
    """The canonical (pyautogui_vocab) name of one key; ValueError if the subset has no such key."""
    name = canonical_key(key)
    if name is None:
        raise ValueError(f"unknown key {key!r:.40}")
    return name


def _split_keys(combos) -> list[str]:
    """The keys of `+`- or space-joined combos ('Ctrl + Shift + T', 'ctrl c').

    A `+` separates only when keys stand on both sides, so 'ctrl +', 'ctrl++'
    and a lone '+' mean the plus key.
    """
    keys = []
    for combo in combos:
        if not isinstance(combo, str):
            raise ValueError(f"keys must be strings, got {combo!r:.40}")
        tokens = []
        for m in _KEY_TOKEN.finditer(combo):  # stop early: the string may be huge
            if len(tokens) > 2 * MAX_KEY_PRESSES:
                raise ValueError(f"more than {MAX_KEY_PRESSES} keys")
            tokens.append(m[0])
        if not tokens:
            raise ValueError("empty key name")
        separated = False
        for i, token in enumerate(tokens):
            separated = token == "+" and not separated and i not in (0, len(tokens) - 1)
            if not separated:
                keys.append(token)
    if len(keys) > MAX_KEY_PRESSES:
        raise ValueError(f"more than {MAX_KEY_PRESSES} keys")
    return keys


@dataclass(frozen=True)
class Action:
    type: str
    x: float | None = None  # screenshot pixels
    y: float | None = None
    x2: float | None = None  # drag end
    y2: float | None = None
    text: str | None = None  # type / finished content
    keys: tuple[str, ...] | None = None  # hotkey, canonical names (pyautogui_vocab)
    direction: str | None = None  # scroll
    clicks: int | None = None  # scroll: wheel notches (SCROLL_CLICKS when not said; a person's own count)

    def __post_init__(self):
        if not isinstance(self.type, str) or self.type not in TYPES:
            raise ValueError(f"unknown action type {self.type!r:.40}")
        extra = {f.name for f in fields(self) if getattr(self, f.name) is not None} - _FIELDS[self.type] - {"type"}
        if extra:
            raise ValueError(f"{self.type} takes no {', '.join(sorted(extra))}")
        for name in ("x", "y", "x2", "y2"):
            v = getattr(self, name)
            # `not <=` also catches NaN; ints are compared as ints, so 10**400 cannot overflow.
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= MAX_COORD):
                raise ValueError(f"{self.type}: {name} must be a number within ±{MAX_COORD}, got {v!r:.40}")
        if (self.x is None) != (self.y is None):
            raise ValueError(f"{self.type}: x and y must be given together")
        if self.type in POINT_TYPES | {"drag"} and self.x is None:
            raise ValueError(f"{self.type} needs x and y")
        if self.type == "drag" and (self.x2 is None or self.y2 is None):
            raise ValueError("drag needs x2 and y2")
        if self.text is not None:
            if not isinstance(self.text, str):
                raise ValueError(f"{self.type}: text must be a string")
            if len(self.text) > MAX_TEXT_CHARS:
                raise ValueError(f"{self.type}: text longer than {MAX_TEXT_CHARS} characters")
            bad = untypeable(self.text) if self.type == "type" else None  # finished() text is never typed
            if bad is not None:
                raise ValueError(f"{self.type}: text has a character no keyboard types: {bad!r}")
        if self.type == "type" and not self.text:
            raise ValueError("type needs non-empty text")
        if self.keys is not None:
            if isinstance(self.keys, str) or not isinstance(self.keys, (tuple, list)):
                raise ValueError(f"{self.type}: keys must be a sequence of strings")
            keys = _split_keys(self.keys)
            if len(keys) > 1:  # in a combo a letter means its key: ctrl+C is ctrl+c, not ctrl+shift+c
                keys = [k.lower() if k.isascii() and len(k) == 1 else k for k in keys]
            object.__setattr__(self, "keys", tuple(map(normalize_key, keys)))
        if self.type == "hotkey" and not self.keys:
            raise ValueError("hotkey needs keys")
        if self.type == "scroll" and (not isinstance(self.direction, str) or self.direction not in DIRECTIONS):
            raise ValueError(f"scroll direction must be one of {sorted(DIRECTIONS)}, got {self.direction!r:.40}")
        if self.clicks is not None and (type(self.clicks) is not int or not 1 <= self.clicks <= MAX_SCROLL):
            raise ValueError(f"scroll clicks must be an integer in [1, {MAX_SCROLL}], got {self.clicks!r:.40}")
        Cost.of(self).check()

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if "keys" in d:
            d["keys"] = list(d["keys"])
        return d

    @classmethod
    def from_dict(cls, d) -> "Action":
        if not isinstance(d, dict):
            raise ValueError(f"action must be a dict, got {type(d).__name__}")
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown action fields: {sorted(unknown, key=str)}")
        if "type" not in d:
            raise ValueError("action needs a type")
        keys = d.get("keys")
        if isinstance(keys, list):
            keys = tuple(keys)
        return cls(**{**d, "keys": keys})


@dataclass(frozen=True)
class Cost:
    """How much of the env server's per-program limits some commands use.

    Several actions' commands together must fit one program's limits.
    """
    chars: int = 0  # code, one newline per command included
    calls: int = 0  # each call is one statement
    presses: int = 0  # keys pressed by press/hotkey
    seconds: float = 0.0  # drag durations

    @classmethod
    def of(cls, action: Action) -> "Cost":
        code = to_command(action)
        if code in (None, "WAIT", "DONE"):
            return cls()
        if action.type == "hotkey":
            presses = len(action.keys)
        else:  # the enter that submits typed text
            presses = int(action.type == "type" and action.text.endswith("\n"))
        return cls(len(code) + 1, code.count("\n") + 1, presses, DRAG_SECONDS if action.type == "drag" else 0.0)

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.chars + other.chars, self.calls + other.calls, self.presses + other.presses,
                    self.seconds + other.seconds)

    def check(self) -> None:
        """ValueError naming the first limit exceeded."""
        for what, used, limit in (("characters of code", self.chars, MAX_CODE_CHARS),
                                  ("calls", self.calls, min(MAX_CALLS, MAX_STATEMENTS)),
                                  ("key presses", self.presses, MAX_KEY_PRESSES),
                                  ("seconds of dragging", self.seconds, MAX_TOTAL_SLEEP)):
            if used > limit:
                raise ValueError(f"more than {limit} {what} in one program")


def osworld_command(action: Action) -> str:
    """The action in OSWorld's action space: pyautogui code, or WAIT, DONE, or FAIL for call_user (the
    task cannot go on: what OSWorld's infeasible tasks ask for)."""
    return "FAIL" if action.type == "call_user" else to_command(action)


def to_command(action: Action) -> str | None:
    """pyautogui code for `action`; "WAIT"/"DONE" for wait/finished; None for call_user."""
    t = action.type
    if t == "wait":
        return "WAIT"
    if t == "finished":
        return "DONE"
    if t == "call_user":
        return None
    x, y = (round(action.x), round(action.y)) if action.x is not None else (None, None)
    if t == "click":
        return f"pyautogui.click({x}, {y}, button='left')"
    if t == "left_double":
        return f"pyautogui.doubleClick({x}, {y})"
    if t == "right_single":
        return f"pyautogui.rightClick({x}, {y})"
    if t == "hover":
        return f"pyautogui.moveTo({x}, {y})"
    if t == "drag":
        return (f"pyautogui.moveTo({x}, {y})\n"
                f"pyautogui.dragTo({round(action.x2)}, {round(action.y2)}, duration={DRAG_SECONDS}, button='left')")
    if t == "hotkey":
        if len(action.keys) == 1:
            return f"pyautogui.press({action.keys[0]!r})"
        return f"pyautogui.hotkey({', '.join(map(repr, action.keys))})"
    if t == "type":
        # A trailing newline is the model's way of saying "submit".
        text = action.text
        submit = text.endswith("\n")
        if submit:
            text = text[:-1]
        lines = [f"pyautogui.write({text!r})"] if text else []
        if submit:
            lines.append("pyautogui.press('enter')")
        return "\n".join(lines)
    # scroll
    vertical = action.direction in ("up", "down")
    clicks = action.clicks or SCROLL_CLICKS
    amount = clicks if action.direction in ("up", "right") else -clicks
    where = f", x={x}, y={y}" if x is not None else ""
    return f"pyautogui.{'scroll' if vertical else 'hscroll'}({amount}{where})"
