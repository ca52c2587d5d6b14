"""OSWorld's plain metrics (cua_cli/osworld/metrics.py) as units, with hostile inputs where results
come from the desktop (file bytes, command output, JSON-ish text)."""

import datetime
import json
import math
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cua_cli.osworld.getters import general as getters
from cua_cli.osworld.metrics import general as m
from cua_cli.osworld.metrics import values


def in_unit(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and 0 <= x <= 1


def test_exact_match_and_lists():
    assert m.exact_match("uint32 0\n", {"expected": "uint32 0\n"}) == 1
    assert m.exact_match("uint32 300\n", {"expected": "uint32 0\n"}) == 0
    assert m.exact_match("x", None) == 0
    assert m.is_in_list(["a", "b"], {"expected": "b"}) == 1
    assert m.is_in_list(None, {"expected": "b"}) == 0
    assert m.is_in_list(7, {"expected": "b"}) == 0


def test_check_include_exclude():
    rules = {"include": ["spotify"], "exclude": ["not found"]}
    assert m.check_include_exclude("/snap/bin/spotify\n", rules) == 1
    assert m.check_include_exclude("spotify not found", rules) == 0
    assert m.check_include_exclude(None, rules) == 0
    assert m.check_include_exclude("anything", {}) == 1


def test_literal_match():
    assert m.literal_match("A", "a", ignore_case=True) == 1
    assert m.literal_match("A", "a") == 0
    assert m.literal_match(["1", 2], ["1", "2"], type="list") == 1
    assert m.literal_match(["1"], ["1", "2"], type="list") == 0
    with pytest.raises(ValueError):
        m.literal_match("a", "a", type="set")


def lcs_dp(a: str, b: str) -> int:
    row = [0] * (len(b) + 1)
    for ca in a:
        prev = 0
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if ca == cb else max(row[j], row[j - 1])
    return row[-1]


@given(st.text(max_size=60), st.text(max_size=60))
def test_lcs_matches_the_textbook(a, b):
    assert values.lcs_length(a, b) == lcs_dp(a, b)


def test_fuzzy_match_is_rapidfuzz_ratio():
    # fuzz.ratio("this is a test", "this is a test!") == 96.55...
    assert m.fuzzy_match("this is a test", {"expected": "this is a test!"}) == pytest.approx(0.9655, abs=1e-4)
    assert m.fuzzy_match("", {"expected": ""}) == 1
    assert m.fuzzy_match(None, {"expected": "x"}) == 0


def test_long_texts_are_fast():
    a, b = "ab" * 20_000, "ba" * 20_000
    assert 0.99 < values.similarity(a, b) < 1


def test_check_direct_json_object():
    assert m.check_direct_json_object("{'start': 'SEA', 'end': 'NYC'}", {"expected": {"start": "SEA"}}) == 1
    assert m.check_direct_json_object({"start": "SEA"}, {"expected": {"start": "NYC"}}) == 0
    rules = {"expect_in_result": True, "expected": {"city": "York", "tags": ["a", "z"]}}
    assert m.check_direct_json_object({"city": "New York", "tags": ["z"]}, rules) == 1
    assert m.check_direct_json_object({"city": "Boston", "tags": ["z"]}, rules) == 0
    assert m.check_direct_json_object({"city": None, "tags": ["z"]}, rules) == 0


@given(st.text(max_size=200))
def test_check_direct_json_object_on_any_text(text):
    assert m.check_direct_json_object(text, {"expected": {"a": 1}}) in (0.0, 1.0)


@given(st.text(max_size=300))
def test_os_metrics_on_any_command_output(text):
    assert m.check_gnome_favorite_apps(text, {"expected": ["a.desktop"]}) in (0.0, 1.0)
    assert m.is_utc_0(text) in (0.0, 1.0)
    assert m.check_text_enlarged(text) in (0.0, 1.0)
    assert m.check_include_exclude(text, {"include": ["x"], "exclude": ["y"]}) in (0.0, 1.0)


def test_os_metrics():
    assert m.check_gnome_favorite_apps("['thunderbird.desktop', 'vim.desktop']\n",
                                       {"expected": ["vim.desktop", "thunderbird.desktop"]}) == 1
    assert m.check_gnome_favorite_apps("__import__('os').system('true')", {"expected": []}) == 0  # never evaluated
    tz = "Local time: x\nUniversal time: y\nRTC time: z\n      Time zone: Etc/UTC (UTC, +0000)\n"
    assert m.is_utc_0(tz) == 1 and m.is_utc_0(tz.replace("+0000", "+0100")) == 0
    assert m.check_text_enlarged("1.25\n") == 1 and m.check_text_enlarged("1.0") == 0
    tree = {"type": "directory", "name": "d", "children": [{"type": "file", "name": "a.jpg"}]}
    assert m.check_moved_jpgs(tree, {"expected": ["a.jpg"]}) == 1
    assert m.check_moved_jpgs(None, {"expected": ["a.jpg"]}) == 0
    assert m.is_vlc_fullscreen({"width": 1, "height": 2}, {"width": 1, "height": 2}) == 1
    assert m.is_vlc_fullscreen({"width": 1, "height": 2}, None) == 0
    assert m.is_in_vm_clickboard({"expected": ["a", "b"]}, "xa b") == 1


@pytest.fixture
def f(tmp_path):
    def write(name, data):
        p = tmp_path / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        return str(p)
    return write


def test_text_files(f):
    a, b = f("a.txt", "Hello\r\nWorld\n"), f("b.txt", "hello world")
    assert m.compare_text_file(a, f("c.txt", "Hello\nWorld\n")) == 1  # universal newlines, as open() reads
    assert m.compare_text_file(a, b) == 0
    assert m.compare_text_file(a, b, ignore_blanks=True, ignore_case=True) == 1
    assert m.compare_text_file(None, b) == 0
    assert m.diff_text_file(f("d.txt", "1\n2\n3\n4\n"), f("e.txt", "1\n2\n3\n5\n")) == pytest.approx(0.75)
    assert m.compare_python_pure_text(f("p.py", "x = 1\n"), f("g.py", "x=1")) == 1
    assert m.file_contains(a, {"expected": ["World"]}) == 1
    assert m.check_line_number(f("t.log", "12:00:01 a\nno\n23:59:59 b\n"), {"expected": "2"}) == 1
    assert m.compare_config(f("cfg", "k=v"), {"expected": "k=v"}) == 1
    assert m.compare_terminal_and_txt(f("t.txt", "out"), "out") == 1


@given(st.binary(max_size=400))
def test_file_metrics_on_any_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("h") / "result"
    path.write_bytes(data)
    p = str(path)
    for value in (m.compare_text_file(p, p), m.diff_text_file(p, p), m.check_list(p, {"expect": ["a"]}),
                  m.check_csv(p, {"expect": [{"a": "1"}]}), m.check_json(p, {"expect": []}),
                  m.check_json(p, {"expect": []}, is_yaml=True), m.check_json_settings(p, {"expected": {}}),
                  m.check_json_keybindings(p, {"expected": {}}), m.file_contains(p, {"expected": ["x"]}),
                  m.check_line_number(p, {"expected": 0}), m.is_included_all_json_objects(p, p),
                  m.compare_time_in_speedtest_results(p, "60")):
        assert value in (0.0, 1.0) or in_unit(value)
    assert m.compare_text_file(p, p) == 1


def test_check_list_csv_json(f):
    listing = f("ls.out", "COMPANY.msf\nCOMPANY\nother\n")
    assert m.check_list(listing, {"expect": [r"\bCOMPANY\.msf\b", r"^COMPANY$"]}) == 1
    assert m.check_list(listing, {"expect": ["COMPANY"], "unexpect": ["^other$"]}) == 0
    table = f("t.csv", "url,user\nimap://a,me\nimap://b,you\n")
    assert m.check_csv(table, {"expect": [{"url": "imap://a"}], "unexpect": [{"user": "them"}]}) == 1
    assert m.check_csv(table, {"unexpect": [{"user": "you"}]}) == 0
    settings = f("s.json", json.dumps({"editor": {"fontSize": 14, "theme": "Dark+"}}))
    rules = {"expect": [{"key": ["editor", "fontSize"], "method": "approx:0.5", "ref": 14.2},
                        {"key": ["editor", "theme"], "method": "re.I", "ref": "dark"}],
             "unexpect": [{"key": ["editor", "missing"], "method": "eq", "ref": 1}]}
    assert m.check_json(settings, rules) == 1
    assert m.check_json(settings, {"expect": [{"key": ["nope"], "method": "eq", "ref": 1}]}) == 0
    with pytest.raises(ValueError):  # the task's own rule is wrong: the evaluator reports it
        m.check_json(settings, {"expect": [{"key": ["editor"], "method": "re.NOSUCHFLAG", "ref": "x"}]})
    assert m.check_json_settings(settings, {"expected": {"editor": {"fontSize": 14, "theme": "Dark+"}}}) == 1
    assert m.check_json_keybindings(f("k.json", '// keys\n[{"key": "ctrl+j"}]'), {"expected": {"key": "ctrl+j"}}) == 1


def test_run_sqlite3_reads_only(tmp_path):
    db = tmp_path / "h.db"
    with sqlite3.connect(db) as c:
        c.execute("create table t(x)")
        c.execute("insert into t values (1)")
    assert m.run_sqlite3(str(db), {"sql": "select count(*) from t"}) == 1
    with pytest.raises(sqlite3.OperationalError):
        m.run_sqlite3(str(db), {"sql": "insert into t values (2)"})
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    assert m.run_sqlite3(str(tmp_path / "junk.db"), {"sql": "select count(*) from t"}) == 0


def test_relative_time():
    monday = datetime.datetime(2024, 8, 5, 10, 0)  # a Monday in August
    assert getters.relative_day("next Monday", monday).date() == datetime.date(2024, 8, 12)
    assert getters.relative_day("this Saturday", monday).date() == datetime.date(2024, 8, 10)
    assert getters.relative_day("5th next month", datetime.datetime(2024, 12, 20)).date() == datetime.date(2025, 1, 5)
    assert getters.relative_day("next Friday", monday, start="next Monday").date() == datetime.date(2024, 8, 16)
    # OSWorld's own arithmetic fails for August (month 0); the first Monday of December is meant
    assert getters.relative_day("first monday four months later", monday).date() == datetime.date(2024, 12, 2)
    assert getters.time_format("{DoW}, {Month} {DayD}, {Year} {Month0D}/{Day0D} {month} {MonthFull}",
                               monday) == "Mon, Aug 5, 2024 08/05 august August"
    rules = {"relativeTime": {"from": "tomorrow"}, "expected": {"time": "{Year}-{Month0D}-{Day0D}", "a": 1}}
    out = getters.get_rule_relativeTime(None, {"type": "rule_relativeTime", "rules": rules}, now=monday)
    assert out["expected"] == {"time": "2024-08-06", "a": 1}
    assert rules["expected"]["time"] == "{Year}-{Month0D}-{Day0D}"  # the task's dict is not changed


def test_compare_csv_lines_strict_or_stripped_and_case_folded(tmp_path):
    result, gold = tmp_path / "r.csv", tmp_path / "g.csv"
    result.write_bytes(b"Name, Total \r\nA,1\r\n")
    gold.write_text("name, total\na,1\n")
    assert m.compare_csv(str(result), str(gold)) == 0.0
    assert m.compare_csv(str(result), str(gold), ignore_case=True) == 0.0  # the trailing space counts
    assert m.compare_csv(str(result), str(gold), ignore_case=True, strict=False) == 1.0
    assert m.compare_csv(None, str(gold)) == 0.0  # the agent left no file
    with pytest.raises(ValueError, match="no expected file"):
        m.compare_csv(str(result), None)
    # As desktop-env 1.0.2: a file that is not UTF-8 (Excel's cp1252) is read as Latin-1, not refused;
    # a list of expected files is matched by any of them.
    euro = tmp_path / "euro.csv"
    euro.write_bytes("Caf\xe9,5\n".encode("cp1252"))
    latin = tmp_path / "latin.csv"
    latin.write_text("Caf\xe9,5\n", encoding="utf-8")
    assert m.compare_csv(str(euro), str(latin)) == 1.0
    assert m.compare_csv(str(result), [str(latin), str(gold)], ignore_case=True, strict=False) == 1.0
    assert m.compare_csv(str(result), [str(latin)]) == 0.0
