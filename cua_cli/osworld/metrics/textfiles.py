"""Result files read as OSWorld's metrics open them in text mode: UTF-8, universal newlines. A file
that is missing, not UTF-8 or too large is None: OSWorld's metric would crash there (or read for
ever), and the agent's file scores 0."""

from typing import Optional

MAX_FILE_BYTES = 64 << 20


def utf8_text(path) -> Optional[str]:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return None
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError):
        return None


def text_lines(text: str) -> list[str]:
    """Lines as iterating a text file gives them: each with its "\\n" but a last one without."""
    pieces = text.split("\n")
    lines = [p + "\n" for p in pieces[:-1]]
    return lines + [pieces[-1]] if pieces[-1] else lines
