"""OSWorld's audio, video, e-book, archive and MP3-tag metrics, and its check of three fuzzy
places in a document, rewritten for cua on the libraries its scores come from (the media extra):

- compare_audios(result, expected): librosa's MFCCs of both files (as librosa loads them: mono,
  22050 Hz), each coefficient normalised over time, aligned by FastDTW under cosine distance;
  exp(-distance / path length).
- compare_videos(result, expected): OpenCV decodes the first 100 frames of each; more than 5 pairs
  whose perceptual hashes (ImageHash) differ by more than 5 bits fail, and so do videos that end at
  different frames.
- check_mp3_meta(result, rules): the ID3 tags (mutagen's EasyID3 names) against value rules.
- compare_epub(result, expected): toc.ncx without navPoint lines, content.opf without
  dc:identifier lines, every .html file re-serialised by lxml; the line similarity of each pair in
  name order, averaged.
- compare_archive(result, expected, file_type=..., file_path=...): the same file names (in
  `file_path` inside), each pair scored by the metric for `file_type`, averaged.
- compare_zip_files(result, expected): the same members, PDFs with about the same text (95%),
  others byte for byte.
- fuzzy_place_math(result, rules): the document holds exactly three words, each scored by its best
  fuzzy ratio against `rules["expected"]`, averaged.

An unreadable file of the agent's scores 0 (OSWorld would crash on it); a broken gold file raises.
OSWorld writes scratch files for some of these (an e-book's parts beside it, archives unpacked
beside them, `temp.pdf` in its working folder); cua reads e-books and zip members in memory and
unpacks archives only inside the episode folder, refusing members that would land outside it.
"""

import io
import math
import os
import tarfile
import tempfile
import zipfile
from pathlib import Path

from ..registry import Extra
from . import documents, general, images, pdf, slides, tables
from .pdf import ratio
from .values import match_value

MAX_INFLATED = 1 << 30   # an archive's or e-book's members together, once inflated
MAX_MEMBERS = 20_000
VIDEO_FRAMES, VIDEO_HASH_BITS = 100, 5


# -- audio and video


def _audio(path):
    """librosa's samples and rate, or None for a file librosa cannot read or that holds no sound."""
    import librosa

    try:
        samples, rate = librosa.load(path)
    except Exception:  # noqa: BLE001 - whatever fails to decode
        return None
    return None if samples.shape[0] == 0 else (samples, rate)


def compare_audios(result, expected=None) -> float:
    """OSWorld scores two unreadable files 1 (alike): cua raises for an unreadable gold, whatever
    the agent's. A similarity that is not a number (cosine distance of a silent frame) is 0."""
    import librosa
    import numpy as np
    from fastdtw import fastdtw
    from scipy.spatial.distance import cosine

    if not result or not expected:
        return 0.0
    gold = _audio(expected)
    if gold is None:
        raise ValueError(f"compare_audios: the gold file {expected} holds no sound librosa reads")
    mine = _audio(result)
    if mine is None:
        return 0.0
    try:
        features = [librosa.util.normalize(librosa.feature.mfcc(y=y, sr=sr), axis=1) for y, sr in (mine, gold)]
    except Exception:  # noqa: BLE001 - OSWorld scores a failed MFCC 0
        return 0.0
    distance, path = fastdtw(features[0].T, features[1].T, dist=cosine)
    value = float(np.exp(-(distance / len(path)))) if path else 0.0
    return 0.0 if math.isnan(value) else value


def compare_videos(result, expected=None, max_frames_to_check=VIDEO_FRAMES, threshold=VIDEO_HASH_BITS) -> float:
    """OSWorld quirks: only the first `max_frames_to_check` frames count, so videos that differ
    after them pass; `threshold` is both the hash distance of a mismatch and the number of
    mismatches tolerated. (Two files OpenCV cannot read end together: OSWorld scores them 1; cua
    raises for an unreadable gold, and scores an unreadable file of the agent's 0.)"""
    import cv2
    import imagehash
    from PIL import Image

    if not expected:
        raise ValueError("compare_videos: the task gives no expected video")
    gold = cv2.VideoCapture(str(expected))
    if not gold.isOpened():
        raise ValueError(f"compare_videos: OpenCV cannot open the gold video {expected}")
    if not result:
        return 0.0
    mine = cv2.VideoCapture(str(result))
    try:
        checked = mismatches = 0
        while checked < max_frames_to_check:
            got, frame = mine.read()
            want, gold_frame = gold.read()
            if not got or not want:
                return float(got == want)
            a, b = (imagehash.phash(Image.fromarray(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))) for f in (frame, gold_frame))
            checked += 1
            if a - b > threshold:
                mismatches += 1
                if mismatches > threshold:
                    return 0.0
        return 1.0
    finally:
        mine.release()
        gold.release()


# -- tags


def check_mp3_meta(result, rules=None) -> float:
    """Each tag named in `rules` (EasyID3's names: title, artist, ...) matches its value rule; a tag
    with several values is read joined by commas, a missing one as ""; a file without ID3 tags
    scores 0. As in OSWorld, the rules are checked in order until one fails."""
    from mutagen.easyid3 import EasyID3

    if not result or rules is None:
        return 0.0
    try:
        tags = EasyID3(result)
    except Exception:  # noqa: BLE001 - no MP3 with ID3 tags
        return 0.0

    def value(key):
        got = tags.get(key, "")
        return ",".join(got) if isinstance(got, list) else got
    return float(all(match_value(value(key), rule) for key, rule in rules.items()))


# -- e-books


def _members_checked(archive: zipfile.ZipFile) -> list:
    members = archive.infolist()
    if len(members) > MAX_MEMBERS or sum(m.file_size for m in members) > MAX_INFLATED:
        raise ValueError("the archive holds too many members or inflates too far")
    return members


def _epub_parts(path) -> list:
    """(name, lines) of the e-book's parts OSWorld compares, in its order; [] for a file that is no
    zip. Fails (as OSWorld's writing of the parts fails) for a part that is not UTF-8 or an empty
    page, or for an .html part in a folder (OSWorld writes it into one folder it made and finds no
    subfolder there)."""
    import lxml.html

    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        return []
    with archive:
        _members_checked(archive)
        names = archive.namelist()
        parts = []
        for name, dropped in (("toc.ncx", "navPoint"), ("content.opf", "dc:identifier")):
            if name in names:
                text = archive.read(name).decode()
                parts.append((name, [line for line in text.splitlines() if dropped not in line]))
        for name in names:
            if name.endswith(".html"):
                if "/" in name:
                    raise ValueError(f"the e-book's page {name!r} is in a folder: OSWorld cannot write it out")
                text = archive.read(name).decode().replace("\n", "").replace("\r", "")
                page = lxml.html.fromstring(text.encode())
                parts.append((name, lxml.html.tostring(page, pretty_print=True, encoding="unicode").splitlines()))
    return sorted(parts, key=lambda part: part[0])


def compare_epub(result, expected=None) -> float:
    import difflib

    if not result:
        return 0.0
    try:
        mine = _epub_parts(result)
    except Exception:  # noqa: BLE001 - the agent's e-book is broken where OSWorld's reading crashes
        return 0.0
    if not expected or not zipfile.is_zipfile(expected):  # OSWorld reads no parts from it and scores 0
        raise ValueError(f"compare_epub: the gold e-book {expected} is no zip archive")
    gold = _epub_parts(expected)
    if not mine:
        return 0.0
    total = sum(difflib.SequenceMatcher(a=a, b=b).ratio() for (_, a), (_, b) in zip(mine, gold))
    return total / len(mine)


# -- archives


def _unpack(archive, folder: Path) -> None:
    """Unpack `archive` (its format by its name, as shutil knows them) into `folder`, refusing
    members that would land outside it, links out of it, and archives that inflate too far."""
    import shutil

    name = str(archive)
    if zipfile.is_zipfile(name) and name.lower().endswith(".zip"):
        with zipfile.ZipFile(name) as z:
            _members_checked(z)
        shutil.unpack_archive(name, folder)  # shutil drops zip members with absolute or .. paths
        return
    with tarfile.open(name) as t:
        members = t.getmembers()
        if len(members) > MAX_MEMBERS or sum(m.size for m in members) > MAX_INFLATED:
            raise ValueError("the archive holds too many members or inflates too far")
    shutil.unpack_archive(name, folder, filter="data")


def _file_metric(file_type: str):
    """cua's metric for OSWorld's `file_type` of compare_archive (its own metric of that name)."""
    metrics = {"text": general.compare_text_file, "pdf": pdf.compare_pdfs, "docx": documents.compare_docx_files,
               "ppt": slides.compare_pptx_files, "image": images.compare_images, "csv": general.compare_csv,
               "table": tables.compare_table, "audio": compare_audios, "video": compare_videos}
    if file_type not in metrics:
        raise ValueError(f"compare_archive: file_type {file_type!r} is none of {sorted(metrics)}")
    return metrics[file_type]


def compare_archive(result, expected=None, **options) -> float:
    """OSWorld unpacks both archives beside them (the agent's again each time): cua unpacks them
    into a scratch folder inside the episode folder and removes it. The files compared are those
    directly in `file_path`, paired in name order; the metric's other options go to the file
    metric. An archive of the agent's that is not one, or whose `file_path` is missing, scores 0."""
    file_path = options.pop("file_path", "")
    metric = _file_metric(options.pop("file_type", "text"))
    if not result:
        return 0.0
    if not expected:
        raise ValueError("compare_archive: the task gives no expected archive")
    with tempfile.TemporaryDirectory(dir=Path(result).parent, prefix=".unpacked-") as scratch:
        mine_root, gold_root = Path(scratch, "result"), Path(scratch, "expected")
        gold_root.mkdir()
        _unpack(expected, gold_root)
        gold_files = sorted(os.listdir(gold_root / file_path))
        mine_root.mkdir()
        try:
            _unpack(result, mine_root)
            mine_files = sorted(os.listdir(mine_root / file_path))
        except Exception:  # noqa: BLE001 - no archive, or not one laid out as the task asks
            return 0.0
        if mine_files != gold_files:
            return 0.0
        if not gold_files:
            raise ValueError(f"compare_archive: the expected archive holds no file in {file_path!r}")
        total = sum(metric(str(mine_root / file_path / a), str(gold_root / file_path / b), **options)
                    for a, b in zip(mine_files, gold_files))
        return total / len(mine_files)


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


def compare_zip_files(result, expected=None, **_) -> float:
    """The members' names are the same; a .pdf member's text (as pypdf extracts it, page after page)
    is at least 95% alike (difflib's ratio), any other member byte for byte the same. (OSWorld
    extracts with PyPDF2, pypdf's former name, through a `temp.pdf` in its working folder; cua in
    memory.)"""
    import difflib

    if not result:
        return 0.0
    gold = zipfile.ZipFile(expected)
    with gold:
        _members_checked(gold)
        try:
            mine = zipfile.ZipFile(result)
            _members_checked(mine)
        except Exception:  # noqa: BLE001 - the agent's file is no zip archive
            return 0.0
        with mine:
            names = set(mine.namelist())
            if names != set(gold.namelist()):
                return 0.0
            for name in sorted(names):
                want = gold.read(name)
                try:
                    got = mine.read(name)
                except Exception:  # noqa: BLE001 - a member that does not inflate
                    return 0.0
                if name.lower().endswith(".pdf"):
                    gold_text = _pdf_text(want)
                    try:
                        text = _pdf_text(got)
                    except Exception:  # noqa: BLE001 - the agent's PDF is unreadable
                        return 0.0
                    if difflib.SequenceMatcher(None, text, gold_text).ratio() < 0.95:
                        return 0.0
                elif got != want:
                    return 0.0
    return 1.0


# -- documents


def fuzzy_place_math(result, rules=None) -> float:
    """The document's words (its paragraphs split at white space) are exactly three, each scored by
    its best fuzzy ratio against the expected answers; their mean."""
    from docx import Document

    from .ooxml import checked

    if not result or rules is None:
        return 0.0
    answers = rules["expected"]
    try:
        words = [w for paragraph in Document(checked(result)).paragraphs for w in paragraph.text.split()]
    except Exception:  # noqa: BLE001 - the agent left no readable document
        return 0.0
    if len(words) != 3:
        return 0.0
    return sum(max([0] + [ratio(w, a) for a in answers]) for w in words) / 3


METRICS = {f.__name__: f for f in (compare_audios, compare_videos, check_mp3_meta, compare_epub, compare_archive,
                                   compare_zip_files, fuzzy_place_math)}
EXTRA = Extra("media", {"librosa": "librosa", "fastdtw": "fastdtw", "scipy": "scipy", "cv2": "opencv-python-headless",
                        "imagehash": "ImageHash", "PIL": "pillow", "mutagen": "mutagen", "lxml": "lxml",
                        "pypdf": "pypdf", "pymupdf": "pymupdf", "docx": "python-docx"})
