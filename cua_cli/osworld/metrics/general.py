"""OSWorld's metrics that are plain functions over text, lists, dicts and files, rewritten for cua.

Each is called as OSWorld calls it, `metric(result, expected, **options)`, or
`metric(result, **options)` when the expected getter gave None, and returns a
number in [0, 1]. Results come from the desktop and are hostile: a file that
is not UTF-8, a command's odd output, a missing file (None). What OSWorld
would crash on there (the agent left no file, a string that is not JSON)
scores 0 here; what is wrong with the task's own rules still raises, and the
evaluator reports it as an EvalError.

Files are read as OSWorld reads them (text, universal newlines), but bytes
that are not UTF-8 are kept apart (surrogateescape) instead of raising.

The other families (spreadsheets, decks, documents, ...) are the package's other modules.
"""

import ast
import csv
import datetime
import difflib
import io
import json
import re
import sqlite3
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from .values import match_value, similarity

MAX_FILE_BYTES = 256 << 20


# -- reading results

def _text(path, latin1: bool = False) -> Optional[str]:
    """A result file's text with universal newlines; None when there is no file. Bytes that are not
    UTF-8 stay as surrogate escapes, or with `latin1` the whole file is read as Latin-1 (how OSWorld's
    compare_csv reads a CSV saved as cp1252 or any other code page)."""
    if not path:
        return None
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8", "strict" if latin1 else "surrogateescape")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _lines(text: str) -> list[str]:
    return text.splitlines()


# -- text and values

def exact_match(result, rules=None) -> float:
    if rules is None:
        return 0.0
    return float(result == rules["expected"])


def literal_match(result, expected=None, **options) -> float:
    kind = options.get("type", "str")
    fold = (lambda s: str(s).lower()) if options.get("ignore_case", False) else str
    if kind == "str":
        return float(fold(result) == fold(expected))
    if kind == "list":
        if not isinstance(result, (list, tuple)) or not isinstance(expected, (list, tuple)) or len(result) != len(expected):
            return 0.0
        return float([fold(s) for s in result] == [fold(s) for s in expected])
    raise ValueError(f"literal_match: type {kind!r} is neither 'str' nor 'list'")


def is_in_list(result, rules=None) -> float:
    if result is None or rules is None:
        return 0.0
    try:
        return float(rules["expected"] in result)
    except TypeError:  # a result that cannot contain it (a number, say)
        return 0.0


def check_include_exclude(result, rules=None) -> float:
    if result is None or rules is None:
        return 0.0
    result = str(result)
    include, exclude = rules.get("include", []), rules.get("exclude", [])
    return float(all(r in result for r in include) and all(r not in result for r in exclude))


def fuzzy_match(result, rules=None) -> float:
    if result is None or rules is None:
        return 0.0
    return similarity(str(result), str(rules["expected"]))


def check_direct_json_object(result, rules=None) -> float:
    """The keys of `rules["expected"]` have those values in `result` (a dict, or JSON text written
    with single quotes); with `expect_in_result`, a string is contained and a list has a member."""
    if rules is None or result is None:
        return 0.0
    if isinstance(result, str):
        try:
            result = json.loads(result.strip().replace("'", '"'))
        except (ValueError, RecursionError):  # OSWorld raises here; what the agent left is not JSON: 0
            return 0.0
    if not isinstance(result, dict):
        return 0.0
    expected = rules["expected"]
    if not rules.get("expect_in_result", False):
        return float(all(result.get(k) == v for k, v in expected.items()))
    for key, want in expected.items():
        got = result.get(key)
        if isinstance(want, list):
            if not (isinstance(got, list) and any(w in got for w in want)):
                return 0.0
        elif isinstance(want, str):
            if not isinstance(got, (str, list)) or want not in got:
                return 0.0
        else:
            return 0.0
    return 1.0


# -- files

def compare_text_file(actual, expected=None, **options) -> float:
    a, e = _text(actual), _text(expected)
    if a is None or e is None:
        return 0.0
    if options.get("ignore_blanks", False):
        a, e = (re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", t).strip()) for t in (a, e))
    if options.get("ignore_case", False):
        a, e = a.lower(), e.lower()
    return float(a == e)


def diff_text_file(result, expected=None) -> float:
    a, e = _text(result), _text(expected)
    if a is None or e is None:
        return 0.0
    return difflib.SequenceMatcher(a=_lines(a), b=_lines(e)).ratio()


def compare_config(actual, rules=None, **options) -> float:
    text = _text(actual)
    return 0.0 if text is None or rules is None else float(text == rules["expected"])


def compare_answer(actual, rules=None, **options) -> float:
    return 0.0 if not actual or rules is None else float(actual == rules["expected"])


def compare_python_pure_text(py_file, gold_file=None) -> float:
    a, e = _text(py_file), _text(gold_file)
    if a is None or e is None:
        return 0.0
    return float("".join(a.split()) == "".join(e.split()))


def compare_terminal_and_txt(txt_file, terminal_output=None) -> float:
    text = _text(txt_file)
    if not text or not terminal_output:
        return 0.0
    return float(terminal_output == text)


def file_contains(path, config=None) -> float:
    text = _text(path)
    if text is None or config is None:
        return 0.0
    return float(all(t in text for t in config["expected"]))


def check_list(result, rules=None) -> float:
    """Every `expect` regex matches some line, and no `unexpect` regex matches any."""
    text = _text(result)
    if text is None or rules is None:
        return 0.0
    expect = [re.compile(p) for p in rules.get("expect", [])]
    unexpect = [re.compile(p) for p in rules.get("unexpect", [])]
    lines = text.split("\n")
    return float(all(any(p.search(line) for line in lines) for p in expect)
                 and not any(p.search(line) for p in unexpect for line in lines))


def check_line_number(path, line_number=None) -> float:
    """As many lines hold an hh:mm:ss time as `line_number["expected"]` says."""
    text = _text(path)
    if text is None or line_number is None:
        return 0.0
    clock = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")
    return float(sum(1 for line in text.split("\n") if clock.search(line)) == int(line_number["expected"]))


def compare_csv(result, expected=None, **options) -> float:
    """The files' lines equal those of the expected file (of any of them, given a list); `strict:
    false` strips each line, `ignore_case` folds case. Each file is UTF-8, or else Latin-1."""
    text = _text(result, latin1=True)
    if text is None:
        return 0.0
    golds = expected if isinstance(expected, list) else [expected]
    if not any(golds):
        raise ValueError("compare_csv: the task gives no expected file")

    def lines(text: str) -> list[str]:
        out = _lines(text)
        if not options.get("strict", True):
            out = [x.strip() for x in out]
        return [x.lower() for x in out] if options.get("ignore_case", False) else out
    return float(any(gold is not None and lines(text) == lines(gold)
                     for gold in (_text(path, latin1=True) for path in golds if path)))


def check_csv(result, rules=None) -> float:
    """Every `expect` record matches some row (all its keys equal), and no `unexpect` one matches any."""
    text = _text(result)
    if text is None or rules is None:
        return 0.0
    rows = list(csv.DictReader(io.StringIO(text)))

    def matches(pattern: dict, row: dict) -> bool:
        return all(k in row and row[k] == v for k, v in pattern.items())
    return float(all(any(matches(p, r) for r in rows) for p in rules.get("expect", []))
                 and not any(matches(p, r) for p in rules.get("unexpect", []) for r in rows))


def check_json(result, rules=None, is_yaml: bool = False) -> float:
    text = _text(result)
    if text is None or rules is None:
        return 0.0
    try:
        data = yaml.safe_load(text) if is_yaml else json.loads(text)
    except (ValueError, RecursionError, yaml.YAMLError):  # OSWorld raises; the agent's file is not JSON: 0
        return 0.0

    def lookup(keys):
        value = data
        for k in keys:
            try:
                value = value[k]
            except (KeyError, IndexError, TypeError):
                return None, False
        return value, True
    for r in rules.get("expect", []):
        value, found = lookup(r["key"])
        if not found or not match_value(value, r):
            return 0.0
    for r in rules.get("unexpect", []):
        value, _ = lookup(r["key"])
        if match_value(value, r):
            return 0.0
    return 1.0


def check_json_settings(actual, expected=None, **options) -> float:
    """The settings file holds every key/value of `expected["expected"]`."""
    text = _text(actual)
    if text is None or expected is None:
        return 0.0
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return 0.0
    return float(isinstance(data, dict) and all(k in data and data[k] == v for k, v in expected["expected"].items()))


def check_json_keybindings(actual, expected=None, **options) -> float:
    """The keybindings list (a JSON list, maybe after one comment line) holds `expected["expected"]`."""
    text = _text(actual)
    if text is None or expected is None:
        return 0.0
    for candidate in (text, text.split("\n", 1)[1] if "\n" in text else ""):
        try:
            data = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(data, list):
            return float(expected["expected"] in data)
    return 0.0


def is_extension_installed(actual, rules=None, **options) -> float:
    if actual is None or rules is None:
        return 0.0
    if rules["type"] == "contain":
        return float(rules["expected"] in actual)
    if rules["type"] == "not_contain":
        return float(rules["expected"] not in actual)
    raise ValueError(f"is_extension_installed: type {rules['type']!r} is neither 'contain' nor 'not_contain'")


def is_included_all_json_objects(gold_file, result_file=None) -> float:
    gold, got = _text(gold_file), _text(result_file)
    if gold is None or got is None:
        return 0.0
    try:
        gold_obj, got_obj = json.loads(gold), json.loads(got)
    except (ValueError, RecursionError):
        return 0.0
    return float(isinstance(got_obj, dict) and all(k in got_obj and got_obj[k] == v for k, v in gold_obj.items()))


def run_sqlite3(result, rules=None) -> float:
    """The first column of the first row of the task's query over the result database (read-only)."""
    if not result or rules is None:
        return 0.0
    connection = sqlite3.connect(Path(result).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        row = connection.execute(rules["sql"]).fetchone()
    except sqlite3.DatabaseError as e:
        if type(e) is not sqlite3.DatabaseError:  # the task's query is wrong (or writes): raise
            raise
        return 0.0  # "file is not a database": what the agent left is no database
    finally:
        connection.close()
    return float((row[0] if row else 0) or 0)


def compare_time_in_speedtest_results(result, time_diff=None) -> float:
    """The second line's second CSV field ends in HH:MM within `time_diff` minutes of now."""
    text = _text(result)
    if not text or time_diff is None:
        return 0.0
    lines = text.split("\n")
    try:
        stamp = lines[1].split(",")[1][-5:]
        then = datetime.datetime.strptime(stamp, "%H:%M")
    except (IndexError, ValueError):
        return 0.0
    now = datetime.datetime.strptime(datetime.datetime.now().strftime("%H:%M"), "%H:%M")
    return float(abs((then - now).total_seconds()) / 60 < int(time_diff))


# -- OSWorld's os domain

def check_gnome_favorite_apps(apps_text, rule=None) -> float:
    """gsettings' list text (`['a.desktop', 'b.desktop']`) holds exactly the expected apps."""
    if apps_text is None or rule is None:
        return 0.0
    try:
        apps = ast.literal_eval(str(apps_text).strip())  # OSWorld eval()s it; a literal is all it may be
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return 0.0
    if not isinstance(apps, (list, tuple)):
        return 0.0
    expected = rule["expected"]
    return float(len(apps) == len(expected) and set(map(str, apps)) == set(expected))


def is_utc_0(timedatectl_output, *_) -> float:
    """timedatectl's fourth line (`Time zone: ...`) ends in `+0000)`."""
    if not timedatectl_output:
        return 0.0
    lines = str(timedatectl_output).split("\n")
    return float(len(lines) > 3 and lines[3].endswith("+0000)"))


def check_text_enlarged(scaling_factor_text, *_) -> float:
    try:
        return float(float(scaling_factor_text) > 1.0)
    except (TypeError, ValueError):
        return 0.0


def check_moved_jpgs(directory_tree, rule=None) -> float:
    """The folder holds exactly the expected names."""
    if not isinstance(directory_tree, dict) or rule is None:
        return 0.0
    names = [node.get("name") for node in directory_tree.get("children", []) if isinstance(node, dict)]
    expected = rule["expected"]
    return float(len(names) == len(expected) and set(names) == set(expected))


def is_in_vm_clickboard(config, terminal_output=None) -> float:
    if config is None or terminal_output is None:
        return 0.0
    expected = config["expected"]
    wanted = expected if isinstance(expected, list) else [expected]
    return float(all(str(w) in terminal_output for w in wanted))


def is_vlc_fullscreen(window_size, screen_size=None) -> float:
    if not isinstance(window_size, dict) or not isinstance(screen_size, dict):
        return 0.0
    return float(window_size.get("width") == screen_size.get("width")
                 and window_size.get("height") == screen_size.get("height"))


METRICS: dict[str, Callable[..., Any]] = {f.__name__: f for f in (
    exact_match, literal_match, is_in_list, check_include_exclude, fuzzy_match, check_direct_json_object,
    compare_text_file, diff_text_file, compare_config, compare_answer, compare_python_pure_text,
    compare_terminal_and_txt, file_contains, check_list, check_line_number, compare_csv, check_csv, check_json,
    check_json_settings, check_json_keybindings, is_extension_installed, is_included_all_json_objects,
    run_sqlite3, compare_time_in_speedtest_results, check_gnome_favorite_apps, is_utc_0, check_text_enlarged,
    check_moved_jpgs, is_in_vm_clickboard, is_vlc_fullscreen)}
EXTRA = None  # the standard library and PyYAML only
