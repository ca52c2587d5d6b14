"""cua's OSWorld Writer, Impress and Calc metrics and Impress getters against OSWorld's own code
(desktop-env 1.0.2, see helpers/osworld_reference.py), on files neither was written for: documents,
.odt files, decks, LibreOffice settings and books that python-docx, odfpy, python-pptx and openpyxl
write from generated specs, then the agent's copy changed in one run, cell or shape, or broken
(empty, truncated, not a zip, missing). With the options OSWorld's task files pass. Where OSWorld's
code fails on the agent's file, cua's score must be 0; elsewhere the two scores must be equal."""

import copy
import io
import math
import zipfile

import pytest
from docx import Document
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.shared import Pt, RGBColor
from helpers.osworld_reference import reference_apart
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from cua_cli.osworld.metrics import documents

CRASH = object()


def docs_ref():
    return reference_apart("metrics.docs", ("easyocr",))


def theirs_of(fn, *args, **kwargs):
    try:
        value = fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - OSWorld's failure, to compare with cua's 0
        return CRASH
    return 0.0 if value is None else float(value)


def assert_same(ours, theirs, what):
    if theirs is CRASH:
        assert ours == 0.0, what
    else:
        assert math.isclose(ours, theirs, abs_tol=1e-9), (what, ours, theirs)


def png(colour, size=(3, 2)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, "PNG")
    return buf.getvalue()


PNGS = [png((255, 0, 0)), png((0, 0, 255)), png((0, 0, 255), (4, 2))]

# -- documents

WORDS = ["", "apple", "Egg", "banana", "TRAIN", "References", "a  b", "x\ty z", "Ref one 2020", "Ref two 2021",
         "one two three four", "08:00:00, G1, S1, 2", "09:00:00, G2, S1, 3", "  ", "Page 7"]
COLOURS = [None, (255, 0, 0), (0, 0, 255), (250, 10, 10), (0, 128, 0), (20, 20, 240)]
RUN = st.fixed_dictionaries({
    "text": st.sampled_from(WORDS), "bold": st.sampled_from([None, True, False]),
    "italic": st.sampled_from([None, True]),
    "strike": st.sampled_from([None, True, False]), "subscript": st.sampled_from([None, True, False]),
    "font": st.sampled_from([None, "Times New Roman", "Arial"]), "size": st.sampled_from([None, 12, 14]),
    "colour": st.sampled_from(COLOURS), "highlight": st.sampled_from([None, "yellow", "none"]),
    "page_break": st.booleans(), "image": st.sampled_from([None, None, None, 0, 1, 2]),
})
TAB = st.tuples(st.sampled_from([0, 720000, 1440000, 1450000]),
                st.sampled_from([WD_TAB_ALIGNMENT.LEFT, WD_TAB_ALIGNMENT.CENTER, WD_TAB_ALIGNMENT.RIGHT,
                                 WD_TAB_ALIGNMENT.CLEAR]))
PARAGRAPH = st.fixed_dictionaries({
    "runs": st.lists(RUN, max_size=3), "align": st.sampled_from([None, "center", "left", "right"]),
    "spacing": st.sampled_from([None, 1.0, 1.5, 2.0]), "tabs": st.lists(TAB, max_size=2),
})
TABLE = st.lists(st.lists(st.lists(RUN, max_size=2), min_size=2, max_size=2), min_size=1, max_size=2)
DOC = st.fixed_dictionaries({
    "paragraphs": st.lists(PARAGRAPH, max_size=5), "tables": st.lists(TABLE, max_size=1),
    "footer": st.sampled_from([None, "Page 3", "no number"]), "sections": st.integers(1, 2),
})
ALIGN = {"center": WD_PARAGRAPH_ALIGNMENT.CENTER, "left": WD_PARAGRAPH_ALIGNMENT.LEFT,
         "right": WD_PARAGRAPH_ALIGNMENT.RIGHT}


def _run(paragraph, spec: dict, image_dir) -> None:
    run = paragraph.add_run(spec["text"])
    run.bold, run.italic = spec["bold"], spec["italic"]
    run.font.strike, run.font.subscript = spec["strike"], spec["subscript"]
    if spec["font"]:
        run.font.name = spec["font"]
    if spec["size"]:
        run.font.size = Pt(spec["size"])
    if spec["colour"]:
        run.font.color.rgb = RGBColor(*spec["colour"])
    if spec["highlight"]:
        from docx.oxml import parse_xml
        from docx.oxml.ns import nsdecls
        run._r.get_or_add_rPr().append(parse_xml(f'<w:highlight {nsdecls("w")} w:val="{spec["highlight"]}"/>'))
    if spec["page_break"]:
        run.add_break(WD_BREAK.PAGE)
    if spec["image"] is not None:
        path = image_dir / f"image{spec['image']}.png"
        path.write_bytes(PNGS[spec["image"]])
        run.add_picture(str(path))


LEAN_STYLES = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:styles xmlns:w="http://schemas.'
               b'openxmlformats.org/wordprocessingml/2006/main"><w:docDefaults><w:rPrDefault><w:rPr/></w:rPrDefault>'
               b'<w:pPrDefault/></w:docDefaults><w:style w:type="paragraph" w:default="1" w:styleId="Normal">'
               b'<w:name w:val="Normal"/></w:style></w:styles>')


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    """python-docx's default document without its 800 kB of styles (which every metric would parse
    again): generated documents open in a tenth of the time."""
    import re

    folder = tmp_path_factory.mktemp("template")
    Document().save(folder / "full.docx")
    lean = folder / "lean.docx"
    dropped = rb"stylesWithEffects|thumbnail|customXml"
    with zipfile.ZipFile(folder / "full.docx") as src, zipfile.ZipFile(lean, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if re.search(dropped, info.filename.encode()):
                continue
            data = src.read(info.filename)
            if info.filename == "word/styles.xml":
                data = LEAN_STYLES
            elif info.filename.endswith(".rels") or info.filename == "[Content_Types].xml":
                data = re.sub(rb"<(Relationship|Override) [^>]*(" + dropped + rb")[^>]*/>", b"", data)
            out.writestr(info, data)
    return str(lean)


def write_doc(path, spec: dict, template: str) -> str:
    d = Document(template)
    for p in spec["paragraphs"]:
        paragraph = d.add_paragraph()
        for r in p["runs"]:
            _run(paragraph, r, path.parent)
        if p["align"]:
            paragraph.alignment = ALIGN[p["align"]]
        if p["spacing"]:
            paragraph.paragraph_format.line_spacing = p["spacing"]
        for position, alignment in p["tabs"]:
            paragraph.paragraph_format.tab_stops.add_tab_stop(position, alignment)
    for t in spec["tables"]:
        table = d.add_table(rows=len(t), cols=2)
        for i, row in enumerate(t):
            for j, runs in enumerate(row):
                cell_paragraph = table.cell(i, j).paragraphs[0]
                for r in runs:
                    _run(cell_paragraph, r, path.parent)
    if spec["sections"] == 2:
        d.add_section()
    if spec["footer"]:
        d.sections[0].footer.paragraphs[0].text = spec["footer"]
    d.save(path)
    return str(path)


DOC_CHANGES = ["same", "same", "run", "text", "drop", "add", "empty", "truncated", "notzip", "missing"]


def _all_runs(spec: dict) -> list:
    out = [r for p in spec["paragraphs"] for r in p["runs"]]
    return out + [r for t in spec["tables"] for row in t for cell in row for r in cell]


def changed_doc(tmp_path, spec: dict, change: str, data, template: str):
    """The agent's document: the gold spec as it is or with one change, or a broken file."""
    path = tmp_path / "result.docx"
    spec = copy.deepcopy(spec)
    runs = _all_runs(spec)
    if change == "run" and runs:
        target = data.draw(st.sampled_from(runs))
        target.update(data.draw(RUN))
    elif change == "text" and runs:
        data.draw(st.sampled_from(runs))["text"] = data.draw(st.sampled_from(WORDS))
    elif change == "drop" and spec["paragraphs"]:
        del spec["paragraphs"][data.draw(st.integers(0, len(spec["paragraphs"]) - 1))]
    elif change == "add":
        spec["paragraphs"].insert(data.draw(st.integers(0, len(spec["paragraphs"]))),
                                  {"runs": [], "align": None, "spacing": None, "tabs": []})
    elif change in ("empty", "truncated", "notzip"):
        write_doc(path, spec, template)
        data_bytes = path.read_bytes()
        path.write_bytes({"empty": b"", "truncated": data_bytes[: len(data_bytes) // 2],
                          "notzip": b"not a document"}[change])
        return str(path)
    elif change == "missing":
        return None
    return write_doc(path, spec, template)


TWO_FILE = [
    ("compare_docx_files", {}), ("compare_docx_files", {"content_only": True}),
    ("compare_docx_files", {"ignore_blanks": False}),
    ("compare_docx_files", {"ignore_case": True, "ignore_blanks": True}),
    ("compare_docx_files", {"ignore_blanks": True, "ignore_case": True, "ignore_order": True}),
    ("compare_docx_files", {"fuzzy_match": True}),
    ("compare_docx_files", {"ignore_blanks": False, "fuzzy_match": True}),
    ("compare_docx_files", {"delete_empty_lines": True, "ignore_blanks": False}),
    ("compare_docx_files_and_ignore_new_lines", {"ignore_blanks": False}),
    ("compare_docx_files_and_ignore_new_lines", {}),
    ("compare_line_spacing", {}), ("compare_insert_equation", {}), ("evaluate_strike_through_last_paragraph", {}),
    ("check_italic_font_size_14", {}), ("evaluate_colored_words_in_tables", {}), ("compare_init_lines", {}),
    ("compare_docx_tables", {}), ("compare_docx_images", {}), ("compare_subscript_contains", {}),
    ("compare_contains_image", {}), ("compare_docx_lines", {}), ("compare_highlighted_text", {}),
    ("check_tabstops", {}), ("check_tabstops", {"word_number_split_by_tabstop": 3, "index": 0}),
    ("check_tabstops", {"word_number_split_by_tabstop": 1, "index": 1}),
    ("compare_references", {"content_only": True, "reference_base_result": 0.92}), ("compare_references", {}),
    ("check_no_duplicates", {}),
]
ONE_FILE = [
    ("has_page_numbers_in_footers", ()), ("is_first_line_centered", ()), ("evaluate_conversion", ()),
    ("evaluate_spacing", ()), ("evaluate_alignment", ()), ("contains_page_break", ({},)),
    ("contains_page_break", ({"page_break_count": 1},)), ("compare_font_names", ({"font_name": "Times New Roman"},)),
]
CASES: dict = {}


def _count(name: str) -> None:
    CASES[name] = CASES.get(name, 0) + 1


def check_documents(result, gold, ref, change) -> None:
    for name, options in TWO_FILE:
        theirs = theirs_of(getattr(ref, name), result, gold, **options)
        assert_same(getattr(documents, name)(result, gold, **options), theirs, (name, options, change))
        _count(name)
    for name, args in ONE_FILE:
        theirs = theirs_of(getattr(ref, name), result, *args)
        assert_same(getattr(documents, name)(result, *args), theirs, (name, args, change))
        _count(name)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=DOC, change=st.sampled_from(DOC_CHANGES), data=st.data())
def test_document_metrics_score_as_osworlds(tmp_path, template, spec, change, data):
    ref = docs_ref()
    gold = write_doc(tmp_path / "gold.docx", spec, template)
    check_documents(changed_doc(tmp_path, spec, change, data, template), gold, ref, change)


@pytest.mark.slow  # a long property search over real files
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=DOC, change=st.sampled_from(DOC_CHANGES), data=st.data())
def test_document_metrics_score_as_osworlds_long(tmp_path, template, spec, change, data):
    ref = docs_ref()
    gold = write_doc(tmp_path / "gold.docx", spec, template)
    check_documents(changed_doc(tmp_path, spec, change, data, template), gold, ref, change)
