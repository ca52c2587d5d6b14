"""Properties of parse_code over arbitrary and adversarial input: it returns
commands within every limit of pyautogui_vocab, or raises DisallowedCode, nothing else."""

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cua_cli.envserver.pyautogui_subset import SIGNATURES, DisallowedCode, parse_code
from cua_cli.pyautogui_vocab import (
    KEY_ALIASES,
    KEY_NAMES,
    MAX_CALLS,
    MAX_COORD,
    MAX_KEY_PRESSES,
    MAX_SCROLL,
    MAX_SLEEP,
    MAX_TEXT_CHARS,
    MAX_TOTAL_SLEEP,
    canonical_key,
    untypeable,
)


def parse_or_refuse(code: str):
    """parse_code's commands, or None when refused; any other exception fails the test."""
    try:
        commands = parse_code(code)
    except DisallowedCode as e:
        assert str(e) and "\n" not in str(e)
        return None
    assert isinstance(commands, list)
    return commands


def assert_within_limits(commands) -> None:
    assert len(commands) <= MAX_CALLS
    for c in commands:
        for v in (c.x, c.y):
            assert v is None or (type(v) is float and math.isfinite(v) and abs(v) <= MAX_COORD)
        assert 0 <= c.duration <= MAX_SLEEP
        assert type(c.clicks) is int and abs(c.clicks) <= MAX_SCROLL
        assert c.button in ("left", "right", "middle")
        assert len(c.text) <= MAX_TEXT_CHARS and untypeable(c.text) is None
        assert all(canonical_key(k) == k for k in c.keys)
    assert math.fsum(c.duration for c in commands) <= MAX_TOTAL_SLEEP
    assert sum(len(c.keys) for c in commands if c.name != "keyUp") <= MAX_KEY_PRESSES


# Pieces of Python, and of attacks on its parser, to glue together at random.
FRAGMENTS = [
    "pyautogui.click(", "pyautogui.scroll(", "time.sleep(", "import pyautogui", "(", ")", "[", "]",
    "{", "}", ",", "-", "+", "**", ".b", "()", "=", ":", ";", "x", "1", "1.5", "1e999", "-1e999",
    "0x" + "f" * 300, "9" * 400, "1j", "True", "None", "...", "'", '"', "'''", "'a'", "b'a'",
    "f'{", "}'", "rf'", "\\", "\\\n", "#", "\n", "\r", "\r\n", "\t", " ", "    ", "\x0c", "\x00",
    "\ud800", "é", "if ", "elif x: 0\n", "else:", "lambda: ", "not ", "await ", "yield ", "(x := 1)",
    "*", "**kw", "for i in x:", "def f():\n", "class C:", "match x:\n case 1: pass",
]
fragment_runs = st.tuples(st.sampled_from(FRAGMENTS), st.integers(1, 3000)).map(lambda t: t[0] * t[1])
python_soup = st.lists(st.one_of(st.sampled_from(FRAGMENTS), fragment_runs), max_size=30).map("".join)
any_text = st.text(st.characters(exclude_categories=()), max_size=300)


@given(st.one_of(any_text, python_soup))
@example("pyautogui.scroll(1e999)")
@example("pyautogui.scroll(0x" + "f" * 300 + ")")
@example("pyautogui.click(1e999, 5)")
@example("(" * 5_000 + ")" * 5_000)
@example("-" * 5_000 + "1")
@example("pyautogui.click(" + "-" * 900 + "1, 2)")
@example("pyautogui.write(f'{" + "-" * 900 + "1}')")
@example("pyautogui.write('\ud800')\n\x00")
def test_any_text_is_parsed_or_refused(code):
    commands = parse_or_refuse(code)
    if commands is not None:
        assert_within_limits(commands)


def number_source(n) -> str:
    if isinstance(n, float) and math.isinf(n):
        return "1e999" if n > 0 else "-1e999"
    return repr(n)


# Arguments within the subset's bounds...
small_numbers = st.one_of(st.integers(-300, 300), st.floats(-300, 300))
valid_keys = st.sampled_from(sorted(KEY_NAMES | set(KEY_ALIASES) | {"a", "A", "Ctrl", "1"})).map(repr)
typeable = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cc", "Cs", "Cn")), max_size=30)
seconds = st.one_of(st.sampled_from([0, 0.1, 1]), st.floats(0, MAX_SLEEP)).map(repr)


def listed(items):
    return st.lists(items, max_size=5).map(lambda xs: "[" + ", ".join(xs) + "]")


VALID = {
    "x": small_numbers.map(repr), "y": small_numbers.map(repr), "clicks": st.integers(1, 5).map(repr),
    "interval": seconds, "duration": seconds, "seconds": seconds,
    "button": st.sampled_from(["left", "right", "middle", "primary", "secondary"]).map(repr),
    "message": st.one_of(typeable.map(repr), listed(valid_keys)),
    "keys": st.one_of(valid_keys, listed(valid_keys)), "presses": st.integers(1, 5).map(repr), "key": valid_keys,
}
# ...and anything else.
numbers = st.one_of(
    st.integers(-(10**300), 10**300),
    st.floats(allow_nan=False),
    st.sampled_from([MAX_COORD, -MAX_COORD, MAX_COORD + 1, 2**53 + 1, -1, 0, MAX_SLEEP + 0.001, 11, 101, 201]),
).map(number_source)
scalars = st.one_of(
    numbers,
    st.text(st.characters(exclude_categories=()), max_size=30).map(repr),
    st.sampled_from(["True", "False", "None", "1j", "b'x'", "...", "x", "0x" + "f" * 300, "f'{x}'", "'nokey'",
                     "''", "'\\x00'", "'a' * 3000", "'x' * 2001", "1 + 2", "*xs", "**kw", "(x := 1)"]),
)
literals = st.recursive(scalars, listed, max_leaves=6)
nested = st.tuples(st.sampled_from(["(", "[", "-", "+", "not "]), st.integers(1, 500), literals).map(
    lambda t: t[0] * t[1] + t[2] + {"(": ")", "[": "]"}.get(t[0], "") * t[1])


@st.composite
def calls(draw, odds):
    """A call of an allowed function; one in `odds` of its parts is anything."""
    rarely = st.sampled_from([True] + [False] * (odds - 1))
    name = draw(st.sampled_from([*SIGNATURES, "sleep"]))
    if draw(rarely):
        name = draw(st.sampled_from(["nope", "screenshot"]))
    params = ("seconds",) if name == "sleep" else SIGNATURES.get(name, ("x",))

    def value(param):
        return draw(st.one_of(literals, nested) if draw(rarely) else VALID[param])

    passed = set(draw(st.lists(st.sampled_from(params), unique=True)))
    if name in ("press", "keyDown", "keyUp"):
        passed.add(params[0])  # required
    if passed & {"x", "y"}:
        passed |= {"x", "y"}
    if name == "hotkey":  # keys as *args
        args = draw(st.lists(valid_keys, min_size=1, max_size=4))
    else:
        prefix = next((i for i, p in enumerate(params) if p not in passed), len(params))
        positional = params[: draw(st.integers(0, prefix))]
        args = [value(p) for p in positional]
        passed -= set(positional)
    if draw(rarely):
        passed.add(draw(st.sampled_from(["foo", *params])))
    args += [f"{p}={value(p if p in VALID else 'x')}" for p in sorted(passed)]
    return f"{'time' if name == 'sleep' else 'pyautogui'}.{name}({', '.join(args)})"


def programs(odds, min_size, max_size):
    lines = st.one_of(calls(odds), calls(odds), calls(odds), st.just("import pyautogui"))
    return st.lists(lines, min_size=min_size, max_size=max_size).map("\n".join)


# Short programs, often wrong; long ones, seldom wrong, try the limits of a whole program.
near_valid_programs = st.one_of(programs(8, 1, 10), programs(300, 30, 70))


@pytest.mark.slow  # a long property run
@given(near_valid_programs)
@example("pyautogui.click(80, 100)\npyautogui.scroll(1e999)")
@example("pyautogui.click(1, 2, clicks=1e999)")
@example("time.sleep(5)\ntime.sleep(5)\ntime.sleep(5)")
@example("pyautogui.press('a', presses=100)\n" * 3)
def test_near_valid_programs_are_parsed_within_limits_or_refused(code):
    commands = parse_or_refuse(code)
    if commands is not None:
        assert_within_limits(commands)


coordinates = st.one_of(st.integers(-MAX_COORD, MAX_COORD), st.floats(-MAX_COORD, MAX_COORD))
clicks_in_bounds = st.tuples(coordinates, coordinates).map(lambda p: f"pyautogui.click({p[0]!r}, {p[1]!r})\n")


@given(st.lists(clicks_in_bounds, min_size=1, max_size=MAX_CALLS + 1))
@example([f"pyautogui.click({-MAX_COORD}, {MAX_COORD}.0)\n"] * MAX_CALLS)
@example(["pyautogui.click(1, 2)\n"] * (MAX_CALLS + 1))
def test_clicks_in_bounds_are_allowed_up_to_max_calls(lines):
    if len(lines) > MAX_CALLS:
        assert parse_or_refuse("".join(lines)) is None
    else:
        commands = parse_code("".join(lines))
        assert len(commands) == len(lines)
        assert_within_limits(commands)
