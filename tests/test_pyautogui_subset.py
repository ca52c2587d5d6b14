import pytest

from cua_cli.envserver.pyautogui_subset import Command, DisallowedCode, parse_code


@pytest.mark.parametrize(
    "code, expected",
    [
        ("pyautogui.click(10, 20)", Command("click", x=10, y=20)),
        ("pyautogui.click(x=1.5, y=-2, clicks=3, button='right')",
         Command("click", x=1.5, y=-2, clicks=3, button="right")),
        ("pyautogui.click((3, 4))", Command("click", x=3, y=4)),
        ("pyautogui.click()", Command("click")),
        ("pyautogui.doubleClick(5, 6)", Command("click", x=5, y=6, clicks=2)),
        ("pyautogui.rightClick(7, 8)", Command("click", x=7, y=8, button="right")),
        ("pyautogui.moveTo(1, 2, duration=0.5)", Command("moveTo", x=1, y=2, duration=0.5)),
        ("pyautogui.dragTo(1, 2, 0.3, button='left')", Command("dragTo", x=1, y=2, duration=0.3)),
        ("pyautogui.write('hi there', interval=0.1)", Command("write", text="hi there")),
        ("pyautogui.typewrite('abc')", Command("write", text="abc")),
        ("pyautogui.typewrite(['a', 'Enter'])", Command("press", keys=("a", "enter"))),
        ("pyautogui.press('Return')", Command("press", keys=("enter",))),
        ("pyautogui.press(['tab', 'esc'], presses=2)",
         Command("press", keys=("tab", "escape", "tab", "escape"))),
        ("pyautogui.hotkey('ctrl', 'a')", Command("hotkey", keys=("ctrl", "a"))),
        ("pyautogui.scroll(-3, x=5, y=6)", Command("scroll", x=5, y=6, clicks=-3)),
        ("pyautogui.hscroll(2)", Command("hscroll", clicks=2)),
        ("pyautogui.keyDown('shift')", Command("keyDown", keys=("shift",))),
        ("pyautogui.keyUp('ShiftLeft')", Command("keyUp", keys=("shift",))),
        ("time.sleep(0.5)", Command("sleep", duration=0.5)),
        ("time.sleep(60)", Command("sleep", duration=5.0)),  # capped
    ],
)
def test_allowed_calls(code, expected):
    assert parse_code(code) == [expected]


def test_imports_and_sequence():
    code = "import pyautogui\nimport time\n# comment\npyautogui.click(1, 2)\ntime.sleep(0)\n"
    assert [c.name for c in parse_code(code)] == ["click", "sleep"]
    assert parse_code("") == []


@pytest.mark.parametrize(
    "code, message",
    [
        ("import os", "import os"),
        ("import pyautogui, subprocess", "import subprocess"),
        ("import pyautogui as pg", "import pyautogui as pg"),
        ("from os import system", "from os import system"),
        ("__import__('os').system('x')", "attribute __import__('os').system"),
        ("os.system('x')", "attribute os.system"),
        ("open('/etc/passwd')", "call to open"),
        ("eval('1')", "call to eval"),
        ("time.time()", "attribute time.time"),
        ("pyautogui.screenshot()", "unknown function pyautogui.screenshot"),
        ("pyautogui.a.b()", "attribute pyautogui.a.b"),
        ("x = 1", "Assign"),
        ("for i in range(3):\n    pyautogui.click(1, 2)", "For"),
        ("pyautogui.click", "Expr"),
        ("pyautogui.write(f'{x}')", "non-literal argument f'{x}'"),
        ("pyautogui.click(1 + 2, 3)", "non-literal argument 1 + 2"),
        ("pyautogui.click(*pts)", "non-literal argument *pts"),
        ("pyautogui.click(**kw)", "**kwargs"),
        ("pyautogui.press([k for k in 'ab'])", "non-literal argument"),
        ("pyautogui.click(1, 2, foo=3)", "unknown argument 'foo'"),
        ("pyautogui.click(1, 2, x=3)", "given twice"),
        ("pyautogui.click(1)", "both x and y"),
        ("pyautogui.click('a', 'b')", "coordinates must be numbers"),
        ("pyautogui.click(1, 2, button='left2')", "unknown mouse button"),
        ("pyautogui.click(1, 2, clicks=1000)", "clicks"),
        ("pyautogui.press('nokey')", "unknown key 'nokey'"),
        ("pyautogui.hotkey()", "at least one key"),
        ("pyautogui.write(5)", "needs a string"),
        ("time.sleep(-1)", "non-negative"),
        ("pyautogui.click(1, 2", "syntax error"),
        ("pyautogui.click(1, 2)\n" * 101, "statements"),
        ("#" * 10_001, "longer than"),
    ],
)
def test_disallowed(code, message):
    with pytest.raises(DisallowedCode) as info:
        parse_code(code)
    assert message in str(info.value)
