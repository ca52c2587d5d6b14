"""OSWorld's PDF metrics, rewritten for cua on the libraries its scores come from: PyMuPDF reads the
text and the images (compare_pdfs, compare_pdf_images), pypdf counts pages (check_pdf_pages),
pdfplumber extracts the text is_gold_text_included_in_pdf searches, and ImageHash's perceptual hash
compares images. The media extra brings them.

- compare_pdfs(result, expected): the similarity of each pair's whole text (rapidfuzz's ratio, as
  OSWorld computes it), averaged over the expected files; a list of files each.
- compare_pdf_images(result, expected): the share of embedded images whose perceptual hashes are
  within 5 bits, when both hold as many images (1 when neither holds any).
- check_pdf_pages(result, rules): the page count against `rules["ref_value"]` by
  `rules["relation"]` (an `operator` name: eq, lt, ...).
- is_gold_text_included_in_pdf(result, expected): every value of the expected JSON object is in
  the text pdfplumber extracts.

An unreadable file of the agent's scores 0, a broken gold file raises, except in compare_pdfs: OSWorld
scores a pair it cannot read 0 whichever side fails, and its tasks pass the agent's files as
`expected` as often as `result`, so cua cannot tell the gold side there.
"""

import operator

from ..registry import Extra
from .values import lcs_length

HASH_DISTANCE = 5   # compare_pdf_images: phash bits two images may differ by and still match


def ratio(a: str, b: str) -> float:
    """rapidfuzz's fuzz.ratio(a, b) / 100, bit for bit as it computes it (1 - Indel distance / total
    length, in percent, divided by 100): cua's scores equal OSWorld's to the last digit."""
    total = len(a) + len(b)
    if not total:
        return 1.0
    return (1.0 - (total - 2 * lcs_length(a, b)) / total) * 100 / 100


def _text(path) -> str:
    import pymupdf

    with pymupdf.open(path) as document:
        return "".join(page.get_text() for page in document).strip()


def compare_pdfs(result, expected=None) -> float:
    """OSWorld quirk: lists of different lengths are paired as far as the shorter goes and the sum
    divided by the number of expected files. A pair without a file scores 0 (OSWorld's PyMuPDF
    opens None as an empty document, which would match an expected file without text)."""
    if not isinstance(expected, list):
        result, expected = [result], [expected]
    elif not isinstance(result, list):
        return 0.0  # OSWorld pairs the characters of the one path with the expected files: nothing reads
    if not expected:
        raise ValueError("compare_pdfs: the task gives no expected file")
    total = 0.0
    for mine, gold in zip(result, expected):
        if not mine or not gold:
            continue
        try:
            total += ratio(_text(mine), _text(gold))
        except Exception:  # noqa: BLE001 - OSWorld scores a pair it cannot read 0, whichever side
            continue
    return total / len(expected)


def _images(path) -> list:
    """The images embedded in the PDF, page by page, as Pillow opens them (one it cannot open is
    left out, as OSWorld leaves it out)."""
    import io

    import pymupdf
    from PIL import Image

    out = []
    with pymupdf.open(path) as document:
        for page in document:
            for info in page.get_images(full=True):
                data = document.extract_image(info[0])["image"]
                try:
                    out.append(Image.open(io.BytesIO(data)))
                except Exception:  # noqa: BLE001 - see above
                    continue
    return out


def _hashes(images) -> list:
    import imagehash

    return [imagehash.phash(image) for image in images]


def compare_pdf_images(result, expected=None, **_) -> float:
    """(OSWorld copies both files into one scratch folder under their names: two files of one name
    would be one file there, the expected compared with itself. cua reads them where they are.)"""
    import os

    if not result or not expected or not os.path.exists(result):
        return 0.0
    if not os.path.exists(expected):
        raise FileNotFoundError(f"compare_pdf_images: no gold file {expected}")
    gold = _hashes(_images(expected))
    try:
        mine = _images(result)
    except Exception:  # noqa: BLE001 - the agent's file is no PDF PyMuPDF reads
        return 0.0
    if len(mine) != len(gold):
        return 0.0
    if not gold:
        return 1.0
    try:
        mine = _hashes(mine)
    except Exception:  # noqa: BLE001 - an image of the agent's that cannot be decoded: OSWorld crashes
        return 0.0
    return sum(1 for a, b in zip(mine, gold) if a - b <= HASH_DISTANCE) / len(gold)


def check_pdf_pages(result, rules=None) -> float:
    from pypdf import PdfReader

    if not result or rules is None:
        return 0.0
    compare = getattr(operator, rules["relation"])
    try:
        pages = len(PdfReader(result).pages)
    except Exception:  # noqa: BLE001 - the agent's file is no PDF pypdf reads
        return 0.0
    return float(compare(pages, rules["ref_value"]))


def is_gold_text_included_in_pdf(result, expected=None) -> float:
    """Every value of the expected JSON object is in the PDF's text, as pdfplumber extracts it page
    after page. (No task of OSWorld's snapshot calls it; OSWorld keeps it among its general metrics.)"""
    import json

    import pdfplumber

    if not result or not expected:
        return 0.0
    with open(expected, encoding="utf-8") as f:
        wanted = json.load(f)
    if not isinstance(wanted, dict) or not all(isinstance(v, str) for v in wanted.values()):
        raise ValueError("is_gold_text_included_in_pdf: the gold file is no JSON object of texts")
    try:
        with pdfplumber.open(result) as document:
            text = "".join(page.extract_text() for page in document.pages)
    except Exception:  # noqa: BLE001 - the agent's file is no PDF pdfplumber reads
        return 0.0
    return float(all(value in text for value in wanted.values()))


METRICS = {f.__name__: f for f in (compare_pdfs, compare_pdf_images, check_pdf_pages, is_gold_text_included_in_pdf)}
EXTRA = Extra("media", {"pymupdf": "pymupdf", "pypdf": "pypdf", "imagehash": "ImageHash", "PIL": "pillow",
                        "pdfplumber": "pdfplumber"})
