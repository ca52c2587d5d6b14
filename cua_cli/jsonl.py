"""Append-only JSONL files that survive crashes and concurrent writers."""

import json
import os
import sys


def append_line(path, obj) -> None:
    """Append one JSON object as a single whole-line write.

    One `os.write` on an O_APPEND descriptor: a crash leaves either the whole
    line or (at worst, on power loss) a torn last line that readers skip.
    """
    data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_lines(path, warn=True) -> list[dict]:
    """All complete lines of a JSONL file; a torn or bad line is skipped and reported."""
    rows, _ = read_from(path, 0, warn=warn)
    return rows


def read_from(path, offset: int, warn=True) -> tuple[list[dict], int]:
    """Lines after byte `offset`, and the offset to continue from.

    A last line without its newline may still be being written: it is left
    for the next call rather than parsed.
    """
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    lines = [raw for raw in data[:end].splitlines() if raw.strip()]
    try:
        # One parse of the whole block is several times faster than one per line.
        rows = json.loads(b"[" + b",".join(lines) + b"]")
        if all(isinstance(r, dict) for r in rows):
            lines = []
        else:
            rows = []
    except ValueError:
        rows = []
    for raw in lines:  # only when a line is bad: find and skip it
        try:
            row = json.loads(raw)
            if not isinstance(row, dict):
                raise ValueError("not an object")
            rows.append(row)
        except ValueError:
            if warn:
                print(f"warning: {path}: skipped a malformed line near byte {offset}", file=sys.stderr)
    if warn and end < len(data) and offset + len(data) == os.path.getsize(path):
        print(f"warning: {path}: skipped a torn last line ({len(data) - end} bytes)", file=sys.stderr)
    return rows, offset + end
