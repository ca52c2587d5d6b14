"""Append-only JSONL files that survive crashes and concurrent writers.

A line holds one JSON object. Readers judge every line on its own, so what a
line yields never depends on the lines around it: a line that is not exactly
one object (garbage, two objects, an array, bytes that are not UTF-8, nesting
too deep to parse) yields nothing and a warning, except that a record written
right after the torn bytes of a writer that died mid-line is recovered.
A file that is a link, a FIFO or anything but a regular file is not read, and
one that cannot be read (no permission) is not either: it yields one warning
(confined.py).
"""

import json
import os
import re

from .._util.diag import warn_problems
from .confined import Refused, open_regular, open_writable_stat

# The C scanner of the json module: one value at an index, without json.loads'
# per-call Python wrapper. Parsing line by line with it is nearly as fast as
# parsing the whole file as one array, and never lets one line's bytes change
# what another line yields.
_scan = json.JSONDecoder().scan_once
_PARSE_ERRORS = (StopIteration, ValueError, RecursionError)
_UNDECODED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, after surrogateescape
_JSON_SPACE = " \t\r"
# Starts tried when looking for a record after torn bytes: each try may scan the
# rest of the line, so a hostile line full of "{" must not cost quadratic time.
MAX_RECOVERY_TRIES = 64
# How much of a file is read at a time.
READ_PIECE = 8 << 20


def append_line(path, obj, dir_fd: int | None = None, shown=None) -> None:
    """Append one JSON object as a single whole-line write.

    One `os.write` on an O_APPEND descriptor, so lines of concurrent writers
    never interleave. A crash can still leave a torn last line (no newline):
    the next append then starts a new line, so the torn bytes never join its
    record. The file is opened as every run file is written
    (confined.open_writable): a link or a FIFO there raises UnwritableRun,
    naming `shown` (else `path`), and nothing is written. `dir_fd`: `path` is
    a name in that open folder.
    """
    data = line_bytes(obj)
    fd, lead = open_appending(path, dir_fd=dir_fd, shown=shown)
    try:
        os.write(fd, lead + data)
    finally:
        os.close(fd)


def line_bytes(obj) -> bytes:
    """One JSON object as a line. Lone surrogates in strings are written as \\uXXXX escapes, so the
    file stays UTF-8 and reads back to the same strings."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    # Only lone surrogates cannot be encoded, and json.dumps puts them only inside
    # strings, where backslashreplace's \udXXX is exactly the JSON escape.
    return text.encode("utf-8", "backslashreplace")


def open_appending(path, dir_fd: int | None = None, shown=None) -> tuple[int, bytes]:
    """An O_APPEND descriptor of `path` (opened as append_line opens it), and what the first line
    written through it starts with: a newline after a torn last line (an empty line is harmless, a
    joined one loses a record), else nothing."""
    fd, st = open_writable_stat(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, dir_fd=dir_fd, shown=shown)
    try:
        torn = st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n"
    except BaseException:
        os.close(fd)
        raise
    return fd, b"\n" if torn else b""


def read_lines(path, warn=True) -> list[dict]:
    """All complete lines of a JSONL file; a torn or bad line is skipped and reported."""
    rows, _ = read_from(path, 0, warn=warn)
    return rows


def read_from(path, offset: int, warn=True) -> tuple[list[dict], int]:
    """Records after byte `offset`, and the offset to continue from.

    A last line without its newline may still be being written: it is left
    for the next call rather than parsed.
    """
    records, problems, end, _ = scan(path, offset)
    if warn and problems:
        base = _lines_before(path, offset) if offset else 0
        warn_problems(path, [(n + base, p) for n, p in problems])
    return list(records.values()), end


def scan(path, offset: int = 0, line: int = 1):
    """The records after byte `offset`, where line number `line` starts.

    Returns `(records, problems, offset, line)`: records as `{line number:
    object}`, problems as `(line number, text)`, then where to continue.
    The file is read a piece at a time: its bytes, its text and its lines are
    never all held at once beside the records. A missing file has no records;
    one that cannot be read (no permission, an I/O error) is a problem, as is
    one that is not read at all.
    """
    try:
        f = open_regular(path)
    except FileNotFoundError:
        return {}, [], offset, line
    except Refused as e:  # a link, a FIFO, a folder: never followed, never waited on
        return {}, [(line, f"the file {e}; not read")], offset, line
    except OSError as e:
        return {}, [(line, f"cannot read the file: {e.strerror or e}")], offset, line
    # Keyed by line number rather than a list of (line, record) tuples: 100k live
    # tuples make the cycle collector walk them again and again.
    records, problems = {}, []
    rest = b""
    with f:
        try:
            f.seek(offset)
            while piece := f.read(READ_PIECE):
                data = rest + piece if rest else piece
                end = data.rfind(b"\n") + 1
                line = _scan_lines(data[:end], line, records, problems)
                offset += end
                rest = data[end:]
        except OSError as e:  # what was read stands; the next read starts after it
            problems.append((line, f"cannot read the file on from here: {e.strerror or e}"))
            return records, problems, offset, line
    if rest:
        problems.append((line, f"skipped a torn last line ({len(rest)} bytes, no newline yet)"))
    return records, problems, offset, line


def _scan_lines(data: bytes, line: int, records: dict, problems: list) -> int:
    """Parse whole lines (`data` ends after a newline, or is empty) into `records` and `problems`;
    the number of the line after them."""
    try:
        text = data.decode()
        undecoded = False
    except UnicodeDecodeError:
        text = data.decode(errors="surrogateescape")
        undecoded = True
    lines = text.split("\n")
    lines.pop()  # "" after the last newline
    for n, raw in enumerate(lines, line):
        try:
            obj, stop = _scan(raw, 0)
            if stop == len(raw) and type(obj) is dict and not (undecoded and _UNDECODED.search(raw)):
                records[n] = obj
                continue
        except _PARSE_ERRORS:
            pass
        obj, problem = _parse_line(raw)
        if obj is not None:
            records[n] = obj
        if problem:
            problems.append((n, problem))
    return line + len(lines)


def _parse_line(raw: str) -> tuple[dict | None, str | None]:
    """The object a line holds, or None, and what was wrong with the line."""
    s = raw.strip(_JSON_SPACE)
    if not s:
        return None, None
    try:
        obj, first_end = _scan(s, 0)
    except RecursionError:
        return None, "skipped a line nested too deeply to read"
    except _PARSE_ERRORS:
        obj, first_end = None, None
    if first_end == len(s):
        if _UNDECODED.search(s):
            return None, "skipped a line that is not valid UTF-8"
        if not isinstance(obj, dict):
            return None, f"skipped a line holding {_kind(obj)}, not an object"
        return obj, None
    # A writer that died mid-line leaves a proper prefix of a record; the next
    # writer's record follows it on the same line: the object that starts at a
    # later "{" and ends the line. The bytes before it are torn only if no
    # complete value fits in them (else the line holds two values).
    if s[0] == "{":
        at, tries = s.find("{", 1), 0
        while at != -1 and tries < MAX_RECOVERY_TRIES:
            tries += 1
            try:
                obj, stop = _scan(s, at)
            except _PARSE_ERRORS:
                pass
            else:
                if stop == len(s) and isinstance(obj, dict) and not _UNDECODED.search(s, at):
                    if first_end is None or first_end > at:
                        return obj, f"recovered a record after {at} torn bytes"
                    break
            at = s.find("{", at + 1)
    if first_end is not None:
        return None, "skipped a line that goes on after its first JSON value"
    return None, "skipped a line that is not valid UTF-8" if _UNDECODED.search(s) else "skipped a line that is not JSON"


def _lines_before(path, offset: int) -> int:
    try:
        with open_regular(path) as f:
            return f.read(offset).count(b"\n")
    except (OSError, Refused):  # replaced since it was read: the numbers count from here
        return 0


def _kind(obj) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(obj), "a number")
