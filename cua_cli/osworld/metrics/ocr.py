"""OSWorld's OCR metric, compare_image_text (its screenshot-of-`ls` task), rewritten for cua on the
engine OSWorld's scores come from: EasyOCR with its default English models (the CRAFT detector and
the `english_g2` recognizer). Another OCR engine (Tesseract) reads other text out of the same pixels,
and the rule is a plain substring test on that text: only EasyOCR keeps scores comparable.

EasyOCR's weights: OSWorld's call, `easyocr.Reader(['en'])`, reads them from EasyOCR's own folder
(`$EASYOCR_MODULE_PATH/model`, else `~/.EasyOCR/model`) and downloads them from EasyOCR's release
hub on first use. cua makes the same call, so on a host without them the first OCR task downloads
them: that is the host's business (fetch them once, or point EASYOCR_MODULE_PATH at a copy).
`CUA_EASYOCR_MODELS=<folder>` instead names a folder that holds `craft_mlt_25k.pth` and
`english_g2.pth`: cua reads them from there and never downloads (EasyOCR still checks their MD5).

A screenshot the agent did not save, or left unreadable, scores 0, as in OSWorld; a rule of a type
other than "text" is the task's mistake and raises (OSWorld scores it 0: it catches its own error).
"""

import os
import struct
import tempfile
import threading
from typing import Any, Optional

from ..registry import Extra

MODELS_ENV = "CUA_EASYOCR_MODELS"

_readers: dict[Optional[str], Any] = {}
_readers_lock = threading.Lock()


def reader():
    """The EasyOCR reader OSWorld builds (English, the GPU when torch has one, EasyOCR's default
    networks and dynamic int8 quantisation on the CPU), built once per model folder: loading the
    networks takes seconds, and OSWorld's fresh reader per call reads the same text."""
    import easyocr

    folder = os.environ.get(MODELS_ENV) or None
    with _readers_lock:
        if folder not in _readers:
            if folder:
                # EasyOCR also wants a folder for user networks and makes one: the model folder
                # serves, so that no ~/.EasyOCR appears on a host that keeps its models elsewhere
                _readers[folder] = easyocr.Reader(["en"], model_storage_directory=folder,
                                                  user_network_directory=folder, download_enabled=False,
                                                  verbose=False)
            else:
                # downloads the weights on the first call on a host that lacks them (see above)
                _readers[folder] = easyocr.Reader(["en"], verbose=False)
        return _readers[folder]


# -- X Window dumps


def _is_xwd(head: bytes) -> bool:
    """Whether `file` calls this an X11 window dump (libmagic's test, which OSWorld's code asks
    `file` for): a 100-byte header at least, big-endian header size over 99, version 7, pixmap
    format below 3, depth up to 32."""
    if len(head) < 100:
        return False
    size, version, pixmap_format, depth = struct.unpack(">4I", head[:16])
    return size > 99 and version == 7 and pixmap_format < 3 and depth < 33


def _raw_xwd(path: str):
    """The pixels of an X11 window dump as OSWorld's own reader takes them, or raise: OSWorld quirk:
    its reader starts the pixels right after the header, skipping no colour map (xwd writes one, so
    a real dump's pixels come out shifted), takes depth 32 as 4 bytes a pixel in B, G, R order and
    depth 24 as 3 bytes in R, G, B order whatever the header's bits per pixel, byte order and masks
    say (xwd's depth-24 dumps use 4 bytes a pixel: OSWorld reads them scrambled), and refuses any
    other depth. What it reads is what EasyOCR then reads, so cua reads the same."""
    import numpy as np
    from PIL import Image

    with open(path, "rb") as f:
        head = f.read(100)
        size, _version, _format, depth, width, height = struct.unpack(">6I", head[:24])
        if depth not in (24, 32):
            raise ValueError(f"X11 dump of depth {depth}")
        channels = 4 if depth == 32 else 3
        f.seek(size)
        # checked before reading, so that a header's made-up size allocates nothing (a header that
        # runs past the end leaves nothing to read: only an empty image passes)
        need = width * height * channels
        if need > max(0, os.fstat(f.fileno()).st_size - size):
            raise ValueError("X11 dump shorter than its header says")
        pixels = np.frombuffer(f.read(need), dtype=np.uint8).reshape((height, width, channels))
    if depth == 32:
        pixels = pixels[:, :, [2, 1, 0]]
    return Image.fromarray(np.ascontiguousarray(pixels))  # 3 channels of bytes: RGB


def _xwd_as_png(path: str, dest: str) -> bool:
    """Writes the dump at `path` as a PNG at `dest`, as OSWorld converts it: first whatever Pillow
    makes of the file (no Pillow reads X11 dumps, but a header Pillow takes for one of its formats
    is read as that), then OSWorld's raw reader. False when both fail: OSWorld then tries netpbm's
    xwdtopnm when the host has it, and otherwise hands EasyOCR the dump itself, which it cannot read
    (a 0). cua runs no host tools on the agent's file: such a dump scores 0 (OSWorld's score on a
    host without netpbm)."""
    from PIL import Image

    for read in (Image.open, _raw_xwd):
        try:
            read(path).save(dest, "PNG")
            return True
        except Exception:  # noqa: BLE001 - the agent's file; any failure moves on, as OSWorld's
            continue
    return False


# -- the metric


def compare_image_text(image_path, rule) -> float:
    """1 when `rule["text"]` is a substring of the text EasyOCR reads in the image (its pieces
    joined by single spaces, in EasyOCR's order), else 0. OSWorld quirk: case and spaces count, so
    the ls task's " Ls" needs a capital L after a space somewhere in the reading."""
    if not isinstance(rule, dict) or rule.get("type") != "text" or not isinstance(rule.get("text"), str):
        raise ValueError(f"compare_image_text: rule must be {{'type': 'text', 'text': ...}}, not {rule!r}")
    if not image_path or not os.path.exists(image_path):
        return 0.0
    ocr = reader()  # a host without its models fails here: an error, not the agent's 0
    with tempfile.TemporaryDirectory(prefix="cua-ocr-") as scratch:
        target = image_path
        try:
            with open(image_path, "rb") as f:
                head = f.read(100)
        except OSError:
            return 0.0
        if _is_xwd(head):
            target = os.path.join(scratch, "screen.png")
            if not _xwd_as_png(image_path, target):
                return 0.0
        try:
            # EasyOCR is given the path, as in OSWorld: it reads the colours with scikit-image and
            # the greys with OpenCV from the file, and a decoded array would give other greys
            pieces = ocr.readtext(target)
        except Exception:  # noqa: BLE001 - an image EasyOCR cannot read is the agent's: OSWorld's 0
            return 0.0
    text = " ".join(piece[1] for piece in pieces)
    return 1.0 if rule["text"] in text else 0.0


METRICS = {"compare_image_text": compare_image_text}
EXTRA = Extra("ocr", {"easyocr": "easyocr"})
