"""The timeline's time axis, shared by its lanes and its curves: seconds of the run mapped to plot units.

The plot is WIDTH units across whatever the page's width and zoom; its height is in pixels. Sums
over time (the lanes of a large run, the curves) are taken in BINS equal slices of the span.
"""

import html
import re
from dataclasses import dataclass

WIDTH = 1000   # plot units across
BINS = 500     # two units each


@dataclass(frozen=True)
class Span:
    t0: float
    t1: float

    @property
    def seconds(self) -> float:
        return max(self.t1 - self.t0, 1e-6)

    def x(self, t: float) -> float:
        return (t - self.t0) / self.seconds * WIDTH

    def bin(self, t: float) -> int:
        """The slice `t` falls in, those before and after the span put in the first and the last."""
        return min(BINS - 1, max(0, int((t - self.t0) / self.seconds * BINS)))

    @property
    def bin_s(self) -> float:
        return self.seconds / BINS


def clock(s: float) -> str:
    """Seconds since the run's start as +H:MM:SS.s."""
    s = max(0.0, s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"+{int(h)}:{int(m):02d}:{sec:04.1f}"


def is_time(v) -> bool:
    """A Unix time from a record: a number from 1970 to about 5000 (NaN fails the test)."""
    return type(v) in (int, float) and 0 <= v <= 1e11


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def esc(text: str) -> str:
    """Text from a run folder for the timeline's SVG: escaped, and characters XML forbids shown as U+FFFD,
    so that a crafted lane or task id reads the same in every parser."""
    return html.escape(_NOT_XML.sub("\ufffd", text))
