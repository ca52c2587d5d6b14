"""File-system names for task ids: task ids are data, never raw path parts."""

import hashlib
import re

_SAFE_CHAR = re.compile(r"[A-Za-z0-9_.-]")
_MAX_LEN = 120


def _utf8(s: str) -> bytes:
    # surrogatepass: a lone surrogate (from an undecodable file name, say) is a
    # character like any other and gets its own bytes instead of an error.
    return s.encode("utf-8", "surrogatepass")


def encode_task_id(task_id: str) -> str:
    """An injective, path-safe name for a task id.

    Characters outside [A-Za-z0-9_.-] are percent-encoded as their UTF-8 bytes
    (so `%` itself is too; lone surrogates included), a leading dot is encoded
    so `.`/`..` cannot appear, and the empty id becomes a lone `%`, which no
    other id can produce. Very long ids are cut and suffixed with a hash after
    `~`, a character encoding never emits.
    """
    if task_id == "":
        return "%"
    out = "".join(c if _SAFE_CHAR.fullmatch(c) else "".join(f"%{b:02X}" for b in _utf8(c)) for c in task_id)
    if out.startswith("."):
        out = "%2E" + out[1:]
    if len(out) > _MAX_LEN:
        digest = hashlib.sha256(_utf8(task_id)).hexdigest()[:16]
        out = out[:_MAX_LEN - 17] + "~" + digest
    return out


def pair_key(task_id: str, sample: int) -> str:
    """Queue file stem of a (task, sample) pair."""
    return f"{encode_task_id(task_id)}__{sample}"
