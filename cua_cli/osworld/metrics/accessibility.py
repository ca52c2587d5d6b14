"""OSWorld's check_accessibility_tree (its metrics/general.py), rewritten for cua: elements of the
desktop's accessibility tree, found by XPath or CSS selectors (lxml and cssselect, the `web`
extra), and optionally their text.

`rules` is a list; each rule has `xpath` (which wins) or `selectors` (joined by ", " into one
selector), and may have `text` with `exact` (True: equal; False: fuzzy, rapidfuzz's ratio / 100).
The score is 0 as soon as a rule finds no element, else the product of the rules' text scores (the
best element's for each; 1 for a rule without `text`). Prefixes st:, attr:, cp:, doc:, docattr:,
txt:, val:, act: name the tree's namespaces, as on OSWorld's Ubuntu (`osname` picks Windows' or
macOS's).

A tree that is missing or not XML scores 0 (it comes from the desktop, which the agent may have
filled with text no XML carries); a rule that is not one (no xpath or selectors, `text` without
`exact`, an expression that does not parse) raises.
"""

from typing import Any, Callable

from ..registry import Extra
from .values import lcs_length

_NAMESPACES = ("st", "state"), ("attr", "attributes"), ("cp", "component"), ("doc", "document"), \
    ("docattr", "document/attributes"), ("txt", "text"), ("val", "value"), ("act", "action")
NAMESPACES = {
    "ubuntu": {p: f"https://accessibility.ubuntu.example.org/ns/{path}" for p, path in _NAMESPACES},
    "windows": {**{p: f"https://accessibility.windows.example.org/ns/{path}" for p, path in _NAMESPACES},
                "class": "https://accessibility.windows.example.org/ns/class"},
    "macos": {**{p: f"https://accessibility.macos.example.org/ns/{path}" for p, path in _NAMESPACES
                 if p != "docattr"},
              "role": "https://accessibility.macos.example.org/ns/role"},
}


def check_accessibility_tree(result, rules=None, osname: str = "ubuntu") -> float:
    from lxml.cssselect import CSSSelector

    from ..getters.chrome import parse_tree

    namespaces = NAMESPACES[osname]
    if not isinstance(rules, list):
        raise ValueError("check_accessibility_tree: rules must be a list")
    finders = []
    for rule in rules:
        if "xpath" in rule:
            xpath = rule["xpath"]
            finders.append(lambda root, xpath=xpath: root.xpath(xpath, namespaces=namespaces))
        elif "selectors" in rule:
            finders.append(CSSSelector(", ".join(rule["selectors"]), namespaces=namespaces))
        else:
            raise ValueError("check_accessibility_tree: a rule needs 'xpath' or 'selectors'")
        if "text" in rule and "exact" not in rule:  # OSWorld reads rule["exact"] without a default
            raise ValueError("check_accessibility_tree: a rule with 'text' needs 'exact'")
    root = parse_tree(result)
    if root is None:
        return 0.0
    score = 1.0
    for rule, find in zip(rules, finders):
        elements = find(root)
        if len(elements) == 0:
            return 0.0
        if "text" in rule:
            want = rule["text"]
            if rule["exact"]:
                best = max([0] + [want == (e.text or None) for e in elements])
            else:
                best = max([0] + [_fuzzy(want, e.text or None) for e in elements])
        else:
            best = 1.0
        score *= best
    return float(score)


def _fuzzy(want, text) -> float:
    """rapidfuzz's fuzz.ratio / 100 (0 when either side is None), computed as rapidfuzz computes it
    (one minus the normalised indel distance, in percent) so that the float is the same."""
    if want is None or text is None:
        return 0.0
    want, text = str(want), str(text)
    total = len(want) + len(text)
    if not total:
        return 1.0
    distance = total - 2 * lcs_length(want, text)
    return (1.0 - distance / total) * 100 / 100


METRICS: dict[str, Callable[..., Any]] = {"check_accessibility_tree": check_accessibility_tree}
EXTRA = Extra("web", {"lxml": "lxml", "cssselect": "cssselect"})
