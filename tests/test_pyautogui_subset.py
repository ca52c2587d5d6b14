import pytest

from cua_cli.envserver.pyautogui_subset import MAX_NESTING, Command, DisallowedCode, parse_code
from cua_cli.pyautogui_vocab import MAX_CALLS, MAX_COORD, MAX_KEY_PRESSES, MAX_TEXT_CHARS


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
        ("pyautogui.click(-100000, 100000.0)", Command("click", x=-MAX_COORD, y=MAX_COORD)),
        ("pyautogui.write('tab\\tand\\n')", Command("write", text="tab\tand\n")),
    ],
)
def test_allowed_calls(code, expected):
    assert parse_code(code) == [expected]


@pytest.mark.parametrize(
    "code",
    [
        "time.sleep(5)\npyautogui.moveTo(1, 2, duration=2.5)\npyautogui.dragTo(3, 4, duration=2.5)",
        "time.sleep(0.4)\n" * 25,  # adds up to 10.000000000000004 unless summed exactly
        "pyautogui.click(1, 2)\n" * MAX_CALLS,
        f"pyautogui.press('a', presses={MAX_KEY_PRESSES})",
        "pyautogui.typewrite([" + "'a', " * MAX_KEY_PRESSES + "])",
        "pyautogui.hotkey('ctrl', 'a')\npyautogui.press('tab', presses=198)",
        "pyautogui.write('" + "a" * MAX_TEXT_CHARS + "')",
        "import pyautogui\r\npyautogui.click(1, 2)\r\n",
        "pyautogui.click(x=-1.5, y=-2, clicks=3, interval=0.1, button='right', duration=0.1)",
    ],
)
def test_programs_at_the_limits_are_allowed(code):
    commands = parse_code(code)
    # every call of the program is one command, in order (`import pyautogui` is none;
    # typewrite of a list of keys presses them)
    calls = [line.split("(")[0].split(".")[-1] for line in code.replace("\r", "").split("\n")
             if line and not line.startswith("import")]
    assert [c.name for c in commands] == [{"typewrite": "press"}.get(c, c) for c in calls]


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
        ("pyautogui.write(f'{x}')", "f-string f'{x}'"),
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
        ("time.sleep(-1)", "seconds must be a number in [0, 5]"),
        ("time.sleep(60)", "seconds must be a number in [0, 5]"),
        ("pyautogui.click(1, 2", "syntax error: '(' was never closed"),
        ("pyautogui.write('hi)", "syntax error: unterminated string literal (line 1)"),
        ("pyautogui.click(1, 2) $", "syntax error: invalid character '$' (line 1)"),
        ("x" + " x" * 4_000, "code nested too deeply"),
        ("match" + " match" * 1_600, "code nested too deeply"),
        ("pyautogui.click(1, 2)\n" * 101, "statements"),
        ("#" * 10_001, "longer than"),
        # numbers: finite, within ±MAX_COORD, never bool
        ("pyautogui.scroll(1e999)", "number out of range (beyond ±100000): 1e999"),
        ("pyautogui.click(1e999, 5)", "number out of range (beyond ±100000): 1e999"),
        ("pyautogui.click(5, -1e999)", "-1e999"),
        ("pyautogui.scroll(0x" + "f" * 300 + ")", "number out of range (beyond ±100000): 0xfff"),
        ("pyautogui.click(" + "9" * 400 + ", 1)", "number out of range"),
        ("pyautogui.click(1, 2, clicks=1e999)", "1e999"),
        ("pyautogui.moveTo(1, 2, duration=1e999)", "1e999"),
        ("pyautogui.click(100001, 5)", "number out of range (beyond ±100000): 100001"),
        ("x = 0x" + "f" * 5000, "Assign statement: x = 0xfff"),
        ("pyautogui.click(" + "1" * 5000 + ", 1)", "syntax error"),
        ("pyautogui.click(1j, 2)", "unsupported literal 1j"),
        ("pyautogui.write(b'x')", "unsupported literal b'x'"),
        ("pyautogui.click(True, 2)", "coordinates must be numbers, got True, 2"),
        ("pyautogui.click(1, 2, clicks=True)", "clicks must be an integer"),
        ("pyautogui.click(1, 2, clicks=2.5)", "clicks must be an integer"),
        ("pyautogui.click((x := 1), 2)", "non-literal argument x := 1"),
        ("pyautogui.click(*[1, 2])", "non-literal argument *[1, 2]"),
        ("pyautogui.click(1, 2, interval='x')", "interval must be a number"),
        # characters CPython's parser cannot take
        ("pyautogui.click(1, 2)\n\x00", "character U+0000 on line 2"),
        ("pyautogui.write('\ud800')", "character U+D800 on line 1"),
        # nesting CPython's parser cannot take, bounded before it runs
        ("(" * 5_000 + ")" * 5_000, "code nested too deeply on line 1"),
        ("-" * 5_000 + "1", "code nested too deeply"),
        ("pyautogui.click(" + "-" * 1_000 + "1, 2)", "code nested too deeply"),
        ("pyautogui.click(" + "+" * MAX_NESTING + "1, 2)", "code nested too deeply"),
        ("x" + ".y" * 3_000, "code nested too deeply"),
        ("2" + "**2" * 3_000, "code nested too deeply"),
        ("not " * 2_000 + "x", "code nested too deeply"),
        ("if x: 0\n" + "elif x: 0\n" * 900, "code nested too deeply on line 20"),
        ("# comment\r" + "-" * 5_000 + "1", "code nested too deeply on line 2"),
        ("pyautogui.write(f'{" + "-" * 5_000 + "1}')", "f-string"),
        # what one program may ask for
        ("pyautogui.click(1, 2)\n" * (MAX_CALLS + 1), f"more than {MAX_CALLS} calls"),
        ("pyautogui.press('a', presses=100)\n" * 3, f"more than {MAX_KEY_PRESSES} key presses"),
        ("pyautogui.press('a', presses=201)", "presses must be an integer in [1, 200]"),
        ("pyautogui.press(['a', 'b'], presses=101)", "pyautogui.press: more than 200 keys"),
        ("pyautogui.typewrite([" + "'a', " * 201 + "])", "pyautogui.typewrite: more than 200 keys"),
        ("pyautogui.write('" + "a" * 2001 + "')", "pyautogui.write: more than 2000 characters"),
        ("pyautogui.write('bell\\x07')", "untypeable character U+0007"),
        ("pyautogui.write('\\U0001F600')", "untypeable character U+1F600"),
        ("pyautogui.write('\\ud800')", "untypeable character U+D800"),
        ("pyautogui.press('\\x00')", "unknown key '\\x00'"),
        ("pyautogui.hotkey('ctrl', 'nokey')", "pyautogui.hotkey: unknown key 'nokey'"),
        ("time.sleep(5)\ntime.sleep(5)\ntime.sleep(0.01)", "sleeps and durations add up to more than 10 s"),
        ("pyautogui.moveTo(1, 2, duration=5)\npyautogui.dragTo(3, 4, duration=5)\ntime.sleep(1)",
         "more than 10 s"),
        ("pyautogui.dragTo(1, 2, duration=6)", "pyautogui.dragTo: duration must be a number in [0, 5]"),
        ("pyautogui.click(1, 2)\npyautogui.click(1, 2, 3, 4, 5, 6, 7)", "line 2: too many arguments"),
    ],
)
def test_disallowed(code, message):
    with pytest.raises(DisallowedCode) as info:
        parse_code(code)
    assert message in str(info.value)
