import ast
import re
import time

import pytest

from cua_cli.actions import Action, to_command
from cua_cli.agents.uitars import (
    GUIDED_REGEX,
    MAX_RESPONSE_CHARS,
    ParseError,
    UITarsAgent,
    parse_response,
    smart_resize,
    to_model_coords,
)
from cua_cli.envserver.pyautogui_subset import parse_code
from cua_cli.models import Image
from cua_cli.pyautogui_vocab import MAX_CALLS, MAX_TEXT_CHARS

SIZES = [(1920, 1080), (1280, 720), (160, 210)]


def one(text, width=1920, height=1080, mode="qwen25vl"):
    parsed = parse_response(text, width, height, mode)
    assert len(parsed.actions) == 1
    return parsed.actions[0]


def test_smart_resize():
    assert smart_resize(1080, 1920) == (1092, 1932)
    assert smart_resize(210, 160) == (336, 252)  # small images are scaled up to min_pixels


def test_smart_resize_matches_reference():
    from ui_tars.action_parser import smart_resize as ref
    for h in range(20, 4000, 97):
        for w in range(20, 4000, 131):
            assert smart_resize(h, w) == ref(h, w), (h, w)


@pytest.mark.parametrize("width, height", SIZES)
@pytest.mark.parametrize("mode", ["qwen25vl", "qwen2vl"])
def test_coordinates_match_reference(width, height, mode):
    from ui_tars.action_parser import parse_action_to_structure_output

    if mode == "qwen25vl":
        mh, mw = smart_resize(height, width)
    else:
        mh = mw = 1000
    points = [(0, 0), (mw // 3, mh // 2), (mw - 1, mh - 1), (mw // 7, mh * 5 // 6)]
    text = "Thought: t\nAction: " + "\n\n".join(
        [f"click(start_box='({x},{y})')" for x, y in points]
        + [f"drag(start_box='({mw // 4},{mh // 4})', end_box='({mw // 2},{mh // 3})')",
           f"scroll(start_box='({mw // 5},{mh // 9},{mw // 3},{mh // 2})', direction='down')"])
    ref = parse_action_to_structure_output(text, 1000, height, width, model_type=mode)
    ours = parse_response(text, width, height, mode).actions
    assert len(ref) == len(ours)
    for r, a in zip(ref, ours):
        x1, y1, x2, y2 = ast.literal_eval(r["action_inputs"]["start_box"])
        assert abs(a.x - (x1 + x2) / 2 * width) <= 1 and abs(a.y - (y1 + y2) / 2 * height) <= 1
        if a.type == "drag":
            x1, y1, x2, y2 = ast.literal_eval(r["action_inputs"]["end_box"])
            assert abs(a.x2 - (x1 + x2) / 2 * width) <= 1 and abs(a.y2 - (y1 + y2) / 2 * height) <= 1


@pytest.mark.parametrize("width, height", SIZES)
@pytest.mark.parametrize("mode", ["qwen25vl", "qwen2vl"])
def test_to_model_coords_round_trips(width, height, mode):
    for x, y in [(0, 0), (width // 2, height // 3), (width - 1, height - 1)]:
        mx, my = to_model_coords(x, y, width, height, mode)
        a = one(f"Action: click(start_box='({mx},{my})')", width, height, mode)
        assert abs(a.x - x) <= 1 and abs(a.y - y) <= 1


def test_qwen2vl_scale_and_clamping():
    assert one("Action: click(start_box='(500,250)')", 200, 100, "qwen2vl") == Action("click", 100, 25)
    assert one("Action: click(start_box='(5000,-3)')", 200, 100, "qwen2vl") == Action("click", 199, 0)


def test_point_forms():
    expected = Action("click", 960, 540)
    for arg in ["start_box='(966,546)'", "start_box='<|box_start|>(966,546)<|box_end|>'", "point='<point>966 546</point>'",
                "start_point='(966, 546)'", "start_box='(866,446,1066,646)'", "start_box='[966, 546]'"]:
        assert one(f"Action: click({arg})") == expected, arg
    for name in ["click", "left_single"]:
        assert one(f"Action: {name}(start_box='(966,546)')") == expected


def test_every_action_type():
    cases = {
        "left_double(start_box='(966,546)')": Action("left_double", 960, 540),
        "right_single(start_box='(966,546)')": Action("right_single", 960, 540),
        "hover(start_box='(966,546)')": Action("hover", 960, 540),
        "drag(start_point='<point>0 0</point>', end_point='<point>966 546</point>')": Action("drag", 0, 0, 960, 540),
        "hotkey(key='ctrl c')": Action("hotkey", keys=("ctrl", "c")),
        "hotkey(hotkey='Ctrl ArrowLeft')": Action("hotkey", keys=("ctrl", "left")),
        "press(key='Enter')": Action("hotkey", keys=("enter",)),
        "type(content='abc')": Action("type", text="abc"),
        "scroll(start_box='(966,546)', direction='Up')": Action("scroll", 960, 540, direction="up"),
        "scroll(direction='left')": Action("scroll", direction="left"),
        "wait()": Action("wait"),
        "finished()": Action("finished"),
        "finished(content='The answer is \\'42\\'')": Action("finished", text="The answer is '42'"),
        "call_user()": Action("call_user"),
    }
    for call, expected in cases.items():
        assert one(f"Thought: ok\nAction: {call}") == expected, call


def test_thought_variants():
    assert parse_response("Thought: look\nmore\nAction: wait()", 10, 10).thought == "look\nmore"
    assert parse_response("Action_Summary: sum\nAction: wait()", 10, 10).thought == "sum"
    assert "refl" in parse_response("Reflection: refl\nAction_Summary: sum\nAction: wait()", 10, 10).thought
    assert parse_response("Action: wait()", 10, 10).thought is None
    assert one("Thought: same line Action: wait()") == Action("wait")


def test_multi_action():
    text = "Thought: t\nAction: click(start_box='(10,10)')\n\ntype(content='hi')\n\nhotkey(key='enter')"
    assert [a.type for a in parse_response(text, 1000, 1000, "qwen2vl").actions] == ["click", "type", "hotkey"]
    # A single newline between calls, and calls containing "Action: " inside content.
    text = "Action: type(content='Action: x')\nclick(start_box='(10,10)')"
    assert parse_response(text, 1000, 1000, "qwen2vl").actions == [Action("type", text="Action: x"), Action("click", 10, 10)]


def test_type_content_escapes_and_submit():
    raw = r"""Action: type(content='He said "it's ok" and \'fine\' in C:\Users\n')"""
    a = one(raw)
    assert a.text == "He said \"it's ok\" and 'fine' in C:\\Users\n"
    write, press = ast.parse(to_command(a)).body
    assert ast.literal_eval(write.value.args[0]) == a.text[:-1]
    assert ast.dump(press) == ast.dump(ast.parse("pyautogui.press('enter')").body[0])
    assert one('Action: type(content="double \\"quoted\\"")').text == 'double "quoted"'


@pytest.mark.parametrize("text", [
    "", "   ", "just some words", "Thought: hmm", "Action:", "Action: explode(start_box='(1,2)')",
    "Action: click(start_box='(a,b)')", "Action: click(start_box='(1)')", "Action: click(start_box='(1,2,3)')",
    "Action: click()", "Action: click(start_box='(1,2)', button='right')", "Action: click(start_box=(1,2))",
    "Action: click('(1,2)')", "Action: drag(start_box='(1,2)')", "Action: scroll(start_box='(1,2)')",
    "Action: scroll(direction='sideways')", "Action: hotkey(key='')", "Action: type(content='')", "Action: type(x)",
    "Action: click(start_box='(1,2)'", "Action: click(start_box='(1,2)') trailing junk",
    "Action: click(start_box='(1,2)') click(start_box='(1,2)')", "Action: type(content='abc)",
    "Action: click(start_box='(1,2)', start_box='(1,2)')", "Action: hotkey(key='a', key='b', key='c')",
    None, b"Action: wait()",
])
def test_garbage_raises(text):
    with pytest.raises(ParseError):
        parse_response(text, 100, 100)


def test_model_text_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    for call in [f"click(start_box=__import__('os').system('touch {marker}'))",
                 f"click(start_box='(1,2)'), __import__('os').system('touch {marker}')",
                 f"hotkey(key=open('{marker}', 'w').name)"]:
        with pytest.raises(ParseError):
            parse_response(f"Action: {call}", 100, 100)
    assert not marker.exists()


def test_type_content_cannot_escape_into_code():
    # ui-tars 0.1.4 turns this text into code that runs the print; ours stays one write() of the literal text.
    a = one(r"""Action: type(content='a\\\\\' ); print("INJECTED"); #')""")
    assert a.text == "a\\\\' ); print(\"INJECTED\"); #"
    (stmt,) = ast.parse(to_command(a)).body
    assert stmt.value.func.attr == "write" and ast.literal_eval(stmt.value.args[0]) == a.text


def test_bad_coord_mode():
    with pytest.raises(ValueError):
        parse_response("Action: wait()", 10, 10, "pixels")
    with pytest.raises(ValueError):
        UITarsAgent(coord_mode="pixels")


def _images(message):
    content = message["content"]
    return [] if isinstance(content, str) else [c for c in content if isinstance(c, Image)]


@pytest.mark.parametrize("steps, keep", [(0, 5), (2, 5), (4, 5), (9, 5), (3, 1)])
def test_build_messages(steps, keep):
    agent = UITarsAgent(history_images=keep, language="Deutsch")
    # Screenshots older than the window are dropped by the caller.
    history = [(Image(b"png%d" % i) if i >= steps - keep + 1 else None, f"Thought: {i}\nAction: wait()")
               for i in range(steps)]
    messages = agent.build_messages("Open the {weird} file", history, Image(b"current"))
    first, rest = messages[0], messages[1:]
    assert first["role"] == "user" and "Open the {weird} file" in first["content"] and "Deutsch" in first["content"]
    assert "{instruction}" not in first["content"] and "{language}" not in first["content"]

    images = [img for m in messages for img in _images(m)]
    assert len(images) == min(keep, steps + 1)
    assert images[-1] == Image(b"current")
    assert rest[-1]["role"] == "user" and _images(rest[-1])

    expected_roles = []
    for i in range(steps):
        expected_roles += (["user"] if i >= steps - keep + 1 else []) + ["assistant"]
    assert [m["role"] for m in rest[:-1]] == expected_roles
    assert [m["content"] for m in rest if m["role"] == "assistant"] == [r for _, r in history]


def test_custom_template():
    agent = UITarsAgent(prompt_template='{"json": 1} do {instruction}')
    assert agent.build_messages("it", [], Image(b""))[0]["content"] == '{"json": 1} do it'
    assert agent.parse("Action: click(start_box='(966,546)')", 1920, 1080).actions == [Action("click", 960, 540)]


def test_guided_regex_only_admits_parseable_answers():
    samples = ["Thought: go\nAction: click(start_box='(12,34)')",
               "Thought: a b\nAction: drag(start_box='(1,2)', end_box='(3,4)')",
               "Thought: x\nAction: hotkey(key='ctrl shift t')",
               "Thought: x\nAction: type(content='hi there.')",
               "Thought: x\nAction: scroll(start_box='(5,5)', direction='left')",
               "Thought: x\nAction: wait()", "Thought: x\nAction: finished(content='')"]
    for text in samples:
        assert re.fullmatch(GUIDED_REGEX, text), text
        assert parse_response(text, 1920, 1080).actions
    for text in ["Thought: x\nAction: click(start_box=__import__('os'))", "Thought: x\nAction: type(content='')",
                 "Thought: x\nAction: hotkey(key='capslock')", "Thought: x\nAction: click(start_box='(\u0663,1)')"]:
        assert not re.fullmatch(GUIDED_REGEX, text), text


# Answers that used to hang the parser (exponential backtracking) or escape it
# (RecursionError, MemoryError, inf coordinates), and answers the env would refuse.
HOSTILE = {
    "40-number box": "Action: click(start_box='(" + "1   " * 40 + "x)')",
    "5000 minus signs": "Action: click(start_box=" + "-" * 5000 + "1)",
    "5000 parentheses": "Action: click(start_box=" + "(" * 5000 + "'(1,2)'" + ")" * 5000 + ")",
    "nested in a string": "Action: click(start_box='" + "(" * 5000 + "1,2" + ")" * 5000 + "')",
    "1e999": "Action: click(start_box='(1e999,5)')",
    "5000-digit integer": "Action: click(start_box='(" + "9" * 5000 + ",5)')",
    "blank lines then junk": "Action: click(start_box='(1,2)')" + "\n" * 30_000 + "x",
    "quotes that almost close": "Action: type(content='" + "')x" * 20_000,
    "too long": "Action: wait()" + " " * MAX_RESPONSE_CHARS + "x",
    "NUL": "Action: type(content='a\x00b')",
    "lone surrogate": "Action: type(content='a\ud800b')",
    "outside the BMP": "Action: type(content='done \U0001F600')",
    "3000-char type": "Action: type(content='" + "a" * 3000 + "')",
    "capslock": "Action: hotkey(key='capslock')",
    "printscreen": "Action: press(key='printscreen')",
    "too many calls": "Action: " + "click(start_box='(1,2)')\n" * (MAX_CALLS + 1),
    "too many actions": "Action: " + "wait()\n" * (MAX_CALLS + 1),
    "too long dragging": "Action: " + "drag(start_box='(1,2)', end_box='(3,4)')\n" * 21,
    "too many key presses": "Action: " + "hotkey(key='ctrl shift alt a b')\n" * 41,
    "too much code": "Action: " + ("type(content='" + "\u00a0" * 1990 + "')\n") * 2,
    "calls after finished": "Action: finished(content='done')\nclick(start_box='(1,2)')",
    "finished twice": "Action: " + ("finished(content='" + "\u00a0" * 1990 + "')\n") * 2,
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_answers_fail_fast(text):
    t0 = time.perf_counter()
    with pytest.raises(ParseError):
        parse_response(text, 1920, 1080)
    assert time.perf_counter() - t0 < 0.5  # a hang guard, not a benchmark: see scripts/bench_parser.py


def test_answers_at_the_limits_parse():
    assert len(parse_response("Action: " + "click(start_box='(1,2)')\n" * MAX_CALLS, 1920, 1080).actions) == MAX_CALLS
    assert one("Action: type(content='" + "a" * MAX_TEXT_CHARS + "')").text == "a" * MAX_TEXT_CHARS
    assert one("Thought: " + "x" * (MAX_RESPONSE_CHARS - 30) + "\nAction: wait()") == Action("wait")


@pytest.mark.parametrize("key, keys", [
    ("ctrl+c", ("ctrl", "c")), ("Ctrl + Shift + T", ("ctrl", "shift", "t")), ("ctrl c", ("ctrl", "c")),
    ("+", ("+",)), ("ctrl +", ("ctrl", "+")), ("ctrl++", ("ctrl", "+")), ("Return", ("enter",)),
    ("cmd+space", ("win", "space")), ("A", ("A",)),
])
def test_key_combos_become_keys_the_env_knows(key, keys):
    a = one(f"Action: hotkey(key='{key}')")
    assert a.keys == keys
    (command,) = parse_code(to_command(a))
    assert command.keys == keys


def test_finished_content_need_not_be_typeable():
    # finished() text is the agent's answer, never typed: any character may appear in it
    (a,) = parse_response("Action: finished(content='done \U0001F600')", 1920, 1080).actions
    assert a.type == "finished" and a.text == "done \U0001F600"
