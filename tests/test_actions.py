import ast
import json

import pytest

from cua_cli.actions import TERMINAL, Action, Cost, to_command
from cua_cli.envserver.pyautogui_subset import parse_code
from cua_cli.pyautogui_vocab import MAX_COORD, MAX_KEY_PRESSES, MAX_TEXT_CHARS

ALLOWED = {"click", "doubleClick", "rightClick", "moveTo", "dragTo", "write", "hotkey", "press", "scroll", "hscroll"}


def calls(command):
    """(name, args, kwargs) of each pyautogui call, checked the way the env server checks them."""
    out = []
    for stmt in ast.parse(command).body:
        call = stmt.value
        assert isinstance(stmt, ast.Expr) and isinstance(call, ast.Call)
        assert isinstance(call.func, ast.Attribute) and call.func.value.id == "pyautogui"
        assert call.func.attr in ALLOWED
        out.append((call.func.attr, [ast.literal_eval(a) for a in call.args],
                    {k.arg: ast.literal_eval(k.value) for k in call.keywords}))
    return out


@pytest.mark.parametrize("action, expected", [
    (Action("click", 10.4, 20.6), [("click", [10, 21], {"button": "left"})]),
    (Action("left_double", 1, 2), [("doubleClick", [1, 2], {})]),
    (Action("right_single", 1, 2), [("rightClick", [1, 2], {})]),
    (Action("hover", 1, 2), [("moveTo", [1, 2], {})]),
    (Action("drag", 1, 2, 30.7, 40), [("moveTo", [1, 2], {}),
                                      ("dragTo", [31, 40], {"duration": 0.5, "button": "left"})]),
    (Action("hotkey", keys=("ctrl", "c")), [("hotkey", ["ctrl", "c"], {})]),
    (Action("hotkey", keys=("Enter",)), [("press", ["enter"], {})]),
    (Action("hotkey", keys=("space",)), [("press", ["space"], {})]),
    (Action("type", text="hello"), [("write", ["hello"], {})]),
    (Action("type", text="hi\n"), [("write", ["hi"], {}), ("press", ["enter"], {})]),
    (Action("type", text="\n"), [("press", ["enter"], {})]),
    (Action("scroll", 5, 6, direction="up"), [("scroll", [5], {"x": 5, "y": 6})]),
    (Action("scroll", 5, 6, direction="down"), [("scroll", [-5], {"x": 5, "y": 6})]),
    (Action("scroll", direction="left"), [("hscroll", [-5], {})]),
    (Action("scroll", 5, 6, direction="right"), [("hscroll", [5], {"x": 5, "y": 6})]),
])
def test_to_command(action, expected):
    assert calls(to_command(action)) == expected
    parse_code(to_command(action))


def test_special_commands():
    assert to_command(Action("wait")) == "WAIT"
    assert to_command(Action("finished", text="42")) == "DONE"
    assert to_command(Action("call_user")) is None
    assert TERMINAL == {"finished", "call_user"}


@pytest.mark.parametrize("text", ["it's \"quoted\"", "a\\b\\", "line1\nline2", "x'); import os; ('", "\\n literal"])
def test_type_content_round_trips(text):
    for content in (text, text + "\n"):
        (name, args, _), *rest = calls(to_command(Action("type", text=content)))
        assert name == "write" and args == [text]
        assert [c[0] for c in rest] == (["press"] if content.endswith("\n") else [])


def test_key_normalisation():
    assert Action("hotkey", keys=("Ctrl", "ArrowLeft", "arrowup", "ARROWDOWN", "arrowright", "space")).keys == \
        ("ctrl", "left", "up", "down", "right", "space")
    for keys, expected in [(("ctrl+c",), ("ctrl", "c")), (("Ctrl + Shift + T",), ("ctrl", "shift", "t")),
                           (("ctrl c",), ("ctrl", "c")), (("+",), ("+",)), (("ctrl", "+"), ("ctrl", "+")),
                           (("ctrl++",), ("ctrl", "+")), (("+ +",), ("+", "+")), (("A",), ("A",)),
                           (("esc", "Return", "cmd", "pgup"), ("escape", "enter", "win", "pageup")),
                           (["a"] * MAX_KEY_PRESSES, ("a",) * MAX_KEY_PRESSES)]:
        a = Action("hotkey", keys=keys)
        assert a.keys == expected, keys
        assert Action("hotkey", keys=a.keys) == a  # normal forms stay as they are
        (command,) = parse_code(to_command(a))
        assert command.keys == expected


def test_limits_at_the_edge():
    for a in [Action("type", text="a" * MAX_TEXT_CHARS), Action("type", text="\u00a0" * MAX_TEXT_CHARS),
              Action("click", MAX_COORD, -MAX_COORD), Action("drag", 0.4, 0, MAX_COORD, MAX_COORD)]:
        Cost.of(a).check()
        parse_code(to_command(a))
    assert Action("finished", text="x" * MAX_TEXT_CHARS).text
    assert Cost.of(Action("wait")) == Cost()
    code = "pyautogui.write('hi')\npyautogui.press('enter')"
    assert Cost.of(Action("type", text="hi\n")) == Cost(len(code) + 1, calls=2, presses=1)
    with pytest.raises(ValueError, match="calls"):
        sum([Cost.of(Action("drag", 1, 2, 3, 4))] * 26, Cost()).check()


def test_dict_round_trip():
    for a in (Action("drag", 1.5, 2, 3, 4), Action("hotkey", keys=("ctrl", "v")), Action("finished"),
              Action("scroll", direction="down"), Action("type", text="x\n")):
        d = json.loads(json.dumps(a.to_dict()))
        assert None not in d.values() and Action.from_dict(d) == a
    assert Action("wait").to_dict() == {"type": "wait"}


@pytest.mark.parametrize("d", [
    {"type": "explode"}, {}, [], {"type": "click", "x": 1}, {"type": "click", "x": 1, "y": 2, "z": 3},
    {"type": "click", "x": True, "y": 2}, {"type": "click", "x": "1", "y": 2}, {"type": "click", "x": float("nan"), "y": 2},
    {"type": "drag", "x": 1, "y": 2}, {"type": "hotkey", "keys": []}, {"type": "hotkey", "keys": "ctrl"},
    {"type": "hotkey", "keys": [" "]}, {"type": "type", "text": ""}, {"type": "type", "text": 5},
    {"type": "scroll", "direction": "sideways"},
    # what the env server would refuse
    {"type": "hotkey", "keys": ["capslock"]}, {"type": "hotkey", "keys": ["printscreen"]},
    {"type": "hotkey", "keys": ["ctrl+capslock"]}, {"type": "hotkey", "keys": ["a"] * (MAX_KEY_PRESSES + 1)},
    {"type": "hotkey", "keys": ["a " * (MAX_KEY_PRESSES + 1)]}, {"type": "hotkey", "keys": ["\x00"]},
    {"type": "type", "text": "a" * (MAX_TEXT_CHARS + 1)}, {"type": "type", "text": "a\x00"},
    {"type": "type", "text": "\ud800"}, {"type": "type", "text": "\U0001F600"}, {"type": "type", "text": "a\rb"},
    {"type": "type", "text": "\u200b" * MAX_TEXT_CHARS},  # repr makes it 6 x 2000 characters of code
    {"type": "finished", "text": "x" * (MAX_TEXT_CHARS + 1)},
    {"type": "click", "x": MAX_COORD + 1, "y": 2}, {"type": "click", "x": 10 ** 400, "y": 2},
    {"type": "click", "x": float("inf"), "y": 2}, {"type": "drag", "x": 1, "y": 2, "x2": 3, "y2": -1e300},
    # fields the type does not take, and unhashable values
    {"type": "click", "x": 1, "y": 2, "text": "a"}, {"type": "wait", "keys": ["a"]},
    {"type": "hotkey", "keys": ["a"], "x": 1, "y": 1},
    {"type": []}, {"type": "scroll", "direction": []}, {"type": "hotkey", "keys": [["a"]]},
])
def test_from_dict_rejects(d):
    with pytest.raises(ValueError):
        Action.from_dict(d)
