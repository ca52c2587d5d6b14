"""Parse agent-written pyautogui code into commands, without ever executing it.

Only a small, literal-only subset is accepted: `import pyautogui`, `import time`,
`time.sleep(n)` and calls `pyautogui.X(...)` for the GUI functions below.
"""

import ast
from dataclasses import dataclass

MAX_CODE_CHARS = 10_000
MAX_STATEMENTS = 100
MAX_SLEEP = 5.0
MAX_DURATION = 5.0

# Canonical key names; multi-character aliases map onto them (pyautogui spelling).
KEY_NAMES = frozenset(
    "enter tab backspace delete escape space up down left right home end pageup "
    "pagedown insert shift ctrl alt win".split()
    + [f"f{i}" for i in range(1, 13)]
)
KEY_ALIASES = {
    "return": "enter", "\n": "enter", "\r": "enter", "\t": "tab", "esc": "escape",
    "del": "delete", "pgup": "pageup", "pgdn": "pagedown", "control": "ctrl",
    "ctrlleft": "ctrl", "ctrlright": "ctrl", "shiftleft": "shift",
    "shiftright": "shift", "altleft": "alt", "altright": "alt", "option": "alt",
    "optionleft": "alt", "optionright": "alt", "command": "win", "cmd": "win",
    "winleft": "win", "winright": "win", "meta": "win", "super": "win",
}

# Positional parameter order of each allowed function (keywords use the same names).
SIGNATURES = {
    "click": ("x", "y", "clicks", "interval", "button", "duration"),
    "doubleClick": ("x", "y", "interval", "button", "duration"),
    "rightClick": ("x", "y", "interval", "duration"),
    "moveTo": ("x", "y", "duration"),
    "dragTo": ("x", "y", "duration", "button"),
    "write": ("message", "interval"),
    "typewrite": ("message", "interval"),
    "press": ("keys", "presses", "interval"),
    "hotkey": ("interval",),  # keys come as *args
    "scroll": ("clicks", "x", "y"),
    "hscroll": ("clicks", "x", "y"),
    "keyDown": ("key",),
    "keyUp": ("key",),
}


class DisallowedCode(ValueError):
    """The code uses something outside the allowed subset; the message names it."""


@dataclass(frozen=True)
class Command:
    """One GUI action. Names: click, moveTo, dragTo, write, press, hotkey,
    scroll, hscroll, keyDown, keyUp, sleep."""

    name: str
    x: float | None = None
    y: float | None = None
    button: str = "left"
    clicks: int = 1  # click count, or scroll wheel clicks (+ = up / right)
    duration: float = 0.0  # drag/move time, or sleep time
    text: str = ""
    keys: tuple[str, ...] = ()


def parse_code(code: str) -> list[Command]:
    """Parse `code` into commands; raise DisallowedCode naming any disallowed construct."""
    if len(code) > MAX_CODE_CHARS:
        raise DisallowedCode(f"code longer than {MAX_CODE_CHARS} characters")
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise DisallowedCode(f"syntax error: {e.msg} (line {e.lineno})") from None
    if len(tree.body) > MAX_STATEMENTS:
        raise DisallowedCode(f"more than {MAX_STATEMENTS} statements")
    commands = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name not in ("pyautogui", "time") or alias.asname:
                    raise DisallowedCode(f"import {_src(alias)}")
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            commands.append(_parse_call(stmt.value))
        else:
            raise DisallowedCode(f"{type(stmt).__name__} statement: {_src(stmt)}")
    return commands


def _src(node: ast.AST, limit: int = 80) -> str:
    text = ast.unparse(node).splitlines()[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parse_call(call: ast.Call) -> Command:
    func = call.func
    if isinstance(func, ast.Name):
        raise DisallowedCode(f"call to {func.id}")
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        raise DisallowedCode(f"attribute {_src(func)}")
    module, name = func.value.id, func.attr
    if module == "time" and name == "sleep":
        args = _bind("time.sleep", ("seconds",), call)
        return Command("sleep", duration=min(_number(args, "seconds", 0.0), MAX_SLEEP))
    if module != "pyautogui":
        raise DisallowedCode(f"attribute {module}.{name}")
    if name not in SIGNATURES:
        raise DisallowedCode(f"unknown function pyautogui.{name}")
    if name == "hotkey":
        keys = tuple(_key(_literal(arg)) for arg in call.args)
        _bind("pyautogui.hotkey", SIGNATURES[name], call, positional=False)
        if not keys:
            raise DisallowedCode("pyautogui.hotkey needs at least one key")
        return Command("hotkey", keys=keys)
    return _build(name, _bind(f"pyautogui.{name}", SIGNATURES[name], call))


def _build(name: str, args: dict) -> Command:
    if name in ("click", "doubleClick", "rightClick"):
        x, y = _point(args)
        clicks = {"doubleClick": 2, "rightClick": 1}.get(name) or _int(args, "clicks", 1, 1, 10)
        button = "right" if name == "rightClick" else _button(args)
        return Command("click", x=x, y=y, clicks=clicks, button=button)
    if name in ("moveTo", "dragTo"):
        x, y = _point(args)
        duration = min(_number(args, "duration", 0.0), MAX_DURATION)
        return Command(name, x=x, y=y, duration=duration, button=_button(args))
    if name in ("write", "typewrite"):
        message = args.get("message", "")
        if isinstance(message, (list, tuple)):  # typewrite(['a', 'enter']) presses keys
            return Command("press", keys=tuple(_key(k) for k in message))
        if not isinstance(message, str):
            raise DisallowedCode(f"pyautogui.{name} needs a string")
        return Command("write", text=message)
    if name == "press":
        keys = args.get("keys")
        keys = keys if isinstance(keys, (list, tuple)) else (keys,)
        presses = _int(args, "presses", 1, 1, 100)
        return Command("press", keys=tuple(_key(k) for k in keys) * presses)
    if name in ("scroll", "hscroll"):
        x, y = _point(args)
        return Command(name, x=x, y=y, clicks=_int(args, "clicks", 0, -100, 100))
    return Command(name, keys=(_key(args.get("key")),))  # keyDown / keyUp


def _bind(fname: str, params: tuple[str, ...], call: ast.Call, positional: bool = True) -> dict:
    """Map literal call arguments onto parameter names, like Python would."""
    if positional and len(call.args) > len(params):
        raise DisallowedCode(f"too many arguments for {fname}")
    args = dict(zip(params, map(_literal, call.args))) if positional else {}
    for kw in call.keywords:
        if kw.arg is None:
            raise DisallowedCode(f"**kwargs in {fname}")
        if kw.arg not in params:
            raise DisallowedCode(f"unknown argument {kw.arg!r} for {fname}")
        if kw.arg in args:
            raise DisallowedCode(f"argument {kw.arg!r} given twice to {fname}")
        args[kw.arg] = _literal(kw.value)
    return args


def _literal(node: ast.AST):
    """Value of a literal: constant, signed number, or list/tuple of literals."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, bytes):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and _is_number(node.operand.value)
    ):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(_literal(e) for e in node.elts)
    raise DisallowedCode(f"non-literal argument {_src(node)}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(args: dict, name: str, default: float) -> float:
    value = args.get(name, default)
    if not _is_number(value) or value < 0:
        raise DisallowedCode(f"{name} must be a non-negative number, got {value!r}")
    return float(value)


def _int(args: dict, name: str, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if not _is_number(value) or int(value) != value or not low <= value <= high:
        raise DisallowedCode(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return int(value)


def _point(args: dict) -> tuple[float | None, float | None]:
    x, y = args.get("x"), args.get("y")
    if isinstance(x, tuple) and y is None and len(x) == 2:  # click((x, y))
        x, y = x
    if (x is None) != (y is None):
        raise DisallowedCode("give both x and y, or neither")
    if x is not None and not (_is_number(x) and _is_number(y)):
        raise DisallowedCode(f"coordinates must be numbers, got {x!r}, {y!r}")
    return (None, None) if x is None else (float(x), float(y))


def _button(args: dict) -> str:
    button = args.get("button", "left")
    button = {"primary": "left", "secondary": "right"}.get(button, button)
    if button not in ("left", "right", "middle"):
        raise DisallowedCode(f"unknown mouse button {button!r}")
    return button


def _key(key) -> str:
    """Canonical key name: a single character, or a name from KEY_NAMES."""
    if not isinstance(key, str) or not key:
        raise DisallowedCode(f"key must be a non-empty string, got {key!r}")
    if key in KEY_ALIASES:
        return KEY_ALIASES[key]
    if len(key) == 1:
        return key
    name = KEY_ALIASES.get(key.lower(), key.lower())  # pyautogui lower-cases key names
    if name not in KEY_NAMES:
        raise DisallowedCode(f"unknown key {key!r}")
    return name
