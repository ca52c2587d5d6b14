"""A PNG's size from its header: the first chunk (IHDR) holds it, so nothing is decoded."""

import struct

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) as the IHDR chunk states them; None when the bytes do not start like a PNG."""
    if len(data) < 24 or data[:8] != SIGNATURE or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height
