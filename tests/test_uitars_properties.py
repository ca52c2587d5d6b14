"""Properties of the UI-TARS parser and of the code generated from its actions.

(a) Whatever the model writes, `parse_response` returns or raises ParseError, fast.
(b) Well-formed answers (and everything GUIDED_REGEX admits) parse, and the action
    survives parse -> to_command -> the env server's `parse_code` unchanged.
(c) Every Action that constructs becomes code the env server accepts.
"""
import json
import string
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cua_cli.actions import DIRECTIONS, POINT_TYPES, SCROLL_CLICKS, TERMINAL, Action, to_command
from cua_cli.agents.uitars import GUIDED_REGEX, ParseError, parse_response, smart_resize
from cua_cli.envserver.pyautogui_subset import parse_code
from cua_cli.pyautogui_vocab import (
    MAX_CALLS,
    MAX_CODE_CHARS,
    MAX_COORD,
    MAX_KEY_PRESSES,
    MAX_SLEEP,
    MAX_STATEMENTS,
    MAX_TEXT_CHARS,
    MAX_TOTAL_SLEEP,
    canonical_key,
    untypeable,
)

NOT_CODE = (None, "WAIT", "DONE")


def parse_or_fail(text, width=1920, height=1080, mode="qwen25vl"):
    """The parse, or None on ParseError; any other exception fails the test, and so does a hang."""
    t0 = time.perf_counter()
    try:
        parsed = parse_response(text, width, height, mode)
    except ParseError:
        parsed = None
    assert time.perf_counter() - t0 < 5, "parse took too long"  # a runaway regex, not a loaded machine
    return parsed


def env_accepts(actions):
    """The env server's commands for `actions` run as one program, checked against pyautogui_vocab's limits
    (which the env server enforces too)."""
    codes = [c for c in map(to_command, actions) if c not in NOT_CODE]
    program = "\n".join(codes)
    commands = parse_code(program)
    assert len(program) <= MAX_CODE_CHARS
    assert len(commands) <= min(MAX_CALLS, MAX_STATEMENTS)
    presses = seconds = 0
    for c in commands:
        assert c.x is None or (abs(c.x) <= MAX_COORD and abs(c.y) <= MAX_COORD)
        assert len(c.text) <= MAX_TEXT_CHARS and untypeable(c.text) is None
        assert all(canonical_key(k) == k for k in c.keys)
        assert c.duration <= MAX_SLEEP
        presses += len(c.keys) if c.name in ("press", "hotkey") else 0
        seconds += c.duration
    assert presses <= MAX_KEY_PRESSES and seconds <= MAX_TOTAL_SLEEP
    return commands


def expected_commands(a):
    """What `parse_code` must give back for `a`: (name, x, y, button, clicks, keys, text)."""
    def cmd(name, x=None, y=None, button="left", clicks=1, keys=(), text=""):
        return (name, None if x is None else float(round(x)), None if y is None else float(round(y)),
                button, clicks, keys, text)
    if a.type == "click":
        return [cmd("click", a.x, a.y)]
    if a.type == "left_double":
        return [cmd("click", a.x, a.y, clicks=2)]
    if a.type == "right_single":
        return [cmd("click", a.x, a.y, button="right")]
    if a.type == "hover":
        return [cmd("moveTo", a.x, a.y)]
    if a.type == "drag":
        return [cmd("moveTo", a.x, a.y), cmd("dragTo", a.x2, a.y2)]
    if a.type == "hotkey":
        return [cmd("press" if len(a.keys) == 1 else "hotkey", keys=a.keys)]
    if a.type == "type":
        body, submit = (a.text[:-1], True) if a.text.endswith("\n") else (a.text, False)
        return [cmd("write", text=body)] * bool(body) + [cmd("press", keys=("enter",))] * submit
    if a.type == "scroll":
        clicks = SCROLL_CLICKS if a.direction in ("up", "right") else -SCROLL_CLICKS
        return [cmd("scroll" if a.direction in ("up", "down") else "hscroll", a.x, a.y, clicks=clicks)]
    return []


def assert_round_trip(actions):
    got = [(c.name, c.x, c.y, c.button, c.clicks, c.keys, c.text) for c in env_accepts(actions)]
    assert got == [c for a in actions for c in expected_commands(a)]


# ---- (a) arbitrary and adversarial text ----

TOKENS = ["Action:", "Thought: ", " Action: ", "click(", "type(", "finished(", "hotkey(", "drag(", "scroll(",
          "wait()", "call_user()", "content=", "start_box=", "end_box=", "key=", "direction=", "'", '"', "\\",
          "\\'", "\\n", ")", "(", "[", "]", ",", " ", "\n", "\n\n", "\r\n", "-", "1", "99999", "1e999", ".5",
          "<|box_start|>", "<|box_end|>", "<point>", "</point>", "ctrl", "+", "enter", "\x00", "\ud800",
          "\u2028", "\u00a0", "\U0001f600"]
token_soup = st.lists(st.sampled_from(TOKENS), max_size=80).map("".join)
any_char = st.one_of(st.characters(), st.characters(categories=["Cs"]), st.sampled_from("\x00\n'\"\\()"))
any_text = st.text(any_char)


@st.composite
def bombs(draw):
    """A short prefix, one unit repeated up to thousands of times, a short suffix."""
    prefix = draw(st.sampled_from(["Action: click(start_box='(", "Action: click(start_box=", "Action: type(content='",
                                   "Action: hotkey(key='", "Action: ", "Thought: ", "", "Action: click("]))
    unit = draw(st.sampled_from(["1 ", "1   ", "1, ", "-", "(", "((", "[", "')", "')\n", "')\n\n1", "\\'", "\\",
                                 "\\n", " ", "\n", "9", "a,", "a ", "wait()\n", "a='', ", "Action:", "xAction:",
                                 "click(start_box='(1,2)')\n", "drag(start_box='(1,2)', end_box='(3,4)')\n"]))
    suffix = draw(st.sampled_from(["", "x)')", ")')", "')", ")", "1)", "'", ",1)')"]))
    return prefix + unit * draw(st.integers(1, 20_000)) + suffix


numbers = st.one_of(st.integers().map(str), st.floats().map(repr), st.sampled_from(["1e999", "-1e999", "nan", "inf"]),
                    st.integers(1, 5000).map(lambda n: "9" * n), st.text("0123456789.-e+ ", max_size=30))
BOX_FORMS = ["Action: click(start_box='({},{})')", "Action: click(start_box='<point>{} {}</point>')",
             "Action: drag(start_box='({0},{1})', end_box='({1},{0})')",
             "Action: scroll(start_box='[{}, {}]', direction='up')"]
huge_boxes = st.builds(lambda a, b, form: form.format(a, b), numbers, numbers, st.sampled_from(BOX_FORMS))
junk_around = st.builds(lambda a, b, c: f"{a}Action: {b}{c}", any_text, st.one_of(token_soup, any_text), any_text)


@given(st.one_of(any_text, token_soup, bombs(), huge_boxes, junk_around))
@example("Action: click(start_box='(" + "1 " * 40 + "x)')")
@example("Action: click(start_box=" + "-" * 5000 + "1)")
@example("Action: click(start_box=" + "(" * 5000 + ")")
@example("Action: type(content='" + "a" * 3000 + "')")
def test_any_text_parses_or_raises_parse_error_quickly(text):
    parsed = parse_or_fail(text)
    if parsed is not None:
        env_accepts(parsed.actions)


# ---- (b) well-formed answers round-trip ----

SCREENS = st.one_of(st.sampled_from([(1920, 1080), (1280, 720), (160, 210)]),
                    st.tuples(st.integers(28, 4000), st.integers(28, 4000)))
# (how a model may write a key, canonical name alone, canonical name in a combo)
KEYS = [("ctrl", "ctrl", "ctrl"), ("Ctrl", "ctrl", "ctrl"), ("control", "ctrl", "ctrl"), ("shift", "shift", "shift"),
        ("Shift", "shift", "shift"), ("alt", "alt", "alt"), ("option", "alt", "alt"), ("cmd", "win", "win"),
        ("Enter", "enter", "enter"), ("Return", "enter", "enter"), ("esc", "escape", "escape"),
        ("tab", "tab", "tab"), ("ArrowLeft", "left", "left"), ("pgdn", "pagedown", "pagedown"), ("F5", "f5", "f5"),
        ("space", "space", "space"), ("backspace", "backspace", "backspace"), ("a", "a", "a"), ("C", "C", "c"),
        ("1", "1", "1"), ("+", "+", "+"), ("=", "=", "="), ("/", "/", "/")]
typeable = st.one_of(st.characters(max_codepoint=0xFFFF, exclude_categories=["Cc", "Cs", "Cn", "Co"]),
                     st.sampled_from("\n\t'\"\\)( "))
PT_FORMS = ["'({},{})'", "'<|box_start|>({},{})<|box_end|>'", "'<point>{} {}</point>'", "'[{}, {}]'", "'( {} , {} )'"]


def escape(text, quote):
    return text.replace("\\", "\\\\").replace(quote, "\\" + quote).replace("\n", "\\n").replace("\t", "\\t")


@st.composite
def point(draw, size, screen):
    """(model text of a point or box, the screen point it means)."""
    (mw, mh), (width, height) = size, screen
    xs = draw(st.lists(st.integers(-50, mw + 50), min_size=2, max_size=2))
    ys = draw(st.lists(st.integers(-50, mh + 50), min_size=2, max_size=2))
    if draw(st.booleans()):
        text, mx, my = f"'({xs[0]},{ys[0]},{xs[1]},{ys[1]})'", (xs[0] + xs[1]) / 2, (ys[0] + ys[1]) / 2
    else:
        text, mx, my = draw(st.sampled_from(PT_FORMS)).format(xs[0], ys[0]), xs[0], ys[0]
    return text, min(max(mx / mw * width, 0), width - 1), min(max(my / mh * height, 0), height - 1)


@st.composite
def call(draw, size, screen):
    """(model text of one call, the Action it means)."""
    kind = draw(st.sampled_from(["click", "left_single", "left_double", "right_single", "hover", "drag", "hotkey",
                                 "press", "type", "scroll", "wait", "finished", "call_user"]))
    if kind in ("click", "left_single", "left_double", "right_single", "hover"):
        arg = draw(st.sampled_from(["start_box", "point", "start_point"]))
        text, x, y = draw(point(size, screen))
        return f"{kind}({arg}={text})", Action("click" if kind == "left_single" else kind, x, y)
    if kind == "drag":
        (t1, x1, y1), (t2, x2, y2) = draw(point(size, screen)), draw(point(size, screen))
        return f"drag(start_box={t1}, end_box={t2})", Action("drag", x1, y1, x2, y2)
    if kind in ("hotkey", "press"):
        keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=1 if kind == "press" else 4))
        sep = draw(st.sampled_from([" ", "+", " + "]))
        if sep == " " and any(k[0] == "+" for k in keys[1:-1]):
            sep = "+"  # "a + b" is a+b, not a, plus, b
        expected = (keys[0][1],) if len(keys) == 1 else tuple(k[2] for k in keys)
        return f"{kind}(key='{sep.join(k[0] for k in keys)}')", Action("hotkey", keys=expected)
    if kind in ("type", "finished"):
        content = draw(st.text(typeable, min_size=int(kind == "type"), max_size=200))
        if kind == "finished" and draw(st.booleans()):
            return "finished()", Action("finished")
        q = draw(st.sampled_from("'\""))
        return f"{kind}(content={q}{escape(content, q)}{q})", Action(kind, text=content)
    if kind == "scroll":
        direction = draw(st.sampled_from(sorted(DIRECTIONS)))
        spelled = draw(st.sampled_from([direction, direction.upper(), f" {direction.title()} "]))
        if draw(st.booleans()):
            return f"scroll(direction='{spelled}')", Action("scroll", direction=direction)
        text, x, y = draw(point(size, screen))
        return f"scroll(start_box={text}, direction='{spelled}')", Action("scroll", x, y, direction=direction)
    return f"{kind}()", Action(kind)


@st.composite
def answers(draw):
    width, height = draw(SCREENS)
    mode = draw(st.sampled_from(["qwen25vl", "qwen2vl"]))
    size = (1000, 1000) if mode == "qwen2vl" else smart_resize(height, width)[::-1]
    thought = draw(st.text(string.ascii_letters + " .,\n", max_size=40))
    calls = draw(st.lists(call(size, (width, height)), min_size=1, max_size=4))
    ends = [i for i, (_, a) in enumerate(calls) if a.type in TERMINAL]
    calls = calls[:ends[0] + 1] if ends else calls  # nothing may follow finished() or call_user()
    seps = draw(st.lists(st.sampled_from(["\n", "\n\n", " \n ", "\r\n"]), min_size=len(calls), max_size=len(calls)))
    body = "".join(text + sep for (text, _), sep in zip(calls, seps)).rstrip()
    return f"Thought: {thought}\nAction: {body}", [a for _, a in calls], thought.strip() or None, width, height, mode


def same_action(got, want):
    assert (got.type, got.keys, got.text, got.direction) == (want.type, want.keys, want.text, want.direction)
    for name in ("x", "y", "x2", "y2"):
        g, w = getattr(got, name), getattr(want, name)
        assert (g is None) == (w is None) and (g is None or abs(g - w) < 1e-6), name


@given(answers())
@example(("Action: hotkey(key='Ctrl + Shift + T')", [Action("hotkey", keys=("ctrl", "shift", "t"))], None,
          1920, 1080, "qwen25vl"))
def test_well_formed_answers_round_trip(answer):
    text, expected, thought, width, height, mode = answer
    parsed = parse_or_fail(text, width, height, mode)
    assert parsed is not None, text
    assert parsed.thought == thought
    assert len(parsed.actions) == len(expected)
    for got, want in zip(parsed.actions, expected):
        same_action(got, want)
    assert_round_trip(parsed.actions)


@given(st.from_regex(GUIDED_REGEX, fullmatch=True))
def test_guided_regex_answers_parse_and_round_trip(text):
    parsed = parse_or_fail(text)
    assert parsed is not None and len(parsed.actions) == 1, text
    assert_round_trip(parsed.actions)


# ---- (c) any Action that constructs becomes accepted code ----

# type -> (required fields, optional fields)
FIELDS = {**{t: ({"x", "y"}, set()) for t in POINT_TYPES}, "drag": ({"x", "y", "x2", "y2"}, set()),
          "hotkey": ({"keys"}, set()), "type": ({"text"}, set()), "finished": (set(), {"text"}),
          "scroll": ({"direction"}, {"x", "y"}), "wait": (set(), set()), "call_user": (set(), set())}
coords = st.one_of(st.floats(-MAX_COORD, MAX_COORD), st.integers(-MAX_COORD, MAX_COORD), st.floats(),
                   st.sampled_from([MAX_COORD + 0.4, -MAX_COORD - 0.6, 0.5, -0.5, 10 ** 400, True]))
long_texts = st.builds(lambda ch, n, end: ch * n + end, st.sampled_from(["a", "\u00a0", "\u200b", "'", "\\", "\n"]),
                       st.integers(MAX_TEXT_CHARS - 10, MAX_TEXT_CHARS + 10), st.sampled_from(["", "\n"]))
texts = st.one_of(st.text(typeable, max_size=300), st.text(any_char, max_size=50), long_texts)
key_names = st.sampled_from([k[0] for k in KEYS] + ["ctrl+c", "Ctrl + Shift + T", "ctrl c", "ctrl+", "++"])
odd_keys = st.one_of(st.sampled_from(["capslock", "printscreen", " ", "", "a b c"]), st.text(min_size=1, max_size=8))
keys = st.one_of(st.lists(st.one_of(key_names, odd_keys), max_size=5),
                 st.lists(st.sampled_from([k[0] for k in KEYS]), min_size=MAX_KEY_PRESSES - 5,
                          max_size=MAX_KEY_PRESSES + 5),
                 st.builds(lambda n: ("a " * n,), st.integers(MAX_KEY_PRESSES - 2, MAX_KEY_PRESSES + 2)))
VALUES = {"x": coords, "y": coords, "x2": coords, "y2": coords, "text": texts, "keys": keys,
          "direction": st.one_of(st.sampled_from(sorted(DIRECTIONS)), st.text(max_size=6))}
# Keyword arguments for Action: the fields its type takes, with values valid or not.
candidate_actions = st.one_of([
    st.fixed_dictionaries({"type": st.just(kind), **{name: VALUES[name] for name in required}},
                          optional={name: VALUES[name] for name in optional})
    for kind, (required, optional) in sorted(FIELDS.items())])


@given(candidate_actions)
@example(dict(type="hotkey", keys=("ctrl+c",)))
@example(dict(type="type", text="\u200b" * MAX_TEXT_CHARS))
def test_every_action_that_constructs_becomes_accepted_code(fields):
    try:
        action = Action(**fields)
    except ValueError:
        return
    env_accepts([action])
    assert Action.from_dict(json.loads(json.dumps(action.to_dict()))) == action


@pytest.mark.slow  # a long property run
@given(st.integers(1, 5000), st.integers(1, 5000), st.sampled_from([14, 28, 32]),
       st.integers(1, 10 ** 6), st.integers(1, 2 * 10 ** 7))
def test_smart_resize_is_transformers_rule(height, width, factor, min_pixels, max_pixels):
    """The coordinate space of a qwen25vl answer is the size the server's processor resized to."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as theirs
    try:
        expected = theirs(height, width, factor, min_pixels, max_pixels)
    except ValueError:  # an aspect ratio over 200 (or a side below the factor) it refuses
        return
    assert smart_resize(height, width, factor, min_pixels, max_pixels) == expected


@given(st.integers(200, 3000), st.integers(200, 3000), st.sampled_from([(28, 3136, 12544), (28, 78400, 200704),
                                                                          (14, 3136, 1003520)]))
def test_points_map_through_the_servers_resize_settings(width, height, settings):
    """A server started with other pixel bounds answers in another space: the recorded settings map it back."""
    from cua_cli.agents.uitars import resize_of, to_model_coords
    from cua_cli.models import Reply
    reply = Reply("x", image_processor={"rule": "smart_resize", "factor": settings[0], "min_pixels": settings[1],
                                        "max_pixels": settings[2], "type": "Qwen2VLImageProcessor"})
    resize = resize_of(reply)
    assert resize == dict(zip(("factor", "min_pixels", "max_pixels"), settings))
    x, y = width // 3, height // 2
    mx, my = to_model_coords(x, y, width, height, "qwen25vl", resize)
    (a,) = parse_response(f"Action: click(start_box='({mx},{my})')", width, height, "qwen25vl", resize).actions
    assert abs(a.x - x) <= width / min(smart_resize(height, width, *settings)) + 1
    assert abs(a.y - y) <= height / min(smart_resize(height, width, *settings)) + 1


def test_unknown_or_odd_resize_settings_fall_back_to_the_defaults():
    from cua_cli.agents.uitars import resize_of
    from cua_cli.models import Reply
    for p in (None, {}, {"rule": None, "factor": 28, "min_pixels": 1, "max_pixels": 2},
              {"rule": "smart_resize", "factor": 28, "min_pixels": None, "max_pixels": 2},
              {"rule": "smart_resize", "factor": True, "min_pixels": 1, "max_pixels": 2},
              {"rule": "smart_resize", "factor": 0, "min_pixels": 1, "max_pixels": 2}):
        assert resize_of(Reply("x", image_processor=p)) is None
