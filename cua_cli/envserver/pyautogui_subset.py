"""Parse agent-written pyautogui code into commands, without ever executing it.

Only a small, literal-only subset is accepted: `import pyautogui`, `import time`,
`time.sleep(n)` and calls `pyautogui.X(...)` for the GUI functions below, with
the keys and within the limits of `cua_cli.pyautogui_vocab`. A program is accepted
or refused whole, so the caller can refuse it before any command runs; for any
input string `parse_code` either returns the commands or raises DisallowedCode
naming the refused construct. `interval` arguments and a click's `duration` are
checked but not performed: the server types and clicks at once.
"""

import ast
import io
import keyword
import math
import re
import tokenize
from dataclasses import dataclass

from cua_cli._util.text import clip
from cua_cli.pyautogui_vocab import (
    MAX_CALLS,
    MAX_CODE_CHARS,
    MAX_COORD,
    MAX_KEY_PRESSES,
    MAX_SCROLL,
    MAX_SLEEP,
    MAX_STATEMENTS,
    MAX_TEXT_CHARS,
    MAX_TOTAL_SLEEP,
    canonical_key,
    untypeable,
)

MAX_CLICKS = 10  # clicks of one click()
# Operators, opening brackets, keywords and operands side by side ("x y") in one
# statement, plus enclosing blocks and elifs. Every level of a syntax tree needs
# one of them, and so does every level CPython's parser recurses into while it
# explains a syntax error ("x x x ..." goes a level deeper per name); bounding them
# before ast.parse keeps it from failing with RecursionError or MemoryError.
# The subset's longest call needs about 10.
MAX_NESTING = 20
NESTING_KEYWORDS = frozenset(keyword.kwlist) - {"True", "False", "None"}
OPERANDS = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)
STRING_PREFIX = re.compile(r"[A-Za-z]*")
# Characters ast.parse refuses (NUL) or cannot even encode (lone surrogates).
UNPARSEABLE = re.compile("[\x00\ud800-\udfff]")

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
    bad = UNPARSEABLE.search(code)
    if bad:
        line = code.count("\n", 0, bad.start()) + 1
        raise DisallowedCode(f"character U+{ord(bad.group()):04X} on line {line}")
    # CPython's parser reads lone \r as a line end; tokenize must see the same lines.
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    _check_nesting(code)
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise DisallowedCode(f"syntax error: {clip(e.msg, 80)} (line {e.lineno})") from None
    if len(tree.body) > MAX_STATEMENTS:
        raise DisallowedCode(f"more than {MAX_STATEMENTS} statements")
    parser = _Parser(code)
    commands = []
    for stmt in tree.body:
        try:
            commands += parser.statement(stmt)
        except DisallowedCode as e:
            raise DisallowedCode(f"line {stmt.lineno}: {e}") from None
    _check_totals(commands)
    return commands


def _check_nesting(code: str) -> None:
    """Refuse code nested deeper than MAX_NESTING, reading its tokens only."""
    blocks = elifs = ops = 0
    previous = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in (tokenize.NL, tokenize.COMMENT):
                continue  # the parser does not see them
            if tok.type in OPERANDS and previous in OPERANDS and not tok.type == previous == tokenize.STRING:
                ops += 1  # side by side; adjacent strings are one literal
            previous = tok.type
            if tok.type == tokenize.ERRORTOKEN:
                # CPython's parser refuses it too, and past one this tokenizer slows to a crawl.
                char = tok.line[tok.start[1]:].lstrip(" \t\f")[:1]
                what = "unterminated string literal" if char in ("'", '"') else f"invalid character {char!r}"
                raise DisallowedCode(f"syntax error: {what} (line {tok.start[0]})")
            if tok.type == tokenize.INDENT:
                blocks += 1
            elif tok.type == tokenize.DEDENT:
                blocks -= 1
            elif tok.type == tokenize.NEWLINE or tok.string == ";":
                ops = 0
            elif tok.type == tokenize.STRING and "f" in STRING_PREFIX.match(tok.string).group().lower():
                # Python 3.11 parses the expressions inside an f-string separately,
                # hidden from this count; they are never literals anyway.
                raise DisallowedCode(f"f-string {clip(tok.string, 80)} (line {tok.start[0]})")
            elif tok.type == tokenize.NAME and tok.string == "elif":
                elifs += 1  # nests an If in the previous one's else, across statements
            elif (tok.type == tokenize.OP and tok.string not in ",)]}") or (
                tok.type == tokenize.NAME and tok.string in NESTING_KEYWORDS
            ):
                ops += 1
            if blocks + elifs + ops > MAX_NESTING:
                raise DisallowedCode(
                    f"code nested too deeply on line {tok.start[0]}: more than "
                    f"{MAX_NESTING} operators, brackets, keywords and blocks"
                )
    except tokenize.TokenError:
        pass  # every token before the error was counted; ast.parse stops at it too and words it better
    except SyntaxError as e:  # inconsistent indentation
        raise DisallowedCode(f"syntax error: {clip(e.msg, 80)} (line {e.lineno})") from None


def _check_totals(commands: list[Command]) -> None:
    if len(commands) > MAX_CALLS:
        raise DisallowedCode(f"more than {MAX_CALLS} calls")
    # Keys of press, hotkey and keyDown (a keyUp presses nothing).
    if sum(len(c.keys) for c in commands if c.name != "keyUp") > MAX_KEY_PRESSES:
        raise DisallowedCode(f"more than {MAX_KEY_PRESSES} key presses")
    # fsum: twenty-five 0.4 s sleeps are exactly 10 s, not a hair more.
    if math.fsum(c.duration for c in commands) > MAX_TOTAL_SLEEP:
        raise DisallowedCode(f"sleeps and durations add up to more than {MAX_TOTAL_SLEEP:g} s")




def _show(value) -> str:
    return clip(repr(value), 40)


class _Parser:
    """Commands of one statement at a time; refusals quote the source of `code`."""

    def __init__(self, code: str):
        self.code = code

    def src(self, node: ast.AST) -> str:
        # The agent's own text, not ast.unparse: that can recurse deeply and spells 1e999 as 1e309.
        # On one line: a refusal is one line of an error message (a `match` spans several).
        return clip(" ".join((ast.get_source_segment(self.code, node) or type(node).__name__).split()), 80)

    def statement(self, stmt: ast.stmt) -> list[Command]:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name not in ("pyautogui", "time") or alias.asname:
                    raise DisallowedCode(f"import {self.src(alias)}")
            return []
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return [self.call(stmt.value)]
        raise DisallowedCode(f"{type(stmt).__name__} statement: {self.src(stmt)}")

    def call(self, call: ast.Call) -> Command:
        func = call.func
        if isinstance(func, ast.Name):
            raise DisallowedCode(f"call to {func.id}")
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            raise DisallowedCode(f"attribute {self.src(func)}")
        fname = f"{func.value.id}.{func.attr}"
        if fname == "time.sleep":
            args = self.bind(fname, ("seconds",), call)
        elif func.value.id != "pyautogui":
            raise DisallowedCode(f"attribute {fname}")
        elif func.attr not in SIGNATURES:
            raise DisallowedCode(f"unknown function {fname}")
        elif func.attr == "hotkey":  # keys come as *args
            args = self.bind(fname, SIGNATURES["hotkey"], call, positional=False)
            args["keys"] = tuple(map(self.literal, call.args))
        else:
            args = self.bind(fname, SIGNATURES[func.attr], call)
        try:
            return _build(func.attr, args)
        except DisallowedCode as e:
            raise DisallowedCode(f"{fname}: {e}") from None

    def bind(self, fname: str, params: tuple[str, ...], call: ast.Call, positional: bool = True) -> dict:
        """Map literal call arguments onto parameter names, like Python would."""
        if positional and len(call.args) > len(params):
            raise DisallowedCode(f"too many arguments for {fname}")
        args = dict(zip(params, map(self.literal, call.args))) if positional else {}
        for kw in call.keywords:
            if kw.arg is None:
                raise DisallowedCode(f"**kwargs in {fname}")
            if kw.arg not in params:
                raise DisallowedCode(f"unknown argument {kw.arg!r} for {fname}")
            if kw.arg in args:
                raise DisallowedCode(f"argument {kw.arg!r} given twice to {fname}")
            args[kw.arg] = self.literal(kw.value)
        return args

    def literal(self, node: ast.AST):
        """Value of a literal: str, None, bool, signed number, or list/tuple of literals.

        No parameter means anything beyond MAX_COORD, so larger numbers are
        refused here, before any float() or int() of inf or of a 300-digit int.
        """
        if isinstance(node, (ast.List, ast.Tuple)):
            return tuple(self.literal(e) for e in node.elts)
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, bool))):
            return node.value
        sign, number = 1, node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign, number = (-1 if isinstance(node.op, ast.USub) else 1), node.operand
        if not isinstance(number, ast.Constant):
            raise DisallowedCode(f"non-literal argument {self.src(node)}")
        if not _is_number(number.value):  # bytes, complex, ..., or a signed bool
            raise DisallowedCode(f"unsupported literal {self.src(node)}")
        if not abs(number.value) <= MAX_COORD:
            raise DisallowedCode(f"number out of range (beyond ±{MAX_COORD}): {self.src(node)}")
        return sign * number.value


def _build(name: str, args: dict) -> Command:
    if name == "sleep":
        return Command("sleep", duration=_seconds(args, "seconds"))
    if name in ("click", "doubleClick", "rightClick"):
        x, y = _point(args)
        _seconds(args, "interval")
        _seconds(args, "duration")
        clicks = {"doubleClick": 2, "rightClick": 1}.get(name) or _int(args, "clicks", 1, 1, MAX_CLICKS)
        button = "right" if name == "rightClick" else _button(args)
        return Command("click", x=x, y=y, clicks=clicks, button=button)
    if name in ("moveTo", "dragTo"):
        x, y = _point(args)
        return Command(name, x=x, y=y, duration=_seconds(args, "duration"), button=_button(args))
    _seconds(args, "interval")  # of write, press and hotkey; the others have none
    if name in ("write", "typewrite"):
        message = args.get("message", "")
        if isinstance(message, tuple):  # typewrite(['a', 'enter']) presses keys
            if len(message) > MAX_KEY_PRESSES:
                raise DisallowedCode(f"more than {MAX_KEY_PRESSES} keys")
            return Command("press", keys=tuple(map(_key, message)))
        if not isinstance(message, str):
            raise DisallowedCode("needs a string")
        if len(message) > MAX_TEXT_CHARS:
            raise DisallowedCode(f"more than {MAX_TEXT_CHARS} characters")
        bad = untypeable(message)
        if bad is not None:
            raise DisallowedCode(f"untypeable character U+{ord(bad):04X}")
        return Command("write", text=message)
    if name == "press":
        keys = args.get("keys")
        keys = keys if isinstance(keys, tuple) else (keys,)
        presses = _int(args, "presses", 1, 1, MAX_KEY_PRESSES)
        if len(keys) * presses > MAX_KEY_PRESSES:  # before building that tuple
            raise DisallowedCode(f"more than {MAX_KEY_PRESSES} keys")
        return Command("press", keys=tuple(map(_key, keys)) * presses)
    if name == "hotkey":
        if not args["keys"]:
            raise DisallowedCode("needs at least one key")
        return Command("hotkey", keys=tuple(map(_key, args["keys"])))
    if name in ("scroll", "hscroll"):
        x, y = _point(args)
        return Command(name, x=x, y=y, clicks=_int(args, "clicks", 0, -MAX_SCROLL, MAX_SCROLL))
    return Command(name, keys=(_key(args.get("key")),))  # keyDown / keyUp


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _seconds(args: dict, name: str) -> float:
    value = args.get(name, 0.0)
    if not (_is_number(value) and 0 <= value <= MAX_SLEEP):
        raise DisallowedCode(f"{name} must be a number in [0, {MAX_SLEEP:g}] seconds, got {_show(value)}")
    return float(value)


def _int(args: dict, name: str, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if not (_is_number(value) and low <= value <= high and value == int(value)):
        raise DisallowedCode(f"{name} must be an integer in [{low}, {high}], got {_show(value)}")
    return int(value)


def _point(args: dict) -> tuple[float | None, float | None]:
    """(x, y), or (None, None) for "where the mouse is"; literal() bounded the numbers."""
    x, y = args.get("x"), args.get("y")
    if isinstance(x, tuple) and y is None and len(x) == 2:  # click((x, y))
        x, y = x
    if (x is None) != (y is None):
        raise DisallowedCode("give both x and y, or neither")
    if x is not None and not (_is_number(x) and _is_number(y)):
        raise DisallowedCode(f"coordinates must be numbers, got {_show(x)}, {_show(y)}")
    return (None, None) if x is None else (float(x), float(y))


def _button(args: dict) -> str:
    button = args.get("button", "left")
    button = {"primary": "left", "secondary": "right"}.get(button, button)
    if button not in ("left", "right", "middle"):
        raise DisallowedCode(f"unknown mouse button {_show(button)}")
    return button


def _key(key) -> str:
    name = canonical_key(key)
    if name is None:
        raise DisallowedCode(f"unknown key {_show(key)}")
    return name
