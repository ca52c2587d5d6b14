"""OSWorld's text-document metrics, through python-docx (the `office` extra, imported when a
document is scored).

`compare_docx_files(result, expected, **options)` compares the paragraphs as text:
- `content_only: true`: the whole text with runs of white space made one space, scored by its
  fuzzy similarity (rapidfuzz's ratio / 100), a fraction;
- `ignore_blanks: true` (the default): that same text, equal or 0;
- `ignore_blanks: false`: paragraph by paragraph, equal or 0.
`ignore_case` folds case and `ignore_order` sorts the paragraphs first.
`compare_docx_files_and_ignore_new_lines` does the same without the empty paragraphs;
`compare_line_spacing` asks for equal text and each paragraph's line spacing alike;
`compare_docx_tables` for the same tables, cell by cell (text, stripped).

A document the agent left unreadable scores 0; a gold document that cannot be read raises, as
does a file that is not .docx (OSWorld's .odt branch serves no task).
"""

import re

from ..registry import Extra
from .ooxml import checked
from .values import similarity


def _documents(result, expected):
    """(the agent's document, the gold document); (None, None), to score 0, when either file is not
    given or the agent's cannot be read."""
    from docx import Document

    if not result or not expected:
        return None, None
    if not (str(result).endswith(".docx") and str(expected).endswith(".docx")):
        raise ValueError("both files must be .docx")
    try:
        mine = Document(checked(result))
    except Exception:  # the agent left no readable document
        return None, None
    return mine, Document(checked(expected))


def compare_docx_files(result, expected=None, **options) -> float:
    mine, gold = _documents(result, expected)
    if mine is None:
        return 0.0
    return _compare_texts([p.text for p in mine.paragraphs], [p.text for p in gold.paragraphs], **options)


def compare_docx_files_and_ignore_new_lines(result, expected=None, **options) -> float:
    mine, gold = _documents(result, expected)
    if mine is None:
        return 0.0
    texts = [[p.text for p in d.paragraphs if p.text != ""] for d in (mine, gold)]
    return _compare_texts(*texts, ignore_blanks=options.get("ignore_blanks", True))


def _compare_texts(mine: list[str], gold: list[str], ignore_blanks=True, ignore_case=False, ignore_order=False,
                   content_only=False, **_) -> float:
    fold = str.lower if ignore_case else str
    if ignore_order:
        mine, gold = sorted(mine), sorted(gold)
    if content_only:
        return similarity(fold(_joined(mine)), fold(_joined(gold)))
    if ignore_blanks:
        return float(fold(_joined(mine)) == fold(_joined(gold)))
    return float(len(mine) == len(gold) and all(fold(a) == fold(b) for a, b in zip(mine, gold)))


def _joined(paragraphs: list[str]) -> str:
    return re.sub(r"\s+", " ", "\n".join(paragraphs)).strip()


def compare_line_spacing(result, expected=None) -> float:
    """compare_docx_files' default comparison first, then each paragraph's spacing."""
    mine, gold = _documents(result, expected)
    if mine is None:
        return 0.0
    a, b = mine.paragraphs, gold.paragraphs
    if not _compare_texts([p.text for p in a], [p.text for p in b]):
        return 0.0
    return float(len(a) == len(b) and all(p.paragraph_format.line_spacing == q.paragraph_format.line_spacing
                                          for p, q in zip(a, b)))


def compare_docx_tables(result, expected=None) -> float:
    mine, gold = _documents(result, expected)
    if mine is None or len(mine.tables) != len(gold.tables):
        return 0.0
    for t1, t2 in zip(mine.tables, gold.tables):
        if (len(t1.rows), len(t1.columns)) != (len(t2.rows), len(t2.columns)):
            return 0.0
        if any(t1.cell(i, j).text.strip() != t2.cell(i, j).text.strip()
               for i in range(len(t1.rows)) for j in range(len(t1.columns))):
            return 0.0
    return 1.0


METRICS = {f.__name__: f for f in (compare_docx_files, compare_docx_files_and_ignore_new_lines, compare_line_spacing,
                                   compare_docx_tables)}
EXTRA = Extra("office", {"docx": "python-docx"})
