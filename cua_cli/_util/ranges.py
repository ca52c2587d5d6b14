"""Number lists written as ranges: `0-99,200,300-310` (task numbers, seeds)."""


def parse_ranges(spec: str, highest: int) -> list[range]:
    """The ranges of `spec`, in the order written; ValueError naming the bad part.

    Numbers are at most `highest`, and none may be listed twice. Ranges are
    not expanded, so `0-9007199254740991` costs nothing until it is used.
    """
    ranges = []
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        if not all(b.isascii() and b.isdigit() and len(b) <= 20 for b in ((first, last) if dash else (first,))):
            raise ValueError(f"{part.strip()[:40]!r} is not a number or a range like 0-99")
        lo, hi = int(first), int(last if dash else first)
        if not lo <= hi <= highest:
            raise ValueError(f"range {part.strip()!r} needs low <= high <= {highest}")
        ranges.append(range(lo, hi + 1))
    ordered = sorted(ranges, key=lambda r: r.start)
    for a, b in zip(ordered, ordered[1:]):
        if b.start < a.stop:
            raise ValueError(f"{b.start} is listed twice")
    return ranges
