"""OSWorld's text-document metric (cua_cli/osworld/documents.py) on real .docx files written by
python-docx: each of its comparisons, and documents the agent broke."""

from docx import Document

from cua_cli.osworld.metrics.documents import (
    compare_docx_files,
    compare_docx_files_and_ignore_new_lines,
    compare_docx_tables,
    compare_line_spacing,
)

TEXT = ["Dear team,", "", "The  meeting moves to Friday.", "Regards"]


def doc(path, paragraphs=TEXT) -> str:
    d = Document()
    for text in paragraphs:
        d.add_paragraph(text)
    d.save(path)
    return str(path)


def test_blank_space_case_and_order(tmp_path):
    gold = doc(tmp_path / "gold.docx")
    assert compare_docx_files(doc(tmp_path / "same.docx"), gold) == 1.0
    # ignore_blanks (the default): white space runs, empty paragraphs included, count as one space
    squeezed = doc(tmp_path / "sq.docx", ["Dear team,", "The meeting moves to Friday.", "Regards"])
    assert compare_docx_files(squeezed, gold) == 1.0
    assert compare_docx_files(squeezed, gold, ignore_blanks=False) == 0.0
    upper = doc(tmp_path / "up.docx", [t.upper() for t in TEXT])
    assert compare_docx_files(upper, gold) == 0.0
    assert compare_docx_files(upper, gold, ignore_case=True) == 1.0
    assert compare_docx_files(upper, gold, ignore_blanks=False, ignore_case=True) == 1.0
    shuffled = doc(tmp_path / "sh.docx", list(reversed(TEXT)))
    assert compare_docx_files(shuffled, gold) == 0.0
    assert compare_docx_files(shuffled, gold, ignore_order=True) == 1.0


def test_content_only_is_a_fuzzy_score(tmp_path):
    gold = doc(tmp_path / "gold.docx")
    close = doc(tmp_path / "close.docx", ["Dear team,", "The meeting moves to Monday.", "Regards"])
    score = compare_docx_files(close, gold, content_only=True)
    assert 0.85 < score < 1.0
    assert compare_docx_files(close, gold) == 0.0


def test_empty_paragraphs_line_spacing_and_tables(tmp_path):
    gold = doc(tmp_path / "gold.docx")
    no_blank = doc(tmp_path / "nb.docx", [t for t in TEXT if t])
    assert compare_docx_files(no_blank, gold, ignore_blanks=False) == 0.0
    assert compare_docx_files_and_ignore_new_lines(no_blank, gold, ignore_blanks=False) == 1.0

    def spaced(path, spacing):
        d = Document()
        for text in TEXT:
            d.add_paragraph(text).paragraph_format.line_spacing = spacing
        d.save(path)
        return str(path)
    assert compare_line_spacing(spaced(tmp_path / "a.docx", 2.0), spaced(tmp_path / "b.docx", 2.0)) == 1.0
    assert compare_line_spacing(spaced(tmp_path / "a.docx", 1.5), spaced(tmp_path / "b.docx", 2.0)) == 0.0
    assert compare_line_spacing(no_blank, gold) == 0.0  # the text differs first

    def tabled(path, cells):
        d = Document()
        table = d.add_table(rows=len(cells), cols=len(cells[0]))
        for i, row in enumerate(cells):
            for j, text in enumerate(row):
                table.cell(i, j).text = text
        d.save(path)
        return str(path)
    grid = [["name", "qty"], ["pens", "3"]]
    assert compare_docx_tables(tabled(tmp_path / "t1.docx", grid), tabled(tmp_path / "t2.docx", grid)) == 1.0
    assert compare_docx_tables(tabled(tmp_path / "t1.docx", [["name", "qty"], ["pens", " 3 "]]),
                               tabled(tmp_path / "t2.docx", grid)) == 1.0  # cells compared stripped
    assert compare_docx_tables(tabled(tmp_path / "t1.docx", [["name", "qty"], ["ink", "3"]]),
                               tabled(tmp_path / "t2.docx", grid)) == 0.0
    assert compare_docx_tables(gold, tabled(tmp_path / "t2.docx", grid)) == 0.0  # no table at all
