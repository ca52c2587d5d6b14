"""A person's key and button events, as a desktop's X server saw them (guest/input_log.py), turned
into the actions an agent takes (actions.Action), one gesture each:

- a button 1 press and release within DRAG_PX is a click, two of them close in time and place a
  double click; farther apart, a drag; button 3 is a right click;
- wheel notches (buttons 4-7) in one direction, one after another, are one scroll;
- characters typed one after another are one `type`, and Enter right after them its final newline
  (UI-TARS' way of submitting); Backspace takes back a character typed in the same gesture;
- a key pressed while Ctrl, Alt or Super is held (Shift too, for a key that types nothing) is a
  hotkey of the keys in the order pressed, as is a key that types nothing, alone (Enter, Tab, F5);
  Super or Alt tapped alone (GNOME's overview) is a hotkey of that key.

Each gesture keeps the time of its first event and the frame (the screen) shown then, so the
screenshot of its step is the one the person saw before acting. A click made with a modifier held
keeps it in `held` (neither action space can say it). Middle clicks and Shift tapped alone say
nothing either action space can replay, and are left out.
"""

import math
from dataclasses import dataclass, field

from ..actions import Action
from ..pyautogui_vocab import MAX_TEXT_CHARS, untypeable

DRAG_PX = 5          # a press and release farther apart than this (either axis) is a drag
DOUBLE_S = 0.5       # GTK's default double-click time, in seconds
SCROLL_GAP_S = 1.0   # notches further apart than this are two scrolls
WHEEL = {4: "up", 5: "down", 6: "left", 7: "right"}
MODIFIERS = {"Control_L": "ctrl", "Control_R": "ctrl", "Alt_L": "alt", "Alt_R": "alt", "Meta_L": "alt",
             "Meta_R": "alt", "Super_L": "win", "Super_R": "win", "Shift_L": "shift", "Shift_R": "shift"}
TAPPABLE = {"alt", "win"}  # modifiers that do something tapped alone
# X keysym names -> pyautogui_vocab's names, for keys pressed with a modifier or that type nothing
KEYS = {"space": "space", "Return": "enter", "KP_Enter": "enter", "Linefeed": "enter", "Tab": "tab",
        "ISO_Left_Tab": "tab", "BackSpace": "backspace", "Delete": "delete", "KP_Delete": "delete",
        "Escape": "escape", "Up": "up", "Down": "down", "Left": "left", "Right": "right", "Home": "home",
        "End": "end", "Prior": "pageup", "Page_Up": "pageup", "Next": "pagedown", "Page_Down": "pagedown",
        "Insert": "insert", **{f"F{i}": f"f{i}" for i in range(1, 13)}}


@dataclass
class Event:
    """One input event: `kind` "key" or "button", pressed (`down`) or released, where the pointer was.
    A key's `names` and `chars` are its keysym names and characters without and with Shift."""
    t: float
    kind: str
    down: bool
    code: int
    x: int
    y: int
    frame: int
    names: tuple = (None, None)
    chars: tuple = (None, None)

    @classmethod
    def from_dict(cls, d: dict) -> "Event":
        """An event as the desktop sent it; ValueError for one that is not."""
        try:
            ev = cls(float(d["t"]), str(d["kind"]), bool(d["down"]), int(d["code"]), int(d["x"]), int(d["y"]),
                     int(d["frame"]), tuple(d.get("names") or (None, None)), tuple(d.get("chars") or (None, None)))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise ValueError(f"an input event the desktop sent is malformed: {e}") from None
        if ev.kind not in ("key", "button") or len(ev.names) != 2 or len(ev.chars) != 2 \
                or not all(v is None or type(v) is str for v in ev.names + ev.chars):
            raise ValueError("an input event the desktop sent is malformed")
        return ev


@dataclass
class Gesture:
    action: Action
    t: float         # its first event
    end: float       # its last event
    frame: int       # the screen shown at its first event
    held: tuple = ()  # modifiers held through a click


@dataclass
class _Text:
    chars: list = field(default_factory=list)
    t: float = 0.0
    end: float = 0.0
    frame: int = 0


class Gestures:
    """Feed events in order (`add`); finished gestures come out of `take`, in order. Some wait for
    what comes next (a click might become a double click, a scroll or typing might go on): `flush`
    ends every gesture in progress (the person said they are done), `expire(now)` those that can
    no longer go on."""

    def __init__(self):
        self.out: list[Gesture] = []
        self.held: dict[int, tuple[str, Event]] = {}  # keycode -> (modifier, its press), in press order
        self.tapped: set[int] = set()    # modifiers pressed with nothing else since
        self.text: _Text | None = None
        self.press: Event | None = None  # button 1 or 3 down
        self.press_held: tuple = ()
        self.click: Gesture | None = None  # the last click, while it may become a double click
        self.scroll: Gesture | None = None
        self.scroll_n = 0

    def frames(self) -> set[int]:
        """The frames gestures begun or finished and not yet taken began on: their steps' screenshots."""
        begun = [self.text, self.press, self.click, self.scroll, *(ev for _, ev in self.held.values())]
        return {g.frame for g in begun if g is not None} | {g.frame for g in self.out}

    def take(self, everything: bool = False) -> list[Gesture]:
        """Finished gestures in the order they began. One that began after a gesture still going on (a
        button held, a click that may become a double one, typing or a scroll that may go on) waits for
        it: a key pressed while a button is held ends first, but its step comes after the click's.
        `everything`: the demonstration is over, nothing waits."""
        going = [g.t for g in (self.text, self.press, self.click, self.scroll) if g is not None]
        until = math.inf if everything else min(going, default=math.inf)
        self.out.sort(key=lambda g: g.t)  # stable: gestures begun at once keep the order they ended in
        ready = [g for g in self.out if g.t < until]
        self.out = self.out[len(ready):]
        return ready

    def add(self, ev: Event) -> None:
        if ev.kind == "key":
            self._key(ev)
        else:
            self._button(ev)

    def expire(self, now: float) -> None:
        if self.click is not None and now - self.click.end > DOUBLE_S:
            self._emit_click()
        if self.scroll is not None and now - self.scroll.end > SCROLL_GAP_S:
            self._end_scroll()

    def flush(self) -> None:
        self._end_text()
        self._emit_click()
        self._end_scroll()

    # -- keys ---------------------------------------------------------------------------------------
    def _key(self, ev: Event) -> None:
        name = ev.names[0]
        mod = MODIFIERS.get(name)
        if not ev.down:
            if mod is not None and ev.code in self.held:
                _, pressed = self.held.pop(ev.code)
                if ev.code in self.tapped and mod in TAPPABLE:
                    self.flush()
                    self._emit(Action("hotkey", keys=(mod,)), pressed, ev)
                self.tapped.discard(ev.code)
            return
        if mod is not None:
            if ev.code not in self.held:
                self.held[ev.code] = (mod, ev)
                self.tapped = {ev.code}  # a tap is a press and release with nothing between
            return
        self.tapped.clear()
        mods = self._mods()
        shift = "shift" in mods
        char = ev.chars[1 if shift else 0]
        commanding = any(m != "shift" for m in mods)
        if not commanding and _typeable(char):
            self._type(ev, char)
            return
        key = KEYS.get(name)
        if key is None and char is not None and len(char) == 1 and _typeable(char.lower()):
            key = char.lower() if char.isascii() else char  # ctrl+c, ctrl+shift+t: the key, not what it types
        if key is None:
            key = ev.names[0] if ev.names[0] and len(ev.names[0]) == 1 else None
        if key is None:
            return  # a key neither action space names (a media key): nothing to replay
        if key == "backspace" and not mods and self.text is not None and self.text.chars:
            self.text.chars.pop()
            self.text.end = ev.t
            return
        if key == "enter" and not mods and self.text is not None and self.text.chars:
            self.text.chars.append("\n")
            self.text.end = ev.t
            self._end_text()
            return
        self.flush()
        keys = (*mods, key)
        try:
            action = Action("hotkey", keys=keys)
        except ValueError:
            return
        self._emit(action, ev, ev)

    def _type(self, ev: Event, char: str) -> None:
        self._emit_click()
        self._end_scroll()
        if self.text is None:
            self.text = _Text([], ev.t, ev.t, ev.frame)
        elif len(self.text.chars) >= MAX_TEXT_CHARS:
            self._end_text()
            self.text = _Text([], ev.t, ev.t, ev.frame)
        self.text.chars.append(char)
        self.text.end = ev.t

    def _end_text(self) -> None:
        text, self.text = self.text, None
        if text is not None and text.chars:
            self.out.append(Gesture(Action("type", text="".join(text.chars)), text.t, text.end, text.frame))

    # -- the pointer ----------------------------------------------------------------------------------
    def _button(self, ev: Event) -> None:
        self.tapped.clear()
        if ev.code in WHEEL:
            if ev.down:
                self._wheel(ev)
            return
        if ev.code not in (1, 3):
            return  # the middle button: neither action space has it
        if ev.down:
            if self.press is None:
                self._end_text()
                self._end_scroll()
                if self.click is not None and not self._doubles(ev):
                    self._emit_click()
                self.press, self.press_held = ev, tuple(self._mods())
            return
        press, self.press = self.press, None
        if press is None or press.code != ev.code:
            return  # a release whose press came before the recording
        held = self.press_held
        if press.code == 1 and max(abs(ev.x - press.x), abs(ev.y - press.y)) > DRAG_PX:
            self._emit_click()
            self.out.append(Gesture(Action("drag", x=press.x, y=press.y, x2=ev.x, y2=ev.y), press.t, ev.t,
                                    press.frame, held))
        elif press.code == 3:
            self._emit_click()
            self.out.append(Gesture(Action("right_single", x=press.x, y=press.y), press.t, ev.t, press.frame, held))
        elif self.click is not None and self._doubles(press):
            first, self.click = self.click, None
            self.out.append(Gesture(Action("left_double", x=first.action.x, y=first.action.y), first.t, ev.t,
                                    first.frame, first.held))
        else:
            self._emit_click()
            self.click = Gesture(Action("click", x=press.x, y=press.y), press.t, ev.t, press.frame, held)

    def _doubles(self, press: Event) -> bool:
        """Whether button 1 pressed now makes the last click a double click."""
        c = self.click
        return (c is not None and press.code == 1 and press.t - c.end <= DOUBLE_S
                and max(abs(press.x - c.action.x), abs(press.y - c.action.y)) <= DRAG_PX)

    def _emit_click(self) -> None:
        click, self.click = self.click, None
        if click is not None:
            self.out.append(click)

    def _wheel(self, ev: Event) -> None:
        direction = WHEEL[ev.code]
        s = self.scroll
        if s is not None and s.action.direction == direction and ev.t - s.end <= SCROLL_GAP_S:
            self.scroll_n += 1
            s.end = ev.t
            return
        self.flush()
        self.scroll, self.scroll_n = Gesture(Action("scroll", x=ev.x, y=ev.y, direction=direction), ev.t, ev.t,
                                             ev.frame), 1

    def _end_scroll(self) -> None:
        s, self.scroll = self.scroll, None
        if s is not None:
            self.out.append(Gesture(Action("scroll", x=s.action.x, y=s.action.y, direction=s.action.direction,
                                           clicks=self.scroll_n), s.t, s.end, s.frame))

    def _mods(self) -> list[str]:
        return list(dict.fromkeys(mod for mod, _ in self.held.values()))

    def _emit(self, action: Action, first: Event, last: Event) -> None:
        self.out.append(Gesture(action, first.t, last.t, first.frame))


def _typeable(char) -> bool:
    return type(char) is str and len(char) == 1 and char not in "\n\t\r" and untypeable(char) is None
