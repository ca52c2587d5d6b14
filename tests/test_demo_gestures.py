"""A person's X input events into actions (cua_cli/demo/gestures.py), and those actions written in an
agent's answer format that parses back to the same action (`answer_for`): what `cua demo` records."""

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from cua_cli.actions import Action, to_command
from cua_cli.agents.osworld import OSWorldAgent, parse_blocks
from cua_cli.agents.uitars import UITarsAgent, action_text, parse_response
from cua_cli.demo.gestures import DOUBLE_S, Event, Gestures

# Keycodes and keysyms of a US keyboard as Xvfb has it.
SHIFT, CTRL, ALT, SUPER = 50, 37, 64, 133
KEYSYMS = {SHIFT: ("Shift_L", None), CTRL: ("Control_L", None), ALT: ("Alt_L", None), SUPER: ("Super_L", None),
           36: ("Return", None), 22: ("BackSpace", None), 23: ("Tab", None), 9: ("Escape", None),
           65: ("space", " "), 111: ("Up", None), 71: ("F5", None)}
LETTERS = {ch: 24 + i for i, ch in enumerate("qwertyuiop")} | {ch: 38 + i for i, ch in enumerate("asdfghjkl")} \
    | {ch: 52 + i for i, ch in enumerate("zxcvbnm")}
SHIFTED = {"1": ("exclam", "!"), "2": ("at", "@"), "-": ("underscore", "_"), "/": ("question", "?")}
OTHERS = {"1": 10, "2": 11, "-": 20, "/": 61}


class Person:
    """Events as the desktop's input log sends them, with a clock."""

    def __init__(self):
        self.t, self.frame, self.events = 100.0, 0, []

    def _key(self, code: int, down: bool, name0, name1, ch0, ch1):
        self.t += 0.05
        self.events.append(Event(self.t, "key", down, code, 0, 0, self.frame, (name0, name1), (ch0, ch1)))

    def key(self, code: int, down: bool = True):
        name, ch = KEYSYMS[code]
        self._key(code, down, name, name, ch, ch)

    def tap(self, code: int):
        self.key(code)
        self.key(code, False)

    def char(self, ch: str):
        if ch in LETTERS:
            code, names, chars = LETTERS[ch], (ch, ch.upper()), (ch, ch.upper())
        else:
            code, names, chars = OTHERS[ch], (ch, SHIFTED[ch][0]), (ch, SHIFTED[ch][1])
        self._key(code, True, *names, *chars)
        self._key(code, False, *names, *chars)

    def button(self, code: int, x: int, y: int, down: bool, dt: float = 0.05):
        self.t += dt
        self.events.append(Event(self.t, "button", down, code, x, y, self.frame))

    def click(self, x, y, code=1, dt=0.3, to=None):
        self.button(code, x, y, True, dt)
        self.button(code, *(to or (x, y)), False)

    def look(self):  # the screen changed
        self.frame += 1

    def gestures(self) -> list:
        g = Gestures()
        for ev in self.events:
            g.add(ev)
        g.flush()
        return g.take()


def actions(person) -> list[dict]:
    return [g.action.to_dict() for g in person.gestures()]


def test_typing_merges_into_one_type_and_enter_submits_it():
    p = Person()
    p.click(500, 400)
    p.look()
    for ch in "mv todo":
        p.tap(65) if ch == " " else p.char(ch)
    p.key(SHIFT)
    p.char("-")  # shifted: _
    p.key(SHIFT, False)
    p.char("z")
    p.tap(22)  # backspace takes the z back
    p.tap(36)
    p.look()
    p.tap(36)  # enter again, alone: a key of its own
    got = p.gestures()
    assert [g.action.to_dict() for g in got] == [
        {"type": "click", "x": 500, "y": 400}, {"type": "type", "text": "mv todo_\n"},
        {"type": "hotkey", "keys": ["enter"]}]
    assert [g.frame for g in got] == [0, 1, 2]  # each on the screen shown when it began


def test_hotkeys_in_the_order_pressed_and_a_super_tap():
    p = Person()
    p.key(CTRL), p.key(ALT)
    p.char("t")
    p.key(ALT, False), p.key(CTRL, False)
    p.key(CTRL), p.key(SHIFT)
    p.char("c")  # ctrl+shift+c: the key's own name, not the C it types
    p.key(SHIFT, False), p.key(CTRL, False)
    p.tap(SUPER)
    p.tap(SHIFT)  # Shift alone does nothing: left out
    p.key(SHIFT), p.tap(23), p.key(SHIFT, False)
    p.tap(71)
    assert actions(p) == [{"type": "hotkey", "keys": ["ctrl", "alt", "t"]},
                          {"type": "hotkey", "keys": ["ctrl", "shift", "c"]}, {"type": "hotkey", "keys": ["win"]},
                          {"type": "hotkey", "keys": ["shift", "tab"]}, {"type": "hotkey", "keys": ["f5"]}]


def test_clicks_double_clicks_drags_right_clicks_and_scrolls():
    p = Person()
    p.click(10, 10)
    p.click(12, 11, dt=0.1)  # within DOUBLE_S and a few pixels: one double click
    p.click(300, 300, dt=DOUBLE_S + 0.5)
    p.click(302, 300, dt=DOUBLE_S + 0.5)  # too late: two clicks
    p.click(100, 100, to=(400, 250))
    p.click(50, 60, code=3)
    p.click(70, 80, code=2)  # the middle button: neither action space has it
    for _ in range(3):
        p.button(5, 640, 360, True, 0.1), p.button(5, 640, 360, False)
    p.button(4, 640, 360, True, 0.1)
    p.key(CTRL)
    p.click(5, 5)
    p.key(CTRL, False)
    got = p.gestures()
    assert [g.action.to_dict() for g in got] == [
        {"type": "left_double", "x": 10, "y": 10}, {"type": "click", "x": 300, "y": 300},
        {"type": "click", "x": 302, "y": 300}, {"type": "drag", "x": 100, "y": 100, "x2": 400, "y2": 250},
        {"type": "right_single", "x": 50, "y": 60},
        {"type": "scroll", "x": 640, "y": 360, "direction": "down", "clicks": 3},
        {"type": "scroll", "x": 640, "y": 360, "direction": "up", "clicks": 1}, {"type": "click", "x": 5, "y": 5}]
    assert got[-1].held == ("ctrl",)
    assert "pyautogui.scroll(-3, x=640, y=360)" == to_command(got[5].action)


def test_a_click_waits_for_a_second_one_until_the_double_click_time_has_passed():
    g, p = Gestures(), Person()
    p.click(10, 10)
    for ev in p.events:
        g.add(ev)
    g.expire(p.t + DOUBLE_S / 2)
    assert g.take() == [] and g.frames() == {0}  # its screen is kept for it
    g.expire(p.t + DOUBLE_S + 0.01)
    assert [x.action.type for x in g.take()] == ["click"]
    assert g.frames() == set()


EVENTS = st.lists(st.builds(
    Event, t=st.floats(0, 1e4), kind=st.sampled_from(["key", "button"]), down=st.booleans(),
    code=st.integers(0, 300), x=st.integers(-10, 5000), y=st.integers(-10, 5000), frame=st.integers(0, 50),
    names=st.tuples(st.sampled_from([None, "a", "Return", "Shift_L", "Control_L", "Super_L", "BackSpace", "space",
                                     "F13", "XF86AudioPlay", "exclam"]), st.none()),
    chars=st.tuples(st.one_of(st.none(), st.characters()), st.one_of(st.none(), st.characters()))), max_size=60)


def test_a_key_pressed_while_a_button_is_held_comes_after_the_click_even_taken_in_between():
    """The key's gesture ends first; the click began first, and its step comes first. Found by the
    property below."""
    p = Person()
    p.button(1, 10, 20, True)
    p.char("a")
    g = Gestures()
    for ev in p.events:
        g.add(ev)
    assert g.take() == []  # typing may go on, and the click it came after is still held
    p.button(1, 10, 20, False)
    g.add(p.events[-1])
    g.flush()
    assert [x.action.type for x in g.take(everything=True)] == ["click", "type"]


@settings(max_examples=300, deadline=None)
@given(EVENTS)
def test_any_events_make_valid_actions_in_order(events):
    events.sort(key=lambda e: e.t)
    g = Gestures()
    for ev in events:
        g.add(ev)
    g.flush()
    out = g.take()
    assert [x.t for x in out] == sorted(x.t for x in out)
    for x in out:
        assert to_command(x.action) is not None  # each one is code the env server runs
        assert x.frame in {ev.frame for ev in events}


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=10)
FIELDS = st.fixed_dictionaries({}, optional={k: JSON for k in ("t", "kind", "down", "code", "x", "y", "frame", "names",
                                                                "chars")})


@given(st.one_of(JSON, FIELDS, FIELDS.map(lambda d: {"t": 1, "kind": "key", "down": True, "code": 1, "x": 0, "y": 0,
                                                      "frame": 0, **d})))
def test_an_event_the_desktop_sends_is_read_or_refused_as_malformed(raw):
    """The desktop is not trusted: whatever its input log sends, the reader says it is malformed or reads it."""
    try:
        ev = Event.from_dict(raw)
    except ValueError as e:
        assert "malformed" in str(e)
        return
    g = Gestures()
    g.add(ev)
    g.flush()
    g.take()


POINTS = st.tuples(st.integers(0, 1919), st.integers(0, 1079))
ACTIONS = st.one_of(
    st.builds(lambda p, t: Action(t, x=p[0], y=p[1]), POINTS,
              st.sampled_from(["click", "left_double", "right_single"])),
    st.builds(lambda a, b: Action("drag", x=a[0], y=a[1], x2=b[0], y2=b[1]), POINTS, POINTS),
    st.builds(lambda p, d: Action("scroll", x=p[0], y=p[1], direction=d), POINTS,
              st.sampled_from(["up", "down", "left", "right"])),
    # as gestures make them: modifiers held, in the order pressed, then one key
    st.builds(lambda mods, key: Action("hotkey", keys=(*mods, key)),
              st.lists(st.sampled_from(["ctrl", "alt", "shift", "win"]), unique=True, max_size=3),
              st.sampled_from(["enter", "f5", "a", "+", "space", "win", "alt"])),
    st.builds(lambda t: Action("type", text=t), st.text(string.printable + "é€'\"\\", min_size=1, max_size=80)
              .filter(lambda t: t.strip("\r\x0b\x0c") == t and "\r" not in t and "\x0b" not in t and "\x0c" not in t)),
    st.just(Action("finished", text="")), st.just(Action("call_user")), st.just(Action("wait")))


@settings(max_examples=300, deadline=None)
@given(ACTIONS, st.sampled_from(["qwen25vl", "qwen2vl"]))
def test_a_uitars_answer_for_an_action_parses_back_to_it(action, mode):
    text = UITarsAgent(coord_mode=mode).answer_for(action, 1920, 1080)
    (back,) = parse_response(text, 1920, 1080, mode).actions
    tolerance = 1 if mode == "qwen25vl" else 1.5  # a point of the model's grid is up to ~2 pixels wide
    assert back.type == action.type and back.text == action.text and back.keys == action.keys
    assert back.direction == action.direction
    for k in ("x", "y", "x2", "y2"):
        if getattr(action, k) is not None:
            assert abs(getattr(back, k) - getattr(action, k)) <= tolerance, (text, back)
    assert action_text(action, 1920, 1080, mode) in text


@given(ACTIONS)
def test_an_osworld_answer_for_an_action_is_its_pyautogui_code(action):
    text = OSWorldAgent().answer_for(action, 1920, 1080)
    _, blocks = parse_blocks(text)
    want = {"finished": "DONE", "call_user": "FAIL"}.get(action.type) or to_command(action)
    assert blocks == [want]
