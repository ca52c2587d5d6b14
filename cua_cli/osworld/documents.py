"""OSWorld's text-document metric, `compare_docx_files(result, expected, **options)`, through
python-docx (the `office` extra, imported when a document is scored).

The documents' paragraphs are compared as text, as OSWorld compares them:
- `content_only: true`: the whole text with runs of white space made one space, scored by its
  fuzzy similarity (rapidfuzz's ratio / 100), a fraction;
- `ignore_blanks: true` (the default): that same text, equal or 0;
- `ignore_blanks: false`: paragraph by paragraph, equal or 0.
`ignore_case` folds case and `ignore_order` sorts the paragraphs first. A document the agent left
unreadable scores 0; a gold document that cannot be read raises, as does a file that is not
.docx (OSWorld's .odt branch serves no task).
"""

import re

from .ooxml import checked
from .values import similarity


def compare_docx_files(result, expected=None, **options) -> float:
    from docx import Document

    if not result or not expected:
        return 0.0
    if not (str(result).endswith(".docx") and str(expected).endswith(".docx")):
        raise ValueError("compare_docx_files: both files must be .docx")
    try:
        mine = [p.text for p in Document(checked(result)).paragraphs]
    except Exception:  # the agent left no readable document
        return 0.0
    gold = [p.text for p in Document(checked(expected)).paragraphs]
    fold = str.lower if options.get("ignore_case", False) else str
    if options.get("ignore_order", False):
        mine, gold = sorted(mine), sorted(gold)
    if options.get("content_only", False):
        return similarity(fold(_joined(mine)), fold(_joined(gold)))
    if options.get("ignore_blanks", True):
        return float(fold(_joined(mine)) == fold(_joined(gold)))
    return float(len(mine) == len(gold) and all(fold(a) == fold(b) for a, b in zip(mine, gold)))


def _joined(paragraphs: list[str]) -> str:
    return re.sub(r"\s+", " ", "\n".join(paragraphs)).strip()
