"""cua's OSWorld metrics against OSWorld's own evaluator code (desktop-env 1.0.2, see
helpers/osworld_reference.py) on inputs neither was written for: generated spreadsheets (values,
fonts, fills, merges, as openpyxl and pandas save them) and CSV files in several encodings. A score
that differs from OSWorld's is a task scored unlike OSWorld scores it."""

import re
import string
from pathlib import Path

import openpyxl
import pytest
from helpers.osworld_reference import reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpyxl.styles import Font, PatternFill

from cua_cli.osworld.metrics import general as metrics
from cua_cli.osworld.metrics.tables import CELL_STYLES, _cell_style, compare_table, read_cell_value

ROOT = Path(__file__).resolve().parents[1]
CELLS = [f"{c}{r}" for r in range(1, 5) for c in "ABC"]
TEXT = st.text(alphabet=string.ascii_letters + " éß€", max_size=6)
VALUES = st.one_of(st.none(), st.integers(-999, 999), st.floats(-1e6, 1e6, allow_nan=False), TEXT,
                   st.booleans(), st.sampled_from(["=1/0", "=A1+1", "=SUM(B1:B2)"]))
COLOURS = st.sampled_from(["FFFF0000", "FF00FF00", "FFFFFF00", "00000000"])
FONTS = st.one_of(st.none(), st.builds(Font, bold=st.booleans(), italic=st.booleans(),
                                       underline=st.sampled_from([None, "single", "double"]),
                                       size=st.sampled_from([None, 10, 11.5, 14]),
                                       color=st.one_of(st.none(), COLOURS)))
FILLS = st.one_of(st.none(), st.builds(PatternFill, fill_type=st.sampled_from(["solid", "gray125", "darkGrid"]),
                                       fgColor=COLOURS, bgColor=COLOURS))
SHEETS = st.fixed_dictionaries({
    "values": st.dictionaries(st.sampled_from(CELLS), VALUES, max_size=8),
    "fonts": st.dictionaries(st.sampled_from(CELLS), FONTS, max_size=4),
    "fills": st.dictionaries(st.sampled_from(CELLS), FILLS, max_size=4),
    "formats": st.dictionaries(st.sampled_from(CELLS), st.sampled_from(["0.00", "0%", "@", "yyyy-mm-dd"]), max_size=3),
    "merge": st.sampled_from([None, "A4:B4", "B2:C3"]),
})


def _book(path, sheet: dict) -> str:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    ws.append(["Name", "Amount", "Note"])  # a header, as pandas' reading in compare_table expects
    for coordinate, value in sheet["values"].items():
        ws[coordinate] = value
    for coordinate, font in sheet["fonts"].items():
        if font is not None:
            ws[coordinate].font = font
    for coordinate, fill in sheet["fills"].items():
        if fill is not None:
            ws[coordinate].fill = fill
    for coordinate, number_format in sheet["formats"].items():
        ws[coordinate].number_format = number_format
    if sheet["merge"]:
        ws.merge_cells(sheet["merge"])
    wb.save(path)
    return str(path)


def _or_none(read, *args):
    """What OSWorld's check_cell makes of a read: an exception is None."""
    try:
        return read(*args)
    except Exception:  # noqa: BLE001 - OSWorld's check_cell catches everything here
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sheet=SHEETS)
def test_cells_values_and_styles_read_as_osworld_reads_them(tmp_path, sheet):
    utils = reference("utils")
    path = _book(tmp_path / "book.xlsx", sheet)
    ws = openpyxl.load_workbook(path)["Sheet1"]
    for coordinate in CELLS:
        theirs, ours = _or_none(utils.read_cell_value, path, "Sheet1", coordinate), \
            read_cell_value(path, "Sheet1", coordinate)
        if isinstance(theirs, dict):  # an inline string with xml:space: OSWorld's XML reading makes it a mapping
            assert ours is None, (coordinate, theirs)
        else:
            assert ours == theirs, (coordinate, sheet)
        cell = ws[coordinate]
        for style in CELL_STYLES:
            assert _cell_style(style, cell) == _or_none(utils._read_cell_style, style, cell), (style, coordinate)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sheet=SHEETS, data=st.data())
def test_check_cell_scores_as_osworlds_compare_table(tmp_path, sheet, data):
    table = reference("table")
    path = _book(tmp_path / "book.xlsx", sheet)
    ws = openpyxl.load_workbook(path)["Sheet1"]
    coordinate = data.draw(st.sampled_from(CELLS))
    props = data.draw(st.lists(st.sampled_from(CELL_STYLES + ("value",)), min_size=1, max_size=3, unique=True))
    # refs the cell has and refs it has not, so that both scores come up
    rule = {"type": "check_cell", "sheet_idx": "RNSheet1", "coordinate": coordinate,
            "props": {p: {"method": "eq", "ref": data.draw(st.sampled_from(
                [read_cell_value(path, "Sheet1", coordinate) if p == "value" else _cell_style(p, ws[coordinate]),
                 None, True, "FFFFFF00", 11.0]))} for p in props}}
    assert compare_table(path, path, rules=[rule]) == table.compare_table(path, path, rules=[rule]), rule


ENCODINGS = ["utf-8", "utf-8-sig", "cp1252", "latin-1", "utf-16"]
LINES = st.lists(st.sampled_from(["a,b", "A,B ", " x", "Café", "€5", "", "1,2", "name, total"]), max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.tuples(LINES, st.sampled_from(ENCODINGS), st.sampled_from(["\n", "\r\n"])),
                      min_size=2, max_size=3),
       strict=st.booleans(), ignore_case=st.booleans())
def test_compare_csv_scores_as_osworlds(tmp_path, files, strict, ignore_case):
    table = reference("table")
    paths = []
    for i, (lines, encoding, newline) in enumerate(files):
        path = tmp_path / f"{i}.csv"
        try:
            path.write_bytes(newline.join(lines).encode(encoding))
        except UnicodeEncodeError:
            path.write_bytes(newline.join(lines).encode("utf-8"))
        paths.append(str(path))
    options = {"strict": strict, "ignore_case": ignore_case}
    result, expected = paths[0], paths[1:] if len(paths) > 2 else paths[1]
    assert metrics.compare_csv(result, expected, **options) == table.compare_csv(result, expected, **options)


def test_the_reference_is_osworlds_code_and_tells_a_wrong_reading_apart(tmp_path):
    """The cross-check can fail: OSWorld reads a solid fill's colour from fgColor, so reading bgColor
    (as cua did before) answers otherwise on the same cell; and a font without a colour raises in
    OSWorld's reading, which its check_cell turns into None."""
    utils = reference("utils")
    path = _book(tmp_path / "b.xlsx", {"values": {"B2": 1}, "fonts": {}, "formats": {}, "merge": None,
                                       "fills": {"B2": PatternFill("solid", fgColor="FFFFFF00")}})
    cell = openpyxl.load_workbook(path)["Sheet1"]["B2"]
    assert utils._read_cell_style("bgcolor", cell) == "FFFFFF00" == _cell_style("bgcolor", cell)
    assert cell.fill.bgColor.rgb != "FFFFFF00"
    ws = openpyxl.Workbook().active
    ws["A1"] = "x"
    ws["A1"].font = Font(bold=True)
    with pytest.raises(AttributeError):
        utils._read_cell_style("font_color", ws["A1"])
    assert _cell_style("font_color", ws["A1"]) is None


@pytest.mark.slow  # a long property search over real files
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sheet=SHEETS, data=st.data())
def test_sheet_data_and_names_score_as_osworlds_compare_table(tmp_path, sheet, data):
    """The result book against a gold book that is the same or a little off: a value changed, a
    number moved below or above the rule's precision, a sheet renamed."""
    table = reference("table")
    result = _book(tmp_path / "result.xlsx", sheet)
    gold_values = dict(sheet["values"])
    if gold_values and data.draw(st.booleans()):
        coordinate = data.draw(st.sampled_from(sorted(gold_values)))
        value = gold_values[coordinate]
        gold_values[coordinate] = (value + data.draw(st.sampled_from([1e-6, 1e-3, 1]))
                                   if isinstance(value, (int, float)) and not isinstance(value, bool)
                                   else data.draw(VALUES))
    gold = _book(tmp_path / "gold.xlsx", {**sheet, "values": gold_values})
    if data.draw(st.booleans()):
        wb = openpyxl.load_workbook(gold)
        wb.active.title = "Other"
        wb.save(gold)
    rules = [{"type": "sheet_name"},
             {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0",
              "precision": data.draw(st.sampled_from([None, 2, 4]))}]
    rules = [{k: v for k, v in r.items() if v is not None} for r in rules]
    for chosen in ([rules[0]], [rules[1]], rules):
        assert compare_table(result, gold, rules=chosen) == table.compare_table(result, gold, rules=chosen), chosen


RUNS = st.lists(st.tuples(st.sampled_from(["Hello", "World", "", "Hi there"]), st.sampled_from([None, True, False]),
                          st.sampled_from([None, True, False]), st.sampled_from([None, "single", True, False]),
                          st.sampled_from([None, 18, 24]), st.sampled_from([None, "FF0000", "00AA00"])),
                min_size=1, max_size=2)
BOX = st.tuples(st.sampled_from([914400, 1000000]), st.sampled_from([914400, 2000000]),
                st.lists(st.tuples(RUNS, st.sampled_from([None, "center", "left"]), st.sampled_from([0, 1])),
                         min_size=1, max_size=2))
SLIDE = st.fixed_dictionaries({"boxes": st.lists(BOX, min_size=1, max_size=2),
                               "table": st.one_of(st.none(), st.tuples(st.integers(1, 2), st.integers(1, 2))),
                               "note": st.sampled_from([None, "", "note"]),
                               "background": st.sampled_from([None, "FFFFFF", "112233"])})
# What the agent's deck may differ in: a shape moved within or beyond 0.5%, a run's flags flipped
# between on, off and unset, a run split in two, a word changed, a paragraph added, nothing.
CHANGES = ["none", "move_within", "move_beyond", "bold", "underline", "split", "text", "paragraph", "note"]


def _deck(path, slides) -> str:
    from pptx import Presentation
    from pptx.dml.color import RGBColor
    from pptx.enum.text import PP_ALIGN
    from pptx.util import Emu, Pt

    prs = Presentation()
    for spec in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        if spec["background"]:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = RGBColor.from_string(spec["background"])
        for left, top, paragraphs in spec["boxes"]:
            frame = slide.shapes.add_textbox(Emu(left), Emu(top), Emu(3000000), Emu(600000)).text_frame
            for i, (runs, align, level) in enumerate(paragraphs):
                p = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
                p.level = level
                if align:
                    p.alignment = PP_ALIGN.CENTER if align == "center" else PP_ALIGN.LEFT
                for text, bold, italic, underline, size, colour in runs:
                    r = p.add_run()
                    r.text = text
                    r.font.bold, r.font.italic = bold, italic
                    r.font.underline = underline if underline != "single" else True
                    if size:
                        r.font.size = Pt(size)
                    if colour:
                        r.font.color.rgb = RGBColor.from_string(colour)
        if spec["table"]:
            rows, cols = spec["table"]
            table = slide.shapes.add_table(rows, cols, Emu(914400), Emu(3000000), Emu(4000000), Emu(800000)).table
            table.cell(0, 0).text = "cell"
        if spec["note"] is not None:
            slide.notes_slide.notes_text_frame.text = spec["note"]
    prs.save(path)
    return str(path)


def _changed(slides, change: str, data):
    import copy

    out = copy.deepcopy(slides)
    spec = data.draw(st.sampled_from(out))
    i = data.draw(st.integers(0, len(spec["boxes"]) - 1))
    left, top, paragraphs = spec["boxes"][i]
    runs = paragraphs[0][0]
    text, bold, italic, underline, size, colour = runs[0]
    if change == "move_within":
        left = int(left * 1.003)
    elif change == "move_beyond":
        left = int(left * 1.05)
    elif change == "bold":
        runs[0] = (text, {None: False, False: None, True: None}[bold], italic, underline, size, colour)
    elif change == "underline":
        runs[0] = (text, bold, italic, {None: True, True: False, False: None, "single": None}[underline], size, colour)
    elif change == "split" and len(text) > 2:
        runs[0:1] = [(text[:2], bold, italic, underline, size, colour),
                     (text[2:], bold, italic, underline, size, colour)]
    elif change == "text":
        runs[0] = ("Changed", bold, italic, underline, size, colour)
    elif change == "paragraph":
        paragraphs.append(([("", None, None, None, None, None)], None, 0))
    elif change == "note":
        spec["note"] = "another note"
    spec["boxes"][i] = (left, top, paragraphs)
    return out


@pytest.mark.slow  # a long property search over real files
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slides=st.lists(SLIDE, min_size=1, max_size=2), change=st.sampled_from(CHANGES), data=st.data(),
       options=st.fixed_dictionaries({}, optional={"examine_shape": st.booleans(), "examine_font_bold": st.booleans(),
                                                   "examine_alignment": st.booleans(),
                                                   "approximately_tolerance": st.sampled_from([0.001, 0.01])}))
def test_compare_pptx_files_scores_as_osworlds(tmp_path, slides, change, data, options):
    from cua_cli.osworld.metrics.slides import compare_pptx_files

    slides_ref = reference("slides")
    result = _deck(tmp_path / "result.pptx", _changed(slides, change, data))
    gold = _deck(tmp_path / "gold.pptx", slides)
    theirs = slides_ref.compare_pptx_files(result, gold, enable_debug=False, **options)
    assert compare_pptx_files(result, gold, **options) == float(theirs), (change, options)


FILTERS = st.fixed_dictionaries({
    "ref": st.sampled_from([None, "A1:C4", "A1:B4"]),
    "values": st.one_of(st.none(), st.lists(st.sampled_from(["a", "b", "1"]), max_size=2)),
    "custom": st.one_of(st.none(), st.tuples(st.sampled_from(["greaterThan", "lessThan"]),
                                             st.sampled_from(["1", "5"]))),
    "sort": st.one_of(st.none(), st.tuples(st.sampled_from(["B2:B4", "C2:C4"]), st.booleans())),
})
DIMENSIONS = st.fixed_dictionaries({
    "rows": st.dictionaries(st.integers(1, 4), st.tuples(st.sampled_from([None, 15.0, 30.0]), st.booleans()),
                            max_size=2),
    "cols": st.dictionaries(st.sampled_from("ABC"), st.tuples(st.sampled_from([None, 8.5, 20.0]), st.booleans()),
                            max_size=2),
})


def _laid_out(path, sheet: dict, dims: dict, flt: dict) -> str:
    from openpyxl.worksheet.filters import CustomFilter, CustomFilters, FilterColumn, Filters

    _book(path, sheet)
    wb = openpyxl.load_workbook(path)
    ws = wb["Sheet1"]
    for row, (height, hidden) in dims["rows"].items():
        ws.row_dimensions[row].height, ws.row_dimensions[row].hidden = height, hidden
    for col, (width, hidden) in dims["cols"].items():
        if width is not None:
            ws.column_dimensions[col].width = width
        ws.column_dimensions[col].hidden = hidden
    if flt["ref"]:
        ws.auto_filter.ref = flt["ref"]
        if flt["values"] is not None:
            ws.auto_filter.filterColumn.append(FilterColumn(colId=0, filters=Filters(filter=flt["values"])))
        if flt["custom"] is not None:
            op, val = flt["custom"]
            ws.auto_filter.filterColumn.append(FilterColumn(colId=1, customFilters=CustomFilters(
                customFilter=[CustomFilter(operator=op, val=val)])))
        if flt["sort"] is not None:
            ws.auto_filter.add_sort_condition(*flt["sort"])
    wb.save(path)
    return str(path)


@pytest.mark.slow  # a long property search over real files
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sheet=SHEETS, dims=st.tuples(DIMENSIONS, DIMENSIONS), filters=st.tuples(FILTERS, FILTERS),
       props=st.lists(st.sampled_from(["height", "width", "hidden", "outlineLevel"]), max_size=3, unique=True))
def test_row_col_props_and_filters_score_as_osworlds_compare_table(tmp_path, sheet, dims, filters, props):
    table = reference("table")
    result = _laid_out(tmp_path / "result.xlsx", sheet, dims[0], filters[0])
    gold = _laid_out(tmp_path / "gold.xlsx", sheet, dims[1], filters[1])
    for rule in ({"type": "row_props", "props": [p for p in props if p != "width"]},
                 {"type": "col_props", "props": [p for p in props if p != "height"]}, {"type": "filter"}):
        rule = {**rule, "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}
        for books in ((result, gold), (result, result)):
            assert compare_table(*books, rules=[rule]) == table.compare_table(*books, rules=[rule]), rule


VALIDATIONS = st.lists(st.fixed_dictionaries({
    "type": st.sampled_from(["list", "whole", "decimal"]),
    "formula1": st.sampled_from(['"Yes,No"', '"a,b,c"', "1", "10"]),
    "operator": st.sampled_from([None, "between", "greaterThan"]),
    "sqref": st.sampled_from(["B2:B4", "C2:C3", "B2:C4", "A1"]),
}), max_size=3)
DV_RULES = st.lists(st.dictionaries(st.sampled_from(["type", "formula1", "operator", "ranges"]), st.just(None),
                                    min_size=1, max_size=3), min_size=1, max_size=2)


@pytest.mark.slow  # a long property search over real files
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sheet=SHEETS, validations=VALIDATIONS, wanted=DV_RULES, data=st.data())
def test_data_validation_scores_as_osworlds_compare_table(tmp_path, sheet, validations, wanted, data):
    """With the value rules its task files use on validations: eq, str_set_eq and str_list_eq on a list's
    choices, range.XY on a bound, spreadsheet_range on the cells it covers."""
    from openpyxl.worksheet.datavalidation import DataValidation

    table = reference("table")
    path = tmp_path / "book.xlsx"
    _book(path, sheet)
    wb = openpyxl.load_workbook(path)
    for v in validations:
        dv = DataValidation(type=v["type"], formula1=v["formula1"], operator=v["operator"])
        dv.add(v["sqref"])
        wb["Sheet1"].add_data_validation(dv)
    wb.save(path)
    rules = {"type": st.just({"method": "eq", "ref": data.draw(st.sampled_from(["list", "whole"]))}),
             "operator": st.sampled_from([{"method": "eq", "ref": None}, {"method": "eq", "ref": "between"}]),
             "formula1": st.sampled_from([{"method": "str_set_eq", "ref": ["No", "Yes"]},
                                          {"method": "str_list_eq", "ref": ["a", "b", "c"]},
                                          {"method": "eq", "ref": "1"}, {"method": "re", "ref": "Yes"}]),
             "ranges": st.sampled_from([{"method": "spreadsheet_range", "ref": ["B2:B3", "B2:B4"]},
                                        {"method": "spreadsheet_range", "ref": ["C2", "A1:C4"]}])}
    dv_props = [{k: data.draw(rules[k]) for k in props} for props in wanted]
    rule = {"type": "data_validation", "sheet_idx": "RNSheet1", "dv_props": dv_props}
    assert compare_table(str(path), str(path), rules=[rule]) == table.compare_table(str(path), str(path), rules=[rule])


def test_the_evaluator_runs_record_is_the_reference_these_tests_check_against():
    """run.json's `scored_as` names the desktop-env version that setup_env.sh installs as the reference."""
    import importlib.metadata

    from cua_cli.osworld import OSWORLD_EVALUATOR

    pinned = re.search(r'^OSWORLD_REFERENCE="?([\w.]+)', (ROOT / "scripts" / "setup_env.sh").read_text(), re.M)
    assert pinned and OSWORLD_EVALUATOR == f"OSWorld desktop-env {pinned.group(1)}"
    assert importlib.metadata.version("desktop-env") == pinned.group(1)
