"""OSWorld's GIMP metric that reads settings, not pixels, rewritten for cua (the image metrics of
OSWorld's gimp module, check_image_file_size among them, are in images.py).

The files come from the desktop: one the agent broke scores 0 where OSWorld's metric would crash.
"""

from typing import Optional

from .textfiles import text_lines, utf8_text


def _lines(path) -> Optional[list[str]]:
    """The file's lines as OSWorld's readlines gives them; None when OSWorld could not read it."""
    text = utf8_text(path)
    return None if text is None else text_lines(text)


def check_config_status(actual_config_path, rule=None) -> float:
    """1 when a setting line `(key ... value)` of GIMP's file has the rule's `key` first (or, for a
    two-part key, its two parts first) and the rule's `value` last. Lines are read in order, and as
    in OSWorld a line left empty once its parentheses are gone (blank but not bare "\\n", or "()")
    before any match ends the reading with 0: OSWorld crashes there."""
    if not isinstance(rule, dict) or "value" not in rule or not (
            isinstance(rule.get("key"), str) or (isinstance(rule.get("key"), list) and len(rule["key"]) == 2)):
        raise ValueError("check_config_status: the rule needs 'value' and a 'key' of one text or two")
    lines = _lines(actual_config_path)
    if lines is None:
        return 0.0
    key, value = rule["key"], rule["value"]
    for line in lines:
        if line.startswith("#") or line == "\n":
            continue
        items = line.strip().lstrip("(").rstrip(")\n").split()
        if not items:
            return 0.0
        if isinstance(key, str):
            if items[0] == key and items[-1] == value:
                return 1.0
        elif items[0] == key[0]:
            if len(items) < 2:
                return 0.0
            if items[1] == key[1] and items[-1] == value:
                return 1.0
    return 0.0


METRICS = {"check_config_status": check_config_status}
EXTRA = None
