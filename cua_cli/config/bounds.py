"""How far cua trusts input: size limits, and what is wrong with a value.

For config files and for files other processes write (task files under
`--watch`): a file is read only up to a size, strings are clean text of a
bounded length, data is plain JSON of a bounded depth. `show` is how any
value appears in an error message: clipped, with URL passwords masked.
"""

import math
import re
import reprlib
from typing import Optional

from .._util.redact import mask_userinfo
from ..errors import ConfigError

# PyYAML's pure-Python loader (the one whose parsing can be bounded) reads under
# 1 MB/s: these keep the worst input near 0.4 s, still far above any real config.
MAX_FILE_BYTES = 256 << 10  # a config is a few KB
MAX_DEPTH = 20              # the deepest real key is 4 levels (tasks.miniwob.seeds[0])
MAX_NODES = 10_000          # values once aliases are expanded
MAX_TEXT = 4096             # characters in any string (PATH_MAX)
MAX_NAME = 256              # characters in names: run.name, model.name, ...
MAX_INT = 2 ** 63 - 1       # no key needs more; bigger YAML integers are refused while reading
DAY_S = 86_400              # upper bound of every duration and timeout
MAX_RETRIES = 10            # backoff doubles per retry: the 10th already waits ~8 minutes

_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 80


def show(value) -> str:
    """repr() clipped to a few dozen characters: a value can be megabytes long. A URL's password
    is masked first, so that no clip leaves part of it in an error message."""
    if isinstance(value, str):
        value = mask_userinfo(value)
    elif isinstance(value, list):
        value = [mask_userinfo(v) if isinstance(v, str) else v for v in value]
    return _SHOW.repr(value)


_BAD_CHAR = re.compile("[\0\ud800-\udfff]")   # NUL breaks paths, argv and env; surrogates break UTF-8 output


def text_problem(s: str, max_len: int = MAX_TEXT, any_char: bool = False) -> Optional[str]:
    """What is wrong with a string from the input (None if nothing).

    any_char: the string is data that cua encodes wherever it goes (task ids,
    the run name), so only its length is bounded.
    """
    if len(s) > max_len:
        return f"string longer than {max_len} characters"
    if not any_char and _BAD_CHAR.search(s):
        return "string with a NUL or an unpaired surrogate character"
    return None


def data_problem(value, max_depth: int, max_text: int = MAX_TEXT, any_char: bool = False) -> Optional[str]:
    """What keeps `value` from being plain JSON data (None if nothing).

    Finite floats, integers within 64 bits, clean strings, string keys and
    at most `max_depth` levels. Iterative, so deep input cannot exhaust the stack.
    """
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(v, str):
            problem = text_problem(v, max_text, any_char)
            if problem:
                return problem
        elif v is None or isinstance(v, bool):
            continue
        elif isinstance(v, int):
            if not -MAX_INT - 1 <= v <= MAX_INT:
                return "an integer is beyond 64 bits"
        elif isinstance(v, float):
            if not math.isfinite(v):
                return f"{v} is not allowed (numbers must be finite)"
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str) or text_problem(k, max_text, any_char):
                    return f"key {show(k)} is not a clean string"
                stack.append((x, depth + 1))
        else:
            return f"{type(v).__name__} values are not allowed"
    return None


def read_text(path, max_bytes: int, what: str) -> str:
    """A UTF-8 text file of at most `max_bytes`; anything else is a ConfigError naming it."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise ConfigError(f"{path}: cannot read {what}: {getattr(e, 'strerror', None) or e}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{path}: {what} is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{path}: line {line}: {what} is not UTF-8 text") from None


def key_text(path) -> str:
    """('tasks', 'miniwob', 'seeds', 3) -> 'tasks.miniwob.seeds[3]'; mapping keys (None) are skipped."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str):
            out += ("." if out else "") + show(part)[1:-1]
    return (out if len(out) <= 200 else out[:200] + "...") or "top level"
