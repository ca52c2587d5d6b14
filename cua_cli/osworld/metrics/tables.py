"""OSWorld's spreadsheet metric, `compare_table(result, expected, rules=[...])`, for the rules cua
implements (RULES): a task whose rules need another is unsupported, never scored by a guess.

Each rule passes or the score is 0; all passing is 1. Sheets are named as OSWorld names them:
"RI0"/"EI0" (the result's or the expected book's first sheet), "RNSheet1"/"ENSheet1" (by name),
or a bare index into the result. Values are read the ways OSWorld reads them, so that scores
match its own: `sheet_data` compares pandas' DataFrames of `read_excel` (rounded to `precision`
digits), `sheet_print` the CSV that the task's postconfig printed beside the book, `sheet_fuzzy`
and `check_cell`'s value the cell's cached value in the file's XML, `sparkline` the sparklines in
the sheet's XML, the rest (charts, pivot tables, cell styles, panes, zoom) openpyxl's view; `style`
applies conditional formats, their formulas computed by the `formulas` package as OSWorld's are.

`compare_conference_city_in_order` is OSWorld's check of one task's column of cities.

pandas (OSWorld's 2.2 line), openpyxl and formulas are the `office` extra, imported when a table
is scored; without them a task that needs this metric is unsupported (support.py).
A result the agent left unreadable, or one on which OSWorld's reading fails, scores 0; a rule or
expected book that is broken raises (the evaluator's EvalError).
"""

import itertools
import os
import re
import zipfile
from typing import Any, Optional
from xml.etree import ElementTree

from ..registry import Extra
from .ooxml import checked
from .values import match_value, similarity

RULES = ("sheet_name", "sheet_data", "sheet_print", "sheet_fuzzy", "freeze", "zoom", "check_cell", "chart",
         "pivot_table", "row_props", "col_props", "filter", "data_validation", "style", "sparkline")
CELL_STYLES = ("number_format", "font_name", "font_family", "font_color", "font_bold", "font_italic",
               "font_underline", "font_size", "fill_type", "bgcolor", "fgcolor", "hyperlink", "merge")
MAX_CSV_BYTES = 256 << 20
_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_COORDINATE = re.compile(r"[A-Z]{1,3}[1-9][0-9]{0,6}")


def unsupported_rules(options) -> list[str]:
    """What a compare_table `options` asks for that cua does not implement: rule types, and
    check_cell's cell properties ("rule 'chart'", "cell property 'border'")."""
    rules = options.get("rules") if isinstance(options, dict) else None
    if not isinstance(rules, list):
        return []  # malformed options are the task's error, raised when it is scored
    missing = []
    for r in rules:
        if not isinstance(r, dict):
            continue
        if r.get("type") not in RULES:
            missing.append(f"rule {r.get('type')!r}")
        elif r["type"] == "check_cell" and isinstance(r.get("props"), dict):
            missing += [f"cell property {p!r}" for p in r["props"] if p != "value" and p not in CELL_STYLES]
        elif r["type"] == "style" and isinstance(r.get("props"), list):
            missing += [f"cell property {p!r}" for p in r["props"] if p not in CELL_STYLES]
    return sorted(set(missing))


class _Books:
    """The result and expected books, each as a path, a pandas ExcelFile and an openpyxl Workbook."""

    def __init__(self, result: str):
        self.paths, self.xl, self.frames, self.names, self.cells = {}, {}, {}, {}, {}
        self.add("R", result)

    def add(self, book: str, path: str) -> None:
        import openpyxl
        import pandas as pd

        self.paths[book] = path
        self.xl[book] = openpyxl.load_workbook(checked(path))
        self.frames[book] = pd.ExcelFile(path)
        self.names[book] = self.frames[book].sheet_names

    def sheet(self, index) -> tuple[str, str]:
        """(which book, "R" or "E"; the sheet's name, "" for an index past its last sheet)."""
        if isinstance(index, int) and not isinstance(index, bool):
            return "R", _nth(self.names["R"], index)
        if not isinstance(index, str) or index[:2] not in ("RI", "RN", "EI", "EN"):
            raise ValueError(f"sheet index {index!r} is none of RI<n>, RN<name>, EI<n>, EN<name>")
        book = index[0]
        if book not in self.names:
            raise ValueError(f"sheet index {index!r} names the expected book, and the task has none")
        if index[1] == "N":
            return book, index[2:]
        try:
            return book, _nth(self.names[book], int(index[2:]))
        except ValueError:
            raise ValueError(f"sheet index {index!r}: not a number after {index[:2]}") from None

    def frame(self, index):
        import pandas as pd

        book, name = self.sheet(index)
        try:
            return pd.read_excel(self.frames[book], name)
        except Exception:  # OSWorld: a sheet that cannot be read is "no sheet"
            return None

    def worksheet(self, index):
        book, name = self.sheet(index)
        return self.xl[book][name] if name in self.xl[book].sheetnames else None

    def printed(self, index) -> Optional[list[str]]:
        """The sheet's lines as LibreOffice printed them to `<book>-<sheet>.csv`, last line first,
        trailing blank lines left out (OSWorld compares them so); None when there is no such file."""
        book, name = self.sheet(index)
        csv_path = f"{os.path.splitext(self.paths[book])[0]}-{name}.csv"
        try:
            if os.path.getsize(csv_path) > MAX_CSV_BYTES:
                raise ValueError(f"{csv_path} is larger than {MAX_CSV_BYTES} bytes")
            with open(csv_path, encoding="utf-8", errors="surrogateescape") as f:
                lines = [line.strip() for line in reversed(f.read().splitlines())]
        except OSError:
            return None
        return list(itertools.dropwhile(lambda line: not line, lines))

    def cell_value(self, index, coordinate: str):
        return self.value(*self.sheet(index), coordinate)

    def value(self, book: str, name: str, coordinate: str):
        """read_cell_value's value, each sheet's XML read once."""
        if not _COORDINATE.fullmatch(coordinate):
            raise ValueError(f"cell {coordinate!r} is no cell reference")
        if (book, name) not in self.cells:
            self.cells[book, name] = sheet_cell_values(self.paths[book], name)
        cells = self.cells[book, name]
        return None if cells is None else cells.get(coordinate)


def compare_table(result, expected=None, **options) -> float:
    import openpyxl  # noqa: F401 - a host without the office extra fails here, not as a score of 0
    import pandas  # noqa: F401

    if not result:
        return 0.0
    try:
        books = _Books(result)
    except Exception:  # the agent left no readable book
        return 0.0
    if expected is not None:
        books.add("E", expected)
    rules = options.get("rules")
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ValueError("compare_table: 'rules' must be a list of objects")
    for rule in rules:
        try:
            passed = _RULES[rule.get("type")](books, rule) if rule.get("type") in _RULES else None
        except _BrokenResult:  # OSWorld's reading fails on the agent's book
            return 0.0
        if passed is None:
            raise ValueError(f"compare_table: rule type {rule.get('type')!r} is not implemented")
        if not passed:
            return 0.0
    return 1.0


class _BrokenResult(Exception):
    """The agent's book is one on which OSWorld's rule fails (the expected book's failure raises)."""


def _guarded(books: "_Books", index, read):
    """read(book, sheet name) of the sheet `index` names; an exception on the agent's book is
    _BrokenResult, on the expected book it raises as it is."""
    book, name = books.sheet(index)
    try:
        return read(book, name)
    except ImportError:  # a library of the office extra missing: the host's, not the agent's
        raise
    except Exception as e:
        if book == "R":
            raise _BrokenResult() from e
        raise


def _sheet_name(books: _Books, rule: dict) -> bool:
    return books.names["R"] == books.names.get("E")


def _sheet_data(books: _Books, rule: dict) -> bool:
    digits = rule.get("precision", 4)
    first = books.frame(rule["sheet_idx0"])
    if first is None:
        return False
    second = _needed(books.frame(rule["sheet_idx1"]), rule["sheet_idx1"])
    return bool(first.round(digits).equals(second.round(digits)))


def _sheet_print(books: _Books, rule: dict) -> bool:
    first = books.printed(rule["sheet_idx0"])
    if first is None:
        return False
    second = books.printed(rule["sheet_idx1"])
    if second is not None and rule.get("ignore_case", False):
        first, second = [s.lower() for s in first], [s.lower() for s in second]
    return first == second


def _sheet_fuzzy(books: _Books, rule: dict) -> bool:
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.cell_range import MultiCellRange

    passed = True
    for part in rule["rules"]:
        for cells in MultiCellRange(part["range"]):
            for row, column in cells.cells:
                coordinate = f"{get_column_letter(column)}{row}"
                a = _normalised(str(books.cell_value(rule["sheet_idx0"], coordinate)), part)
                b = _normalised(str(books.cell_value(rule["sheet_idx1"], coordinate)), part)
                kind = part["type"]
                if kind == "includes":
                    passed = passed and b in a
                elif kind == "included_by":
                    passed = passed and a in b
                elif kind == "fuzzy_match":
                    passed = passed and 100 * similarity(a, b) >= part.get("threshold", 85.0)
                elif kind == "exact_match":
                    passed = passed and a == b
                else:
                    raise ValueError(f"sheet_fuzzy: match type {kind!r} is not one of includes, included_by, "
                                     "fuzzy_match, exact_match")
    return passed


def _normalised(value: str, part: dict) -> str:
    for old, new in part.get("normalization", []):
        value = value.replace(old, new)
    if "trim_leadings" in part:
        value = value.lstrip(part["trim_leadings"])
    if "trim_trailings" in part:
        value = value.rstrip(part["trim_trailings"])
    if "ignore_chars" in part:
        value = "".join(c for c in value if c not in set(part["ignore_chars"]))
    return value.lower() if part.get("ignore_case", False) else value


def _freeze(books: _Books, rule: dict) -> bool:
    first = books.worksheet(rule["sheet_idx0"])
    if first is None:
        return False
    return first.freeze_panes == _needed(books.worksheet(rule["sheet_idx1"]), rule["sheet_idx1"]).freeze_panes


def _zoom(books: _Books, rule: dict) -> bool:
    sheet = books.worksheet(rule["sheet_idx"])
    return sheet is not None and match_value(sheet.sheet_view.zoomScale or 100.0, rule)


def _check_cell(books: _Books, rule: dict) -> bool:
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    coordinate = rule["coordinate"]
    cell = sheet[coordinate]
    for prop, value_rule in rule["props"].items():
        value = books.cell_value(rule["sheet_idx"], coordinate) if prop == "value" else _cell_style(prop, cell)
        if not match_value(value, value_rule):
            return False
    return True


def _cell_style(prop: str, cell) -> Any:
    """A style property of a cell as OSWorld's check_cell reads it: None for an empty cell (and for a
    number format of a cell that holds no number), and None for one it cannot read (a font without a
    colour), which the rule then judges."""
    if prop not in CELL_STYLES:
        raise ValueError(f"check_cell: style {prop!r} is not one of {', '.join(CELL_STYLES)}")
    try:
        return _read_style(prop, cell)
    except Exception:  # noqa: BLE001 - whatever openpyxl raises on a style it lacks, OSWorld reads as None
        return None


def _read_style(prop: str, cell, dxf=None) -> Any:
    """A style property of a cell as OSWorld reads it, or as the differential style `dxf` of a
    conditional format that applies to it sets it; an exception where OSWorld's reading fails
    (a font without a colour), except for fills, which are None then."""
    if prop == "merge":
        from openpyxl.cell.cell import MergedCell

        return isinstance(cell, MergedCell)
    styled = dxf or cell
    if prop == "fill_type":
        try:
            return styled.fill.tagname
        except Exception:  # noqa: BLE001 - no fill (a differential style without one): OSWorld reads None
            return None
    if prop in ("bgcolor", "fgcolor"):
        # a cell's solid fill colour is its fgColor, a differential style's its bgColor: OSWorld reads those for both
        try:
            return dxf.fill.bgColor.rgb if dxf is not None else cell.fill.fgColor.rgb
        except Exception:  # noqa: BLE001 - as above
            return None
    if cell.value is None:
        return None
    if prop == "number_format":
        if cell.data_type != "n":
            return None
        return cell.number_format if dxf is None else dxf.numFmt.formatCode
    if prop == "hyperlink":
        return cell.hyperlink or ""
    if prop == "font_color":
        return styled.font.color.rgb
    return getattr(styled.font, prop[len("font_"):])  # name, family, bold, italic, underline, size


def _chart(books: _Books, rule: dict) -> bool:
    return _charts(books, rule["sheet_idx0"], rule) == _charts(books, rule["sheet_idx1"], rule)


def _charts(books: _Books, index, rule: dict) -> dict:
    """The sheet's charts as OSWorld sees them: keyed by their series' data and category ranges, each
    with the `chart_props` the rule asks for."""
    sheet = books.worksheet(index)
    if sheet is None:
        return {}
    props = set(rule.get("chart_props", []))
    out = {}
    for chart in sheet._charts:
        info = {}
        for prop in ("title", "xtitle", "ytitle", "ztitle"):
            if prop in props:
                owner = chart if prop == "title" else getattr(chart, f"{prop[0]}_axis", None)
                try:
                    info[prop] = owner.title.tx.rich.p[0].r[0].t
                except Exception:  # no such title, or not rich text
                    info[prop] = None
        if "legend" in props:
            info["legend"] = chart.legend.position if chart.legend is not None else None
        if "anchor" in props:  # OSWorld's list, the "to" row twice and the "from" row never
            a = chart.anchor
            info["anchor"] = [a.editAs, a._from.col, a.to.row, a.to.col, a.to.row]
        for prop, value in (("width", lambda: chart.width), ("height", lambda: chart.height),
                            ("type", lambda: chart.tagname), ("direction", lambda: chart.barDir)):
            if prop in props:
                info[prop] = value()
        out[";".join(f"{_ref(s.val)},{_ref(s.cat)}" for s in chart.series)] = info
    return out


def _ref(data) -> str:
    """A series' data or categories as the formula of the range they come from ("" when none)."""
    for kind in ("numRef", "strRef"):
        ref = getattr(data, kind, None)
        if hasattr(ref, "f"):
            return f"{ref.f}"
    return ""


def _pivot_table(books: _Books, rule: dict) -> bool:
    return _pivots(books, rule["sheet_idx0"], rule) == _pivots(books, rule["sheet_idx1"], rule)


def _pivots(books: _Books, index, rule: dict) -> dict:
    """The sheet's pivot tables as OSWorld sees them: keyed by their source range (cut to the
    fields that select items), each with the `pivot_props` the rule asks for."""
    from openpyxl.utils import coordinate_to_tuple

    sheet = books.worksheet(index)
    if sheet is None:
        return {}
    props = set(rule.get("pivot_props", []))
    out = {}
    for pivot in sheet._pivots:
        chosen = [[(item.h, item.x) for item in field.items if item.x is not None] for field in pivot.pivotFields]
        left = next((i for i, c in enumerate(chosen) if c), len(chosen))
        right = next((i for i, c in enumerate(reversed(chosen[left:])) if c), 0)
        selection = chosen[left:len(chosen) - right]
        source = pivot.cache.cacheSource
        first, last = source.worksheetSource.ref.split(":")
        (r1, c1), (r2, c2) = coordinate_to_tuple(first), coordinate_to_tuple(last)
        info = {}
        for prop, attr in (("name", "name"), ("show_total", "visualTotals"), ("show_empty_row", "showEmptyRow"),
                           ("show_empty_col", "showEmptyCol"), ("show_headers", "showHeaders"),
                           ("location", "location")):
            if prop in props:
                info[prop] = getattr(pivot, attr)
        if "filter" in props or "selection" in props:
            info["selection"] = selection if "ordered" in props else [set(c) for c in selection]
        if "filter" in props:
            info["filter_fields"] = {f.fld for f in pivot.pageFields}
        if "col_fields" in props:
            info["col_fields"] = [f.x - left for f in pivot.colFields]
        if "row_fields" in props:
            info["row_fields"] = [f.x - left for f in pivot.rowFields]
        if "data_fields" in props:
            named = "data_fields_name" in props
            info["data_fields"] = [f"{f.fld - left:d};{f.name if named else ''};{f.subtotal};{f.showDataAs}"
                                   for f in pivot.dataFields]
        out[f"{source.type};{(r1, c1 + left)}:{(r2, c2 - right)};{source.worksheetSource.sheet}"] = info
    return out


def _row_props(books: _Books, rule: dict) -> bool:
    return _dimensions(books, rule["sheet_idx0"], "row", rule) == _dimensions(books, rule["sheet_idx1"], "row", rule)


def _col_props(books: _Books, rule: dict) -> bool:
    return (_dimensions(books, rule["sheet_idx0"], "column", rule)
            == _dimensions(books, rule["sheet_idx1"], "column", rule))


def _dimensions(books: _Books, index, axis: str, rule: dict) -> dict:
    """The `props` (openpyxl's names: height, width, hidden, outlineLevel, ...) of every row or column
    the sheet describes; {} for a sheet that is not there."""
    sheet = books.worksheet(index)
    if sheet is None:
        return {}
    props = set(rule.get("props", []))
    held = sheet.row_dimensions if axis == "row" else sheet.column_dimensions
    try:
        return {key: {p: getattr(dims, p) for p in props} for key, dims in held.items()}
    except AttributeError as e:
        raise ValueError(f"{axis}_props: {e}") from None


def _filter(books: _Books, rule: dict) -> bool:
    return _filters(books, rule["sheet_idx0"]) == _filters(books, rule["sheet_idx1"])


def _filters(books: _Books, index) -> dict:
    """The sheet's autofilter as OSWorld compares it: its range, each filtered column (by column id)
    with its buttons, values and custom conditions, and its sort state; {} for a sheet not there."""
    sheet = books.worksheet(index)
    if sheet is None:
        return {}
    auto = sheet.auto_filter
    columns = []
    for column in auto.filterColumn:
        entry = {"col_id": column.colId, "hidden_button": column.hiddenButton, "show_button": column.showButton}
        if column.filters is not None:
            entry.update(filters_blank=column.filters.blank, filters=set(column.filters.filter))
        if column.customFilters is not None:
            entry.update(custom_filters_op=column.customFilters._and,
                         custom_filters={(c.operator, c.val) for c in column.customFilters.customFilter})
        columns.append(entry)
    out = {"ref": auto.ref, "filter_column": sorted(columns, key=lambda entry: entry["col_id"])}
    sort = auto.sortState
    if sort is not None:
        out["sort_state"] = {
            "sort": sort.columnSort, "case": sort.caseSensitive, "method": sort.sortMethod, "ref": sort.ref,
            "condition": [{"descending": c.descending, "key": c.sortBy, "ref": c.ref, "custom_list": c.customList,
                           "dxf_id": c.dxfId, "icon": c.iconSet, "iconid": c.iconId} for c in sort.sortCondition]}
    return out


def _data_validation(books: _Books, rule: dict) -> bool:
    """At least as many validations as `dv_props`, and each validation matched by one of them (all
    its attributes' rules: type, formula1, operator, ranges by `spreadsheet_range`, ...)."""
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    validations, wanted = sheet.data_validations.dataValidation, rule["dv_props"]
    return len(validations) >= len(wanted) and all(
        any(all(match_value(getattr(dv, attribute), r) for attribute, r in props.items()) for props in wanted)
        for dv in validations)


def _style(books: _Books, rule: dict) -> bool:
    """Every cell's `props` alike in both sheets, conditional formats applied: where a format's
    condition holds for a cell, the properties its differential style sets replace the cell's."""
    props = rule.get("props", [])
    if not isinstance(props, list) or any(p not in CELL_STYLES for p in props):
        raise ValueError(f"style: props must be a list of {', '.join(CELL_STYLES)}")
    first = _guarded(books, rule["sheet_idx0"], lambda book, name: _styles(books, book, name, props))
    return first == _guarded(books, rule["sheet_idx1"], lambda book, name: _styles(books, book, name, props))


# cua's bounds, where OSWorld's reading would run out of time or memory: a sheet or an argument range
# of more cells, and formulas with functions that build values whose size a formula picks (a format's
# formula is the agent's), are refused: the agent's book scores 0, the expected book raises
MAX_STYLED_CELLS = 2_000_000
_UNBOUNDED = re.compile(r"\b(REPT|SEQUENCE|MUNIT|RANDARRAY|MAKEARRAY|EXPAND)\s*\(", re.IGNORECASE)
_ABSOLUTE = re.compile(r"\$([A-Z]{1,3})\$(\d+)(?::\$([A-Z]{1,3})\$(\d+))?")
_TEXT_CONDITIONS = {"expression", "containsText", "notContainsText", "endsWith", "beginsWith", "containsErrors",
                    "notContainsErrors"}


def _styles(books: _Books, book: str, name: str, props: list) -> dict:
    """{coordinate: [prop values]} for every cell of the sheet's range ({} for no such sheet), then
    for the cells each conditional format's rule selects, as OSWorld's load_xlsx_styles finds them:

    - a rule's formulas are compiled with the `formulas` package (a rule with one it cannot parse
      is skipped) and called with the cell's value, then the values of the absolute ranges in it;
    - OSWorld quirk: a single absolute cell ($B$1) in a formula makes OSWorld's reading fail (it
      reads it as the range "B1:"), so cua's does too;
    - `cellIs` compares the value with its formulas' values; other kinds than these and the text
      conditions test nothing of their own: OSWorld quirk, they test with the condition of the last
      rule that had one, which reads its operator and arguments as the latest rule left them;
    - OSWorld quirk: a cell selected by a rule without a formula makes OSWorld's reading fail;
    - OSWorld quirk: after more than 50 empty cells in a rule's ranges (all its ranges counted, not
      contiguous ones), each further range is left at its first empty cell.
    """
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.cell_range import CellRange

    try:
        sheet = books.xl[book][name]
    except KeyError:
        return {}
    if sheet.max_row * sheet.max_column > MAX_STYLED_CELLS:
        raise ValueError(f"sheet {name!r} spans more than {MAX_STYLED_CELLS} cells")
    out = {c.coordinate: [_read_style(p, c) for p in props] for column in sheet.iter_cols() for c in column}
    formats = list(sheet.conditional_formatting)
    if not formats:
        return out
    import formulas

    parser = formulas.Parser()
    state: dict = {"test": None}

    def value(coordinate: str):
        return books.value(book, name, coordinate)

    def holds(v):
        if state["test"] == "expression":
            return state["condition"](v, *state["arguments"])
        if state["test"] == "cellIs":
            return _cell_is(state["operator"], v, state["references"])
        raise NameError("no condition yet")  # OSWorld's test is not defined yet: the cell does not match

    for fmt in formats:
        for cf in fmt.rules:
            compiled, arguments, broken = [], [], False
            for text in cf.formula:
                if _UNBOUNDED.search(text):
                    raise ValueError(f"conditional format formula {text[:80]!r} may build a value without bound")
                try:
                    function = parser.ast("=" + text)[1].compile()
                except Exception:  # noqa: BLE001 - a formula formulas cannot parse: the rule is skipped
                    broken = True
                    break
                args = []
                for c1, r1, c2, r2 in _ABSOLUTE.findall(text):
                    cell_range = CellRange(f"{c1}{r1}:{c2}{r2}")  # "B1:" for a single cell raises (the quirk)
                    if cell_range.size["rows"] * cell_range.size["columns"] > MAX_STYLED_CELLS:
                        raise ValueError(f"conditional format formula {text[:80]!r} reads too many cells")
                    cells = cell_range.cells
                    args.append([value(f"{get_column_letter(col)}{row}") for row, col in cells])
                state["arguments"] = args
                compiled.append(function)
                arguments.append(args)
            if broken:
                continue
            if cf.type in _TEXT_CONDITIONS:
                state.update(test="expression", condition=compiled[0], arguments=arguments[0])
            elif cf.type == "cellIs":
                state["operator"] = cf.operator
                try:
                    references = [f() for f in compiled]
                except Exception:  # noqa: BLE001 - values formulas cannot compute: the rule is skipped
                    continue
                state.update(test="cellIs", references=references)
            active, empty = [], 0
            for cell_range in fmt.cells:
                for row, col in cell_range.cells:
                    cell = sheet.cell(row=row, column=col)
                    v = value(f"{get_column_letter(col)}{row}")
                    if v is None:
                        empty += 1
                        if empty > 50:
                            break
                        continue
                    try:
                        selected = holds(v)
                    except Exception:  # noqa: BLE001 - a condition that fails on the value does not hold
                        selected = False
                    if selected:  # (an array of several values fails here, as in OSWorld)
                        if not cf.formula:
                            # OSWorld quirk: its log line for a selected cell reads the rule's first
                            # formula, and fails for a rule without one (top10, duplicateValues)
                            raise IndexError("a selected cell of a conditional format without a formula")
                        active.append(cell)
            for cell in active:
                out[cell.coordinate] = [_read_style(p, cell, cf.dxf) for p in props]
    return out


def _cell_is(operator: str, v, references: list):
    """A cellIs rule's comparison; False for values that do not compare, missing references or an
    operator OSWorld does not know."""
    try:
        if operator == "lessThanOrEqual":
            return v <= references[0]
        if operator == "lessThan":
            return v < references[0]
        if operator == "equal":
            return v == references[0]
        if operator == "greaterThanOrEqual":
            return v >= references[0]
        if operator == "notEqual":
            return v != references[0]
        if operator == "greaterThan":
            return v > references[0]
        if operator in ("between", "notBetween"):
            low, high = min(references), max(references)
            return (v >= low and v <= high) if operator == "between" else (v < low or v > high)
    except (TypeError, IndexError):
        return False
    return False


def _sparkline(books: _Books, rule: dict) -> bool:
    first = _guarded(books, rule["sheet_idx0"], lambda book, name: _sparklines(books.paths[book], name))
    return first == _guarded(books, rule["sheet_idx1"], lambda book, name: _sparklines(books.paths[book], name))


_X14 = "{http://schemas.microsoft.com/office/spreadsheetml/2009/9/main}"
_XM = "{http://schemas.microsoft.com/office/excel/2006/main}"


def _sparklines(path: str, sheet: str) -> dict:
    """{the cell a sparkline is in (its sqref): the range it draws (its formula)} for the sheet (found
    by its sheetId, as read_cell_value finds it); a sheet the book does not name, or whose part is
    missing, raises (OSWorld fails there). Values are the elements' text, stripped, None when empty
    (as OSWorld's xmltodict reads them); an element with attributes or children is kept whole, and
    as a key fails."""
    with zipfile.ZipFile(checked(path)) as z:
        workbook = ElementTree.fromstring(z.read("xl/workbook.xml"))
        ids = {s.get("name"): s.get("sheetId") for group in workbook.iter(f"{_MAIN}sheets")
               for s in group.findall(f"{_MAIN}sheet")}
        root = ElementTree.fromstring(z.read(f"xl/worksheets/sheet{ids[sheet]}.xml"))
    out = {}
    for line in root.iter(f"{_X14}sparkline"):
        out[_xml_value(line, f"{_XM}sqref")] = _xml_value(line, f"{_XM}f")
    return out


def _xml_value(parent, tag: str):
    children = [c for c in parent if c.tag == tag]
    if not children:
        raise KeyError(tag)
    values = [_element_value(c) for c in children]
    return values[0] if len(values) == 1 else values


def _element_value(element):
    if element.attrib or len(element):
        return {"@": dict(element.attrib), "children": [(c.tag, _element_value(c)) for c in element],
                "#text": (element.text or "").strip() or None}
    return (element.text or "").strip() or None


_RULES = {"sheet_name": _sheet_name, "sheet_data": _sheet_data, "sheet_print": _sheet_print,
          "sheet_fuzzy": _sheet_fuzzy, "freeze": _freeze, "zoom": _zoom, "check_cell": _check_cell,
          "chart": _chart, "pivot_table": _pivot_table, "row_props": _row_props, "col_props": _col_props,
          "filter": _filter, "data_validation": _data_validation, "style": _style, "sparkline": _sparkline}


def read_cell_value(book: str, sheet: str, coordinate: str):
    """A cell's cached value as the file stores it (formulas are not evaluated): a float for a
    number; the text of a shared, formula or inline string (openpyxl and pandas write inline ones);
    an error cell's code (#DIV/0!); None for no such cell. An inline string whose text element has
    attributes (xml:space, for text with leading or trailing spaces) is None: OSWorld's XML reading
    turns it into a mapping that equals no text.

    As OSWorld finds a sheet: by its sheetId, as `xl/worksheets/sheet<id>.xml`."""
    if not _COORDINATE.fullmatch(coordinate):
        raise ValueError(f"cell {coordinate!r} is no cell reference")
    cells = sheet_cell_values(book, sheet)
    return None if cells is None else cells.get(coordinate)


def sheet_cell_values(book: str, sheet: str) -> Optional[dict]:
    """{coordinate: read_cell_value's value} for every cell the sheet's XML holds (the first of a
    coordinate written twice); None when there is no such sheet."""
    try:
        with zipfile.ZipFile(checked(book)) as z:
            strings = _shared_strings(z)
            workbook = ElementTree.fromstring(z.read("xl/workbook.xml"))
            ids = {s.get("name"): s.get("sheetId") for s in workbook.iter(f"{_MAIN}sheet")}
            if sheet not in ids:
                return None
            root = ElementTree.fromstring(z.read(f"xl/worksheets/sheet{ids[sheet]}.xml"))
    except (zipfile.BadZipFile, KeyError):
        return None
    out: dict = {}
    for row in root.iter(f"{_MAIN}row"):
        for cell in row.findall(f"{_MAIN}c"):
            if cell.get("r") not in out:
                out[cell.get("r")] = _cached_value(cell, strings)
    return out


def _cached_value(cell, strings: list):
    kind, value = cell.get("t", "n"), cell.findtext(f"{_MAIN}v")
    try:
        if kind == "n":
            return float(value)
        if kind == "s":
            return strings[int(value)]
        if kind in ("str", "e"):
            return value
        if kind == "inlineStr":
            text = cell.find(f"{_MAIN}is/{_MAIN}t")
            return None if text is None or text.attrib else text.text
    except (TypeError, ValueError, IndexError):
        return None
    return None


def _shared_strings(z: zipfile.ZipFile) -> list[str]:
    try:
        root = ElementTree.fromstring(z.read("xl/sharedStrings.xml"))
    except KeyError:
        return []
    texts = [[t.text for t in si.iter(f"{_MAIN}t")] for si in root.findall(f"{_MAIN}si")]
    if any(text is None for parts in texts for text in parts):
        return []  # OSWorld's join fails on an empty text element, and it then reads no shared string at all
    return ["".join(parts) for parts in texts]


def _nth(names: list, i: int) -> str:
    return names[i] if -len(names) <= i < len(names) else ""


def _needed(sheet, index):
    if sheet is None:
        raise ValueError(f"sheet {index!r} cannot be read")
    return sheet


def compare_conference_city_in_order(result, expected=None) -> float:
    """The agent's active sheet names, in C2:C22, the cities of `expected.expected` in that order:
    each cell holds its entry, or one of its entry's alternatives (a list), as a substring. A cell
    that holds no text scores 0."""
    import openpyxl

    wanted = expected.get("expected") if isinstance(expected, dict) else None
    if not (isinstance(wanted, list) and len(wanted) >= 21 and all(
            isinstance(w, str) or (isinstance(w, list) and all(isinstance(x, str) for x in w)) for w in wanted)):
        raise ValueError("compare_conference_city_in_order: 'expected' must list 21 cities (texts or lists of texts)")
    if not result:
        return 0.0
    try:
        cities = [cell.value for row in openpyxl.load_workbook(checked(result)).active["C2:C22"] for cell in row]
    except Exception:  # the agent left no readable book
        return 0.0
    for city, want in zip(cities, wanted):
        if not isinstance(city, str):
            return 0.0  # OSWorld's substring test fails on a number or an empty cell, and it scores that 0
        if not any(w in city for w in ([want] if isinstance(want, str) else want)):
            return 0.0
    return 1.0


METRICS = {"compare_table": compare_table, "compare_conference_city_in_order": compare_conference_city_in_order}
EXTRA = Extra("office", {"pandas": "pandas", "openpyxl": "openpyxl", "formulas": "formulas"})
