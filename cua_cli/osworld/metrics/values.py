"""OSWorld's value rules (`re.FLAGS`, eq/ne/le/lt/ge/gt, `approx:THRESHOLD`, `range.XY`,
`spreadsheet_range`, `str_list_eq`/`str_set_eq`) and its fuzzy string similarity, shared by the
plain metrics and the spreadsheet metric."""

import operator
import re


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyro 2004): one big-integer
    step per character of `b`, so long texts stay fast."""
    if not a or not b:
        return 0
    masks: dict = {}
    for i, c in enumerate(a):
        masks[c] = masks.get(c, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for c in b:
        u = v & masks.get(c, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def similarity(a: str, b: str) -> float:
    """Normalised indel similarity, 2*LCS/(len a + len b): rapidfuzz's fuzz.ratio / 100."""
    if not a and not b:
        return 1.0
    return 2 * lcs_length(a, b) / (len(a) + len(b))


_RE_FLAGS = {name: getattr(re, name) for name in ("A", "ASCII", "I", "IGNORECASE", "L", "LOCALE", "M", "MULTILINE",
                                                  "S", "DOTALL", "X", "VERBOSE", "U", "UNICODE")}
_COMPARE = {"eq": operator.eq, "ne": operator.ne, "le": operator.le, "lt": operator.lt,
            "ge": operator.ge, "gt": operator.gt}


def match_value(value, rule: dict) -> bool:
    """OSWorld's value rule: `re[.FLAG...]` (search), eq/ne/le/lt/ge/gt, or `approx:THRESHOLD`."""
    method = rule["method"]
    if method.startswith("re"):
        flags = 0
        for name in method.split(".")[1:]:
            if name not in _RE_FLAGS:
                raise ValueError(f"unknown regex flag {name!r}")
            flags |= _RE_FLAGS[name]
        return isinstance(value, str) and re.search(rule["ref"], value, flags) is not None
    if method in _COMPARE:
        try:
            return bool(_COMPARE[method](value, rule["ref"]))
        except TypeError:  # the file holds another type than the rule compares with
            return False
    if method.startswith("approx"):
        threshold = float(method.split(":")[1])
        try:
            return abs(float(value) - rule["ref"]) <= threshold
        except (TypeError, ValueError):
            return False
    if method == "spreadsheet_range":  # cell ranges that cover ref[0] and lie within ref[1]
        from openpyxl.worksheet.cell_range import MultiCellRange

        inner, outer = MultiCellRange(rule["ref"][0]), MultiCellRange(rule["ref"][1])
        return all(r in value for r in inner) and all(r in outer for r in value)
    if method.startswith("range.") and len(method) == 8 and set(method[6:]) <= {"t", "e"}:
        # range.XY: ref[0] < (t) or <= (e) the value, and the value < or <= ref[1]
        low, high = rule["ref"]
        return _COMPARE["l" + method[6]](low, value) and _COMPARE["l" + method[7]](value, high)
    if method in ("str_list_eq", "str_set_eq"):  # a comma-separated text, quotes around it dropped
        kind = list if method == "str_list_eq" else set
        return kind(str(value).strip("\"'").split(",")) == kind(rule["ref"])
    raise ValueError(f"unknown method {method!r}")
