"""OSWorld's Thunderbird metrics over a profile's files (prefs.js, msgFilterRules.dat, mail folders),
rewritten for cua.

The files come from the desktop: one the agent broke (missing, not UTF-8, a preference whose value
is not JSON) scores 0 where OSWorld's metric would crash. A task's rule that is malformed raises.
"""

import json
import operator
import re
from typing import Optional

from .textfiles import text_lines, utf8_text
from .values import match_value


class _Broken(Exception):
    """Where OSWorld's metric would crash on the agent's file: the score is 0."""


# -- prefs.js

_PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)\", (?P<val>.+)\);$')
_ORDER = {"le": operator.le, "lt": operator.lt, "ge": operator.ge, "gt": operator.gt}


def _pref_matches(value, rule: dict) -> bool:
    """OSWorld's value rule (values.match_value), crashing (_Broken) where OSWorld's does on a value
    of another type than the rule's: a regex over a non-text, an order between unlike types."""
    if not isinstance(rule, dict) or not isinstance(rule.get("method"), str) or "ref" not in rule:
        raise ValueError(f"check_thunderbird_prefs: a rule needs 'method' and 'ref': {rule!r}")
    method = rule["method"]
    if (method.startswith("re") or method in ("str_list_eq", "str_set_eq")) and not isinstance(value, str):
        raise _Broken()
    if method in _ORDER:
        try:
            return bool(_ORDER[method](value, rule["ref"]))
        except TypeError:
            raise _Broken() from None
    return match_value(value, rule)


def check_thunderbird_prefs(result, rule=None) -> float:
    """Every `expect` preference is in the file and its value (the last time it is set) matches its
    rule, and no value of an `unexpect` preference matches its rule. A key in both counts as
    expected only."""
    if not isinstance(rule, dict):
        raise ValueError("check_thunderbird_prefs: the rule must be {'expect': ..., 'unexpect': ...}")
    expect, unexpect = rule.get("expect", {}), rule.get("unexpect", {})
    text = utf8_text(result)
    if text is None:
        return 0.0
    found = {key: False for key in expect}
    clean = True
    try:
        for line in text_lines(text):
            match = _PREF.match(line.strip())
            if match is None:
                continue
            key = match.group("key")
            try:
                value = json.loads(match.group("val"))
            except (ValueError, RecursionError):
                raise _Broken() from None
            if key in expect:
                found[key] = _pref_matches(value, expect[key])
            elif key in unexpect:
                clean = clean and not _pref_matches(value, unexpect[key])
    except _Broken:
        return 0.0
    return float(all(found.values()) and clean)


# -- msgFilterRules.dat

# a condition "AND (subject,contains,discount)" (a quoted value may hold ")"), or "ALL"
_CONDITION = re.compile(r'\b(?:AND|OR) \((?:[\w ]+),(?:[\w \']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b')
_FIELDS = (("name=", "name"), ("enabled=", "enabled"), ("type=", "type"), ("action=", "action"),
           ("actionValue=", "actionValue"))


def _unquote(value: str) -> str:
    return value.replace('\\"', '"').replace("\\\\", "\\")


def _filters(text: str) -> list[dict]:
    """The filters as OSWorld reads them: a `name=` line starts one, the other fields fill the latest,
    and each `condition=` line adds it to the list (again for a second one: the same filter, which
    later lines still change). A value is the line without its key, its quote and its last two
    characters (the closing quote and the line end; a last line without one loses a character).
    A field before any name is a crash of OSWorld's."""
    filters: list[dict] = []
    current: Optional[dict] = None
    for line in text_lines(text):
        if line.startswith("name="):
            current = {"name": _unquote(line[6:-2])}
            continue
        if line.startswith("condition="):
            if current is None:
                raise _Broken()
            current["condition"] = _CONDITION.findall(_unquote(line[11:-2]))
            filters.append(current)
            continue
        for prefix, field in _FIELDS[1:]:
            if line.startswith(prefix):
                if current is None:
                    raise _Broken()
                current[field] = _unquote(line[len(prefix) + 1:-2])
                break
    return filters


def _matches(pattern: dict, item: dict) -> bool:
    return all(k in item and item[k] == v for k, v in pattern.items())


def check_thunderbird_filter(result, rules=None) -> float:
    """Each `expect` pattern (field -> value; `condition` a list such as ["ALL"]) matches some filter,
    and no filter matches any `unexpect` pattern."""
    if not isinstance(rules, dict) or not all(isinstance(p, dict) for k in ("expect", "unexpect")
                                              for p in rules.get(k, [])):
        raise ValueError("check_thunderbird_filter: the rules must be {'expect': [{...}], 'unexpect': [{...}]}")
    text = utf8_text(result)
    if text is None:
        return 0.0
    try:
        filters = _filters(text)
    except _Broken:
        return 0.0
    expect, unexpect = rules.get("expect", []), rules.get("unexpect", [])
    return float(all(any(_matches(p, f) for f in filters) for p in expect)
                 and not any(_matches(p, f) for f in filters for p in unexpect))


# -- mail folders

def _folder_digest(text: str, options: dict) -> str:
    """What OSWorld compares of a mail folder file.

    OSWorld quirk: it splits the text at "FROM - " and then keeps only the parts that are blank
    (its test is inverted), so no message's content is ever compared; each kept part becomes
    "FROM - " (the options' status and keys removal and the deleted-message test cannot change a
    blank part). A Thunderbird folder's messages begin "From - ", which the upper-case separator
    never matches, so a real folder has no blank part and reads as "". With `remove_duplicate`
    (the default) the digest is "FROM - " when there is a blank part, else ""."""
    blanks = sum(1 for part in text.strip().split("FROM - ") if not part.strip())
    if options.get("remove_duplicate", True):
        return "FROM - " if blanks else ""
    return "\n".join(["FROM - "] * blanks)


def check_thunderbird_folder(result, reference=None, **options) -> float:
    """1 when each result folder file reads as its reference does (see _folder_digest: as OSWorld,
    that compares almost nothing); a missing result is 0."""
    if reference is None:
        raise ValueError("check_thunderbird_folder needs the reference folder files")
    if not isinstance(reference, list):
        result, reference = [result], [reference]
    elif not isinstance(result, list):
        raise ValueError("check_thunderbird_folder: a list of references needs a list of results")
    for pred, gold in zip(result, reference):
        if pred is None:
            return 0.0
        ours = utf8_text(pred)
        if ours is None:
            return 0.0
        theirs = utf8_text(gold)
        if theirs is None:
            raise ValueError(f"check_thunderbird_folder: the reference {gold!r} is missing or not UTF-8")
        if _folder_digest(ours, options) != _folder_digest(theirs, options):
            return 0.0
    return 1.0


METRICS = {fn.__name__: fn for fn in (check_thunderbird_prefs, check_thunderbird_filter, check_thunderbird_folder)}
EXTRA = None
