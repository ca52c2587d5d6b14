"""OSWorld's evaluator metrics, rewritten for cua: one module per family of apps, as OSWorld groups
them, each with its `METRICS` by name and the `EXTRA` its libraries come from (None: cua's own).

    general        text, lists, JSON, CSV, config files, the os domain
    tables         compare_table and the other spreadsheet checks
    slides         compare_pptx_files and the other deck checks, LibreOffice Impress's settings
    documents      the docx and odt checks
    pdf, images    PDFs; pictures (GIMP's tasks, compare_images)
    media          audio, video, e-books, archives
    ocr            compare_image_text (EasyOCR)
    chrome         tabs, URLs, bookmarks, history, cookies, pages
    accessibility  check_accessibility_tree
    vlc, gimp, vscode, thunderbird   the apps' settings and state
    values, textfiles, ooxml         shared by the families: value matching, reading text and Office files

A metric is `metric(result, expected, **options)` (or without `expected` when its getter gave
none) -> a number in [0, 1], as OSWorld calls it. What a task uses beyond these is refused
(support.py).
"""

from typing import Any, Callable

from ..registry import collect
from . import (
    accessibility,
    chrome,
    documents,
    general,
    gimp,
    images,
    media,
    ocr,
    pdf,
    slides,
    tables,
    thunderbird,
    vlc,
    vscode,
)

METRICS, EXTRAS = collect((general, tables, slides, documents, pdf, images, media, chrome, accessibility, vlc, gimp,
                           vscode, thunderbird, ocr), "METRICS")
# metric -> what a task's options ask of it that cua lacks (e.g. "rule 'sparkline'")
OPTION_CHECKS: dict[str, Callable[[Any], list[str]]] = {"compare_table": tables.unsupported_rules}
