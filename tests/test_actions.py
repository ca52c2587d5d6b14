import ast
import json

import pytest

from cua_cli.actions import TERMINAL, Action, to_command

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
])
def test_from_dict_rejects(d):
    with pytest.raises(ValueError):
        Action.from_dict(d)
