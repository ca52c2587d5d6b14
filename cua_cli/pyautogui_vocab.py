"""The pyautogui subset both sides of the env-cluster protocol agree on.

`actions.to_command` only generates code inside these bounds, and the
built-in env server (`envserver/pyautogui_subset.py`) refuses anything
outside them with HTTP 400. Keeping the vocabulary and the limits in one
place is what makes "cua never sends code its own env server refuses" true.
"""

import unicodedata

# Canonical key names (pyautogui spelling); any single character is a key too.
KEY_NAMES = frozenset(
    "enter tab backspace delete escape space up down left right home end pageup "
    "pagedown insert shift ctrl alt win".split()
    + [f"f{i}" for i in range(1, 13)]
)
# Other spellings models and programs use, lower-case, mapped onto KEY_NAMES.
KEY_ALIASES = {
    "return": "enter", "\n": "enter", "\r": "enter", "\t": "tab", "esc": "escape",
    "del": "delete", "pgup": "pageup", "pgdn": "pagedown", "page_up": "pageup",
    "page_down": "pagedown", "control": "ctrl", "ctrlleft": "ctrl", "ctrlright": "ctrl",
    "shiftleft": "shift", "shiftright": "shift", "altleft": "alt", "altright": "alt",
    "option": "alt", "optionleft": "alt", "optionright": "alt", "command": "win",
    "cmd": "win", "winleft": "win", "winright": "win", "meta": "win", "super": "win",
    "arrowleft": "left", "arrowright": "right", "arrowup": "up", "arrowdown": "down",
    "spacebar": "space", "ins": "insert",
}

MAX_CODE_CHARS = 10_000     # one program
MAX_STATEMENTS = 100        # statements in one program
MAX_CALLS = 50              # GUI calls (commands) in one program
MAX_TEXT_CHARS = 2_000      # characters one write() may type
MAX_KEY_PRESSES = 200       # key presses in one program, repetitions included
MAX_SCROLL = 100            # wheel clicks of one scroll() or hscroll()
MAX_SLEEP = 5.0             # one sleep, and one move or drag duration, seconds
MAX_TOTAL_SLEEP = 10.0      # all sleeps and durations of one program, seconds
MAX_COORD = 100_000         # |x| and |y| in pixels; beyond it a point is nonsense


def canonical_key(key: str) -> str | None:
    """The canonical name of `key`, or None when the subset has no such key.

    A typeable single character is itself (case kept: 'A' types a capital);
    longer names are case-insensitive, as in pyautogui.
    """
    if not isinstance(key, str) or not key:
        return None
    if key in KEY_ALIASES:
        return KEY_ALIASES[key]
    if len(key) == 1:
        return key if untypeable(key) is None else None
    name = key.lower()
    name = KEY_ALIASES.get(name, name)
    return name if name in KEY_NAMES else None


def untypeable(text: str) -> str | None:
    """The first character of `text` a keyboard cannot type, or None.

    Newline and tab are keys; other control characters, lone surrogates,
    unassigned code points, private-use ones (WebDriver reads U+E000 and up
    as special keys: U+E007 is Enter) and characters outside the Basic
    Multilingual Plane (ChromeDriver types only those) are not.
    """
    for ch in text:
        if ch in "\n\t":
            continue
        if ord(ch) > 0xFFFF or unicodedata.category(ch) in ("Cc", "Cs", "Cn", "Co"):
            return ch
    return None
