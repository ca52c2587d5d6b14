"""cua's one voice on stderr, for people: warnings and notes, quieter with -q and fuller with -v.

The level is kept in the environment (CUA_VERBOSITY), so runner processes and
actors a command starts speak at the level the command was given. Output meant
for programs goes to stdout; nothing here ever does.
"""

import os
import sys

QUIET, NORMAL, VERBOSE = 0, 1, 2
MAX_WARNINGS = 20  # per file: a long list of problems is cut short


def set_level(level: int) -> None:
    os.environ["CUA_VERBOSITY"] = str(level)


def level() -> int:
    try:
        return int(os.environ.get("CUA_VERBOSITY", NORMAL))
    except ValueError:
        return NORMAL


def warn(text: str) -> None:
    """Something the user should know went wrong or was skipped (shown unless -q)."""
    if level() >= NORMAL:
        print(f"warning: {text}", file=sys.stderr, flush=True)


def note(text: str) -> None:
    """What cua is doing, when it is worth saying (shown unless -q)."""
    if level() >= NORMAL:
        print(f"cua: {text}", file=sys.stderr, flush=True)


def detail(text: str) -> None:
    """What only someone looking into a run wants (shown with -v)."""
    if level() >= VERBOSE:
        print(f"cua: {text}", file=sys.stderr, flush=True)


def warn_problems(path, problems) -> None:
    """`(line, text)` problems as warnings naming file and line; a long list is cut short."""
    for n, text in problems[:MAX_WARNINGS]:
        warn(f"{path}:{n}: {text}")
    if len(problems) > MAX_WARNINGS:
        warn(f"{path}: {len(problems) - MAX_WARNINGS} more problems not shown")
