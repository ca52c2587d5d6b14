"""Structured GUI actions, and the pyautogui code an env server runs for them.

Agents turn model text into `Action`s; only `to_command` produces code, and it
builds that code from validated fields (strings via `repr`), so nothing the
model wrote is ever pasted into a command verbatim.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

POINT_TYPES = frozenset({"click", "left_double", "right_single", "hover"})
TYPES = POINT_TYPES | {"drag", "hotkey", "type", "scroll", "wait", "finished", "call_user"}
TERMINAL = frozenset({"finished", "call_user"})
DIRECTIONS = frozenset({"up", "down", "left", "right"})
SCROLL_CLICKS = 5

# Browser-style key names the models use, spelled the way pyautogui wants them.
_KEY_ALIASES = {"arrowleft": "left", "arrowright": "right", "arrowup": "up", "arrowdown": "down"}


def normalize_key(key: str) -> str:
    key = key.strip().lower()
    return _KEY_ALIASES.get(key, key)


@dataclass(frozen=True)
class Action:
    type: str
    x: float | None = None  # screenshot pixels
    y: float | None = None
    x2: float | None = None  # drag end
    y2: float | None = None
    text: str | None = None  # type / finished content
    keys: tuple[str, ...] | None = None  # hotkey, normalised
    direction: str | None = None  # scroll

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"unknown action type {self.type!r}")
        for name in ("x", "y", "x2", "y2"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise ValueError(f"{self.type}: {name} must be a finite number, got {v!r}")
        if self.text is not None and not isinstance(self.text, str):
            raise ValueError(f"{self.type}: text must be a string")
        if self.keys is not None:
            if isinstance(self.keys, str) or not all(isinstance(k, str) and k.strip() for k in self.keys):
                raise ValueError(f"{self.type}: keys must be a sequence of non-empty strings")
            object.__setattr__(self, "keys", tuple(normalize_key(k) for k in self.keys))

        has_point = self.x is not None and self.y is not None
        if (self.x is None) != (self.y is None):
            raise ValueError(f"{self.type}: x and y must be given together")
        if self.type in POINT_TYPES | {"drag"} and not has_point:
            raise ValueError(f"{self.type} needs x and y")
        if self.type == "drag" and (self.x2 is None or self.y2 is None):
            raise ValueError("drag needs x2 and y2")
        if self.type == "hotkey" and not self.keys:
            raise ValueError("hotkey needs keys")
        if self.type == "type" and not self.text:
            raise ValueError("type needs non-empty text")
        if self.type == "scroll" and self.direction not in DIRECTIONS:
            raise ValueError(f"scroll direction must be one of {sorted(DIRECTIONS)}, got {self.direction!r}")

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
            raise ValueError(f"unknown action fields: {sorted(unknown)}")
        if "type" not in d:
            raise ValueError("action needs a type")
        keys = d.get("keys")
        if isinstance(keys, list):
            keys = tuple(keys)
        return cls(**{**d, "keys": keys})


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
                f"pyautogui.dragTo({round(action.x2)}, {round(action.y2)}, duration=0.5, button='left')")
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
    amount = SCROLL_CLICKS if action.direction in ("up", "right") else -SCROLL_CLICKS
    where = f", x={x}, y={y}" if x is not None else ""
    return f"pyautogui.{'scroll' if vertical else 'hscroll'}({amount}{where})"
