"""OSWorld's spreadsheet metric (cua_cli/osworld/tables.py) on real .xlsx files written by openpyxl,
the support check that refuses the rules cua lacks, and the metric through the evaluator's getters
against the stand-in of OSWorld's in-VM server (tests/helpers/osworld_standin.py: OSWorld's server
runs in a QEMU VM, which cannot run here) with gold files from a real HTTP server."""

import re
import time
import zipfile
from pathlib import Path

import openpyxl
import pytest
from helpers.osworld_standin import StandIn, Web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpyxl.styles import Font, PatternFill

from cua_cli._util.budget import Budget
from cua_cli.errors import EvalError
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.evaluator import evaluate
from cua_cli.osworld.local_files import Downloads, episode_folder
from cua_cli.osworld.metrics import METRICS
from cua_cli.osworld.metrics.tables import compare_table, read_cell_value
from cua_cli.osworld.setup import SetupContext
from cua_cli.osworld.support import unsupported


def book(path: Path, sheets: dict, styles=None, freeze=None, zoom=None) -> str:
    """An .xlsx at `path` with `sheets` {name: rows}; the first row is the header pandas reads.
    Its text is in shared strings, as LibreOffice (the app of OSWorld's tasks) saves it."""
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
        for coordinate, font in (styles or {}).items():
            ws[coordinate].font = font
        if freeze:
            ws.freeze_panes = freeze
        if zoom:
            ws.sheet_view.zoomScale = zoom
    wb.save(path)
    _share_strings(path)
    return str(path)


def _share_strings(path: Path) -> None:
    """openpyxl writes text inline in each cell; move it to xl/sharedStrings.xml."""
    with zipfile.ZipFile(path) as z:
        parts = {name: z.read(name) for name in z.namelist()}
    strings: list[str] = []

    def shared(m: re.Match) -> str:
        strings.append(m.group(3))
        return f'<c r="{m.group(1)}"{m.group(2) or ""} t="s"><v>{len(strings) - 1}</v></c>'
    for name in [n for n in parts if n.startswith("xl/worksheets/")]:
        parts[name] = re.sub(r'<c r="(\w+)"( s="\d+")? t="inlineStr"><is><t[^>]*>(.*?)</t></is></c>', shared,
                             parts[name].decode()).encode()
    ns = "http://schemas.openxmlformats.org"
    parts["xl/sharedStrings.xml"] = (f'<sst xmlns="{ns}/spreadsheetml/2006/main">'
                                     + "".join(f"<si><t>{t}</t></si>" for t in strings) + "</sst>").encode()
    parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(b"</Types>", (
        '<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
        'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>').encode())
    parts["xl/_rels/workbook.xml.rels"] = parts["xl/_rels/workbook.xml.rels"].replace(b"</Relationships>", (
        f'<Relationship Id="rIdShared" Type="{ns}/officeDocument/2006/relationships/sharedStrings" '
        'Target="sharedStrings.xml"/></Relationships>').encode())
    with zipfile.ZipFile(path, "w") as z:
        for name, data in parts.items():
            z.writestr(name, data)


DATA = {"Sheet1": [["name", "amount"], ["a", 1.23456], ["b", 2]]}


def data_rule(**over):
    return {"type": "sheet_data", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", **over}


def test_sheet_data_compares_the_values_pandas_reads_rounded_to_the_precision(tmp_path):
    gold = book(tmp_path / "gold.xlsx", DATA)
    same = book(tmp_path / "same.xlsx", DATA)
    close = book(tmp_path / "close.xlsx", {"Sheet1": [["name", "amount"], ["a", 1.234561], ["b", 2]]})
    other = book(tmp_path / "other.xlsx", {"Sheet1": [["name", "amount"], ["a", 1.2], ["b", 2]]})
    renamed = book(tmp_path / "renamed.xlsx", {"Data": DATA["Sheet1"]})
    assert compare_table(same, gold, rules=[data_rule()]) == 1.0
    assert compare_table(close, gold, rules=[data_rule()]) == 1.0  # equal to 4 digits
    assert compare_table(close, gold, rules=[data_rule(precision=6)]) == 0.0
    assert compare_table(other, gold, rules=[data_rule()]) == 0.0
    assert compare_table(renamed, gold, rules=[data_rule()]) == 0.0  # the agent's book has no Sheet1
    assert compare_table(renamed, gold, rules=[data_rule(sheet_idx0="RI0", sheet_idx1="EI0")]) == 1.0
    assert compare_table(renamed, gold, rules=[data_rule(sheet_idx0=0, sheet_idx1="EI0")]) == 1.0
    assert compare_table(renamed, gold, rules=[{"type": "sheet_name"}]) == 0.0
    assert compare_table(same, gold, rules=[{"type": "sheet_name"}, data_rule()]) == 1.0


def _gold_book(path):
    return book(path, DATA)


def _gold_deck(path):
    from pptx import Presentation
    Presentation().save(path)
    return str(path)


def _gold_document(path):
    from docx import Document
    Document().save(path)
    return str(path)


@pytest.mark.parametrize("metric, gold, suffix, options", [
    ("compare_table", _gold_book, ".xlsx", {"rules": [data_rule()]}),
    ("compare_pptx_files", _gold_deck, ".pptx", {}),
    ("compare_docx_files", _gold_document, ".docx", {}),
])
def test_a_file_the_agent_broke_scores_0_and_a_broken_gold_file_raises(tmp_path, metric, gold, suffix, options):
    metric = METRICS[metric]
    good = gold(tmp_path / f"gold{suffix}")
    junk = tmp_path / f"junk{suffix}"
    junk.write_bytes(b"PK\x03\x04 not an office file")
    assert metric(None, good, **options) == 0.0  # the agent saved nothing
    assert metric(str(junk), good, **options) == 0.0
    assert metric(str(tmp_path / f"absent{suffix}"), good, **options) == 0.0
    with pytest.raises(zipfile.BadZipFile):  # the task's own file: the evaluator makes it an EvalError
        metric(good, str(junk), **options)


def test_broken_rules_are_the_tasks_errors(tmp_path):
    gold = book(tmp_path / "gold.xlsx", DATA)
    with pytest.raises(ValueError, match="sheet 'ENNope' cannot be read"):
        compare_table(gold, gold, rules=[data_rule(sheet_idx1="ENNope")])
    with pytest.raises(ValueError, match="none of RI<n>"):
        compare_table(gold, gold, rules=[data_rule(sheet_idx0="X1")])
    with pytest.raises(ValueError, match="rule type 'no_such_rule' is not implemented"):
        compare_table(gold, gold, rules=[{"type": "no_such_rule"}])

def test_sheet_print_compares_the_printed_csv_beside_each_book(tmp_path):
    result = book(tmp_path / "out.xlsx", DATA)
    gold = book(tmp_path / "out_gold.xlsx", DATA)
    (tmp_path / "out-Sheet1.csv").write_text("Name,Amount\na,1.2M\n\n\n")
    (tmp_path / "out_gold-Sheet1.csv").write_text("name,amount\na,1.2M\n")
    rule = {"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
    assert compare_table(result, gold, rules=[rule]) == 0.0  # case differs
    assert compare_table(result, gold, rules=[{**rule, "ignore_case": True}]) == 1.0  # trailing blank lines do not count
    (tmp_path / "out-Sheet1.csv").unlink()
    assert compare_table(result, gold, rules=[{**rule, "ignore_case": True}]) == 0.0  # nothing printed


def test_cells_are_read_from_the_files_xml_as_osworld_reads_them(tmp_path):
    path = book(tmp_path / "b.xlsx", {"S": [["Rd 1", 3], ["=A1", None]]})
    assert read_cell_value(path, "S", "A1") == "Rd 1"   # a shared string
    inline = tmp_path / "inline.xlsx"
    openpyxl.Workbook().save(inline)
    wb = openpyxl.load_workbook(inline)
    wb.active["A1"] = "text"
    wb.active["A2"] = " spaced "
    wb.save(inline)
    assert read_cell_value(str(inline), "Sheet", "A1") == "text"  # kept inline in the cell, as openpyxl writes
    assert read_cell_value(str(inline), "Sheet", "A2") is None  # xml:space on it: OSWorld's reading matches no text
    assert read_cell_value(path, "S", "B1") == 3.0      # a number, as a float
    assert read_cell_value(path, "S", "A2") is None     # a formula nobody has computed: no cached value
    assert read_cell_value(path, "S", "Z9") is None     # no such cell
    assert read_cell_value(path, "Nope", "A1") is None
    # A book LibreOffice saved: a formula's cached string, rich text across runs.
    hand = tmp_path / "hand.xlsx"
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    with zipfile.ZipFile(hand, "w") as z:
        z.writestr("xl/workbook.xml", f'<workbook {ns}><sheets><sheet name="Q" sheetId="7"/></sheets></workbook>')
        z.writestr("xl/sharedStrings.xml", f'<sst {ns}><si><r><t>Main</t></r><r><t> Road</t></r></si></sst>')
        z.writestr("xl/worksheets/sheet7.xml", f'<worksheet {ns}><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c>'
                   '<c r="B1" t="str"><f>A1</f><v>cached</v></c><c r="C1" t="b"><v>1</v></c>'
                   '<c r="D1" t="e"><f>1/0</f><v>#DIV/0!</v></c></row></sheetData></worksheet>')
    assert [read_cell_value(str(hand), "Q", c) for c in ("A1", "B1", "C1", "D1")] == [
        "Main Road", "cached", None, "#DIV/0!"]
    with pytest.raises(ValueError, match="no cell reference"):
        read_cell_value(str(hand), "Q", "A1:B2")
    # An empty shared string (<t/>): OSWorld's reading of the shared strings fails as a whole, so no
    # text cell of that book has a value.
    empty = tmp_path / "empty.xlsx"
    with zipfile.ZipFile(hand) as src, zipfile.ZipFile(empty, "w") as z:
        for name in src.namelist():
            data = src.read(name)
            if name == "xl/sharedStrings.xml":
                data = data.replace(b"</sst>", b"<si><t/></si></sst>")
            z.writestr(name, data)
    assert [read_cell_value(str(empty), "Q", c) for c in ("A1", "B1")] == [None, "cached"]


def test_sheet_fuzzy_check_cell_freeze_and_zoom(tmp_path):
    result = book(tmp_path / "r.xlsx", {"Sheet1": [["Addr", "Total"], ["12 Main Rd.", 10.04]]},
                  styles={"B2": Font(bold=True)}, freeze="A2", zoom=150)
    gold = book(tmp_path / "g.xlsx", {"Sheet1": [["addr", "Total"], ["12 main road", 10]]}, freeze="A2")
    fuzzy = {"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", "rules": [
        {"range": ["A2"], "type": "exact_match", "ignore_case": True, "ignore_chars": ".",
         "normalization": [["Rd", "Road"]]},
        {"range": ["A1"], "type": "fuzzy_match", "threshold": 70}]}
    assert compare_table(result, gold, rules=[fuzzy]) == 1.0
    strict = {**fuzzy, "rules": [{"range": ["A1:A2"], "type": "exact_match"}]}
    assert compare_table(result, gold, rules=[strict]) == 0.0
    cell = {"type": "check_cell", "sheet_idx": "RNSheet1", "coordinate": "B2",
            "props": {"value": {"method": "approx:0.1", "ref": 10}, "font_bold": {"method": "eq", "ref": True}}}
    assert compare_table(result, gold, rules=[cell]) == 1.0
    assert compare_table(gold, gold, rules=[{**cell, "sheet_idx": "ENSheet1"}]) == 0.0  # not bold there
    assert compare_table(result, gold, rules=[{"type": "freeze", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]) == 1.0
    zoom = {"type": "zoom", "sheet_idx": "RNSheet1", "method": "gt", "ref": 120}
    assert compare_table(result, gold, rules=[zoom]) == 1.0
    assert compare_table(gold, gold, rules=[zoom]) == 0.0  # no zoom set: 100


def test_check_cell_reads_fills_fonts_and_merges_as_osworlds_current_code(tmp_path):
    """As desktop-env 1.0.2 (OSWorld-Verified's code): a solid fill's colour is its fgColor, for
    bgcolor and fgcolor alike (the gold file of such a task, copied, must score 1); a style that cannot
    be read (a font without a colour) is None for the rule to judge, not an error; merge says whether
    the cell is covered by a merged range."""
    path = tmp_path / "fill.xlsx"
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    ws.append(["Name", "Total"])
    ws.append(["a", 1])
    ws["B2"].fill = PatternFill(fill_type="solid", fgColor="FFFFFF00")  # yellow, as LibreOffice saves it
    ws["A2"].font = Font(bold=True)  # no colour
    ws.merge_cells("A3:B3")
    ws["A3"] = "merged"
    wb.save(path)

    def check(coordinate, **props):
        rule = {"type": "check_cell", "sheet_idx": "RNSheet1", "coordinate": coordinate,
                "props": {k: {"method": "eq", "ref": v} for k, v in props.items()}}
        return compare_table(str(path), str(path), rules=[rule])

    assert check("B2", bgcolor="FFFFFF00", fgcolor="FFFFFF00", fill_type="patternFill") == 1.0
    assert check("B2", bgcolor="00000000") == 0.0  # the pattern's background colour is not what is read
    assert check("A2", font_color=None) == 1.0 and check("A2", font_color="FF000000") == 0.0
    assert check("B3", merge=True) == 1.0 and check("A2", merge=False) == 1.0


def test_the_support_check_names_what_cua_lacks():
    def task(func, options):
        return {"config": [], "evaluator": {"func": func, "options": options,
                                            "result": {"type": "vm_file", "path": "/r.xlsx", "dest": "r.xlsx"}}}
    assert unsupported(task("compare_table", {"rules": [data_rule(), {"type": "sheet_name"}]})) == []
    assert unsupported(task("compare_table", {"rules": [{"type": "no_such_rule"}, {"type": "filter"}]})) == [
        "metric 'compare_table' rule 'no_such_rule'"]
    assert unsupported(task("compare_table", {"rules": [{"type": "check_cell", "props": {"border": {}}}]})) == [
        "metric 'compare_table' cell property 'border'"]
    # A list of metrics: each takes its own options.
    assert unsupported(task(["compare_table", "compare_table"], [{"rules": [data_rule()]},
                                                                  {"rules": [{"type": "no_such_rule"}]}])) == [
        "metric 'compare_table' rule 'no_such_rule'"]
    assert unsupported(task("compare_csv", {})) == []


@pytest.mark.parametrize("metric, options, libraries", [
    ("compare_table", {"rules": [data_rule()]}, "pandas and openpyxl and formulas"),
    ("compare_pptx_files", {"examine_shape": False}, "python-pptx"),
    ("compare_docx_files", {"ignore_blanks": False}, "python-docx and odfpy and pillow"),
])
def test_an_office_task_is_supported_with_the_office_extra_and_named_without_it(monkeypatch, metric, options,
                                                                                 libraries):
    task = {"config": [], "evaluator": {"func": metric, "options": options,
                                        "result": {"type": "vm_file", "path": "/f", "dest": "f"}}}
    assert unsupported(task) == []
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert unsupported(task) == [f"metric {metric!r} (needs {libraries}: pip install 'cua[office]')"]


def test_a_step_or_getter_is_named_with_the_extra_this_host_lacks_for_it(monkeypatch):
    task = {"config": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://127.0.0.1/"]}}],
            "evaluator": {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                          "expected": {"type": "rule", "rules": {"type": "url", "urls": ["http://127.0.0.1/"]}}}}
    assert unsupported(task) == []
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None if name == "playwright" else True)
    assert unsupported(task) == ["step 'chrome_open_tabs' (needs playwright: pip install 'cua[web]')",
                                 "getter 'open_tabs_info' (needs playwright: pip install 'cua[web]')"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(st.one_of(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6, allow_nan=False),
                                        st.text("abc xyz", max_size=5), st.none()), min_size=2, max_size=2),
                     min_size=1, max_size=5),
       junk=st.binary(max_size=64))
def test_a_book_equals_itself_and_any_bytes_score_0(tmp_path_factory, rows, junk):
    folder = tmp_path_factory.mktemp("t")
    path = book(folder / "b.xlsx", {"Sheet1": [["h1", "h2"], *rows]})
    copy = book(folder / "c.xlsx", {"Sheet1": [["h1", "h2"], *rows]})
    assert compare_table(path, copy, rules=[data_rule(), {"type": "sheet_name"}]) == 1.0
    bad = folder / "bad.xlsx"
    bad.write_bytes(junk)
    assert compare_table(str(bad), path, rules=[data_rule()]) == 0.0


# -- through the evaluator: vm_file from the desktop, cloud_file from the web

def test_a_calc_task_is_scored_from_the_desktops_file_and_the_gold_files_on_the_web(tmp_path):
    gold_dir = tmp_path / "served"
    gold_dir.mkdir()
    gold = Path(book(gold_dir / "g.xlsx", DATA)).read_bytes()
    web = Web({"/gold?id=1": (200, {}, gold), "/gold?id=2": (200, {}, b"name,amount\na,1.2M\n")})
    vm = StandIn(tmp_path / "vm")
    try:
        api = DesktopAPI(ApiSettings(vm.url, timeout_s=5, retries=1))
        ctx = SetupContext(api, Downloads(tmp_path / "downloads"), episode_folder(tmp_path / "work", "t", "0_0"))
        ev = {"func": "compare_table",
              "result": {"type": "vm_file", "multi": True, "path": ["/home/user/out.xlsx", "/home/user/out-Sheet1.csv"],
                         "dest": ["out.xlsx", "out-Sheet1.csv"]},
              "expected": {"type": "cloud_file", "multi": True, "path": [f"{web.url}/gold?id=1", f"{web.url}/gold?id=2"],
                           "dest": ["out_gold.xlsx", "out_gold-Sheet1.csv"]},
              "options": {"rules": [data_rule(), {"type": "sheet_print", "sheet_idx0": "RNSheet1",
                                                  "sheet_idx1": "ENSheet1"}]}}

        def score():
            return evaluate(ev, "DONE", ctx, Budget(step_timeout=5, deadline=time.monotonic() + 30),
                            file_tries=1, file_retry_s=0)
        assert score() == 0.0  # the agent saved nothing
        book(vm.desktop.path("~/out.xlsx"), DATA)
        vm.desktop.path("~/out-Sheet1.csv").write_text("name,amount\na,1.2M\n")
        assert score() == 1.0
        vm.desktop.path("~/out-Sheet1.csv").write_text("name,amount\na,1.3M\n")
        assert score() == 0.0
        broken = {**ev, "options": {"rules": [data_rule(sheet_idx1="ENMissing")]}}
        with pytest.raises(EvalError, match="metric compare_table: ValueError: sheet 'ENMissing' cannot be read"):
            evaluate(broken, "DONE", ctx, Budget(step_timeout=5, deadline=time.monotonic() + 30))
    finally:
        vm.close()
        web.close()


# -- charts and pivot tables, as openpyxl reads them back

SALES = [["region", "item", "sales"], ["n", "a", 1], ["s", "b", 2], ["n", "b", 3]]


def with_chart(path: Path, values="C2:C4", title="Sales", kind="bar") -> str:
    from openpyxl.chart import BarChart, LineChart, Reference

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    for row in SALES:
        ws.append(row)
    chart = BarChart() if kind == "bar" else LineChart()
    chart.title = title
    first, last = values.split(":")
    chart.add_data(Reference(ws, range_string=f"Sheet1!{first}:{last}"))
    chart.set_categories(Reference(ws, range_string="Sheet1!B2:B4"))
    ws.add_chart(chart, "E2")
    wb.save(path)
    return str(path)


def with_pivot(path: Path, rows=(0,), data_field=2, subtotal="sum") -> str:
    from openpyxl.pivot.cache import CacheDefinition, CacheField, CacheSource, SharedItems, WorksheetSource
    from openpyxl.pivot.table import DataField, FieldItem, Location, PivotField, RowColField, TableDefinition

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    for row in SALES:
        ws.append(row)
    pivot = TableDefinition(
        name="Pivot1", cacheId=1, dataCaption="Values",
        location=Location(ref="E1:F3", firstHeaderRow=1, firstDataRow=1, firstDataCol=1),
        pivotFields=[PivotField(axis="axisRow", items=[FieldItem(x=0), FieldItem(x=1), FieldItem(t="default")]),
                     PivotField(), PivotField(dataField=True)],
        rowFields=[RowColField(x=x) for x in rows], dataFields=[DataField(fld=data_field, subtotal=subtotal)])
    pivot.cache = CacheDefinition(
        cacheSource=CacheSource(type="worksheet", worksheetSource=WorksheetSource(ref="A1:C4", sheet="Sheet1")),
        cacheFields=[CacheField(name=n, sharedItems=SharedItems()) for n in SALES[0]])
    ws._pivots.append(pivot)
    wb.save(path)
    return str(path)


def test_charts_are_compared_by_their_ranges_and_the_props_asked_for(tmp_path):
    rule = {"type": "chart", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
            "chart_props": ["type", "title"]}
    gold = with_chart(tmp_path / "gold.xlsx")
    assert compare_table(with_chart(tmp_path / "same.xlsx"), gold, rules=[rule]) == 1.0
    assert compare_table(with_chart(tmp_path / "range.xlsx", values="C2:C3"), gold, rules=[rule]) == 0.0
    retitled = with_chart(tmp_path / "title.xlsx", title="Revenue")
    assert compare_table(retitled, gold, rules=[rule]) == 0.0
    assert compare_table(retitled, gold, rules=[{**rule, "chart_props": ["type"]}]) == 1.0
    assert compare_table(with_chart(tmp_path / "line.xlsx", kind="line"), gold, rules=[rule]) == 0.0
    assert compare_table(book(tmp_path / "none.xlsx", {"Sheet1": SALES}), gold, rules=[rule]) == 0.0


def test_pivot_tables_are_compared_by_source_and_the_props_asked_for(tmp_path):
    rule = {"type": "pivot_table", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
            "pivot_props": ["row_fields", "data_fields", "selection"]}
    gold = with_pivot(tmp_path / "gold.xlsx")
    assert compare_table(with_pivot(tmp_path / "same.xlsx"), gold, rules=[rule]) == 1.0
    assert compare_table(with_pivot(tmp_path / "rows.xlsx", rows=(1,)), gold, rules=[rule]) == 0.0
    assert compare_table(with_pivot(tmp_path / "avg.xlsx", subtotal="average"), gold, rules=[rule]) == 0.0
    assert compare_table(with_pivot(tmp_path / "avg.xlsx", subtotal="average"), gold,
                         rules=[{**rule, "pivot_props": ["row_fields"]}]) == 1.0
    assert compare_table(book(tmp_path / "none.xlsx", {"Sheet1": SALES}), gold, rules=[rule]) == 0.0


def test_an_office_file_that_would_inflate_past_the_bound_is_never_opened(tmp_path, monkeypatch):
    from docx import Document
    from pptx import Presentation

    from cua_cli.osworld.metrics.documents import compare_docx_files
    from cua_cli.osworld.metrics.slides import compare_pptx_files

    gold = book(tmp_path / "gold.xlsx", DATA)
    Presentation().save(tmp_path / "gold.pptx")
    Document().save(tmp_path / "gold.docx")
    small = book(tmp_path / "small.xlsx", {"Sheet1": [["a"]]})
    large = book(tmp_path / "large.xlsx", {"Sheet1": [["n", "text"]] + [[i, f"row {i}"] for i in range(5000)]})
    monkeypatch.setattr("cua_cli.osworld.metrics.ooxml.MAX_INFLATED", 4000)  # less than any of these inflate to
    assert compare_table(gold, gold, rules=[data_rule()]) == 0.0  # as the agent's file: scored 0
    assert compare_pptx_files(str(tmp_path / "gold.pptx"), str(tmp_path / "gold.pptx")) == 0.0
    assert compare_docx_files(str(tmp_path / "gold.docx"), str(tmp_path / "gold.docx")) == 0.0
    monkeypatch.setattr("cua_cli.osworld.metrics.ooxml.MAX_INFLATED", 100_000)  # the small book's ~17 KB, not 5,000 rows
    with pytest.raises(ValueError, match="inflates to more than 100000 bytes"):  # as the task's file: an error
        compare_table(small, large, rules=[data_rule()])


def test_a_host_without_the_office_extra_ends_scoring_as_its_own_error_never_the_tasks(tmp_path, monkeypatch):
    """A Ray node set up without the office extra: an eval_error (retried, maybe elsewhere), not a
    bad task and not a score; a FAIL still scores 0 without the metric."""
    from cua_cli.errors import BadTask

    vm = StandIn(tmp_path / "vm")
    try:
        ctx = SetupContext(DesktopAPI(ApiSettings(vm.url, timeout_s=5, retries=1)), Downloads(tmp_path / "dl"),
                           episode_folder(tmp_path / "work", "t", "0_0"))
        ev = {"func": "compare_table", "options": {"rules": [data_rule()]},
              "result": {"type": "vm_file", "path": "/home/user/out.xlsx", "dest": "out.xlsx"}}
        monkeypatch.setattr("importlib.util.find_spec", lambda name: None if name == "pandas" else True)
        with pytest.raises(EvalError, match=r"this host lacks pandas to score the task: pip install 'cua\[office\]'") as e:
            evaluate(ev, "DONE", ctx, Budget(step_timeout=5, deadline=time.monotonic() + 30))
        assert not isinstance(e.value, BadTask)
        assert evaluate(ev, "FAIL", ctx, Budget(step_timeout=5, deadline=time.monotonic() + 30)) == 0.0
    finally:
        vm.close()


def test_a_gold_file_named_as_the_result_never_replaces_it(tmp_path):
    """OSWorld keeps both in one cache folder, so one name makes it score the gold file against itself."""
    web = Web({"/gold.csv": (200, {}, b"a,b\n1,2\n")})
    vm = StandIn(tmp_path / "vm")
    try:
        ctx = SetupContext(DesktopAPI(ApiSettings(vm.url, timeout_s=5, retries=1)), Downloads(tmp_path / "dl"),
                           episode_folder(tmp_path / "work", "t", "0_0"))
        vm.desktop.path("~/out.csv").write_text("a,b\n1,3\n")
        ev = {"func": "compare_csv", "result": {"type": "vm_file", "path": "/home/user/out.csv", "dest": "out.csv"},
              "expected": {"type": "cloud_file", "path": f"{web.url}/gold.csv", "dest": "out.csv"}}
        budget = Budget(step_timeout=5, deadline=time.monotonic() + 30)
        assert evaluate(ev, "DONE", ctx, budget) == 0.0
        vm.desktop.path("~/out.csv").write_text("a,b\n1,2\n")
        assert evaluate(ev, "DONE", ctx, budget) == 1.0
    finally:
        vm.close()
        web.close()


def test_data_validation_with_osworlds_range_and_list_rules(tmp_path):
    from openpyxl.worksheet.datavalidation import DataValidation

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    ws.append(["Answer", "Score"])
    choices = DataValidation(type="list", formula1='"Yes,No"')
    choices.add("A2:A4")
    ws.add_data_validation(choices)
    wb.save(tmp_path / "dv.xlsx")
    book = str(tmp_path / "dv.xlsx")

    def score(*dv_props):
        return compare_table(book, book, rules=[{"type": "data_validation", "sheet_idx": "RNSheet1",
                                                 "dv_props": list(dv_props)}])
    assert score({"type": {"method": "eq", "ref": "list"}, "formula1": {"method": "str_set_eq", "ref": ["No", "Yes"]},
                  "ranges": {"method": "spreadsheet_range", "ref": ["A2:A3", "A1:A10"]}}) == 1.0
    assert score({"formula1": {"method": "str_list_eq", "ref": ["No", "Yes"]}}) == 0.0  # a list keeps its order
    assert score({"ranges": {"method": "spreadsheet_range", "ref": ["A2:A5", "A1:A10"]}}) == 0.0  # A5 not covered
    assert score({"type": {"method": "eq", "ref": "list"}}, {"type": {"method": "eq", "ref": "whole"}}) == 0.0  # 1 < 2
    assert METRICS["compare_table"] is compare_table


def test_range_rules_bound_a_value_open_or_closed():
    from cua_cli.osworld.metrics.values import match_value

    def within(method, value):
        return match_value(value, {"method": method, "ref": [0, 2]})
    assert within("range.te", 2) and not within("range.te", 0)  # 0 < x <= 2
    assert within("range.et", 0) and not within("range.et", 2)  # 0 <= x < 2
    with pytest.raises(ValueError, match="unknown method"):
        match_value(1, {"method": "range.gx", "ref": [0, 2]})
