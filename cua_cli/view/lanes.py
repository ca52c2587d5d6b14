"""The timeline's lanes: one row per env slot (an episode line's `lane`), each attempt drawn as its
phases in colour. A run too large to draw attempt by attempt gets one band per row instead: per
slice of time, the share of the row's slot time in each phase, stacked (idle above); lanes beyond
MAX_ROWS are grouped, so the page's size depends on neither the attempts nor the lanes.

Phases are totals per attempt (runfolder/records.py PHASES), drawn in the order an attempt spends
them: allocate and setup from its start, evaluate and release up to its end, observe, model and act
between. When the run is small its steps' own times (traj.jsonl `time` and `timings`) place each
step's observe, model and act where it happened. What no phase claims (`other`) is the bar itself.
"""

import base64
import io
import math
import re
from dataclasses import dataclass

import numpy as np
from PIL import Image

from .._util.text import clip
from ..runfolder.confined import Refused, confined_dir
from ..runfolder.reader import read_steps
from ..runfolder.records import PHASES, phases_of
from .timespan import BINS, WIDTH, Span, clock, esc, is_time

HEAD, MIDDLE, TAIL = ("allocate_s", "setup_s"), ("observe_s", "model_s", "act_s"), ("evaluate_s", "release_s")
UNTIMED = "untimed"  # an attempt with a start and a duration but no phases
# Bands stack from the bottom in this order; each has its CSS class p-<name>.
STACK = HEAD + MIDDLE + ("other_s",) + TAIL + (UNTIMED,)
ROW_H, BAR_H, BAND_H = 14, 10, 12
COLOURS = {"allocate": "#8250df", "setup": "#d4a72c", "observe": "#4ac26b", "model": "#0969da", "act": "#1a7f37",
           "other": "#afb8c1", "evaluate": "#e16f24", "release": "#c297ff", "untimed": "#d0d7de", "idle": "#eef1f4"}
MAX_ROWS = 100     # lanes beyond this are drawn in groups
MAX_BARS = 1200    # attempts drawn one by one at most (under 1 KB each); beyond, bands
MAX_STEPS = 3000   # steps read from their traj.jsonl and drawn at their times at most
MIN_W = 0.02       # a segment narrower (plot units) stays under a pixel at the deepest zoom: not drawn
_NAME_MAX = 40


def name(phase: str) -> str:
    return phase.removesuffix("_s")


@dataclass
class Attempt:
    rec: dict
    start: float
    end: float
    phases: dict | None
    lane: str | None


def placed(attempts: list[dict]) -> tuple[list[Attempt], int]:
    """The attempts that can be put on a time axis (a start time and a duration), and how many cannot
    (lines written before cua timed attempts, or for one it never started)."""
    out = []
    for r in attempts:
        start, duration = r.get("started_at"), r.get("duration_s")  # duration_s is checked by episode_record
        if is_time(start) and duration is not None:
            lane = r.get("lane") if type(r.get("lane")) is str else None
            out.append(Attempt(r, start, start + duration, phases_of(r), lane))
    return out, len(attempts) - len(out)


def lane_key(lane: str | None):
    """host/pid/slot in natural order (slot 10 after slot 9); attempts without a lane last."""
    if lane is None:
        return (1,)
    # Runs of digits (the odd parts of the split) compare by their length, then by their digits: no int(),
    # which refuses a crafted one of 5,000 digits.
    return (0, *((0, len(p.lstrip("0")), p.lstrip("0")) if i % 2 else (1, 0, p)
                 for i, p in enumerate(re.split(r"(\d+)", lane))))


def lane_label(lane: str | None) -> str:
    return "(no lane)" if lane is None else lane


@dataclass
class Row:
    lanes: list
    attempts: list[Attempt]

    @property
    def label(self) -> str:
        first = clip(lane_label(self.lanes[0]), _NAME_MAX if len(self.lanes) == 1 else 18)
        return first if len(self.lanes) == 1 else f"{first} +{len(self.lanes) - 1} ({len(self.lanes)} slots)"

    @property
    def title(self) -> str:
        if len(self.lanes) == 1:
            return clip(lane_label(self.lanes[0]), 300)
        return (f"{len(self.lanes)} slots, {clip(lane_label(self.lanes[0]), 120)} to "
                f"{clip(lane_label(self.lanes[-1]), 120)}")


def rows_of(attempts: list[Attempt]) -> list[Row]:
    """One row per lane, in lane order; at most MAX_ROWS rows, neighbouring lanes grouped."""
    by: dict = {}
    for a in attempts:
        by.setdefault(a.lane, []).append(a)
    lanes = sorted(by, key=lane_key)
    size = math.ceil(len(lanes) / MAX_ROWS) if lanes else 1
    groups = [lanes[i:i + size] for i in range(0, len(lanes), size)]
    return [Row(g, [a for lane in g for a in by[lane]]) for g in groups]


def segments(a: Attempt, steps: list | None = None, with_other: bool = False) -> list[tuple[str, float, float]]:
    """(phase, from, to) of an attempt: the head phases from its start, the tail up to its end, the
    steps' phases between (summed, or at their own times). other_s only `with_other` (a bar shows it
    behind the rest), after the summed steps. Phases that do not add up to its duration are scaled to it."""
    if a.phases is None:
        return [(UNTIMED, a.start, a.end)]
    total = sum(a.phases[p] for p in PHASES)
    if total <= 0:
        return [("other_s", a.start, a.end)] if with_other else []
    k = (a.end - a.start) / total
    out, t = [], a.start
    for p in HEAD:
        out.append((p, t, t + a.phases[p] * k))
        t += a.phases[p] * k
    tail, u = [], a.end
    for p in reversed(TAIL):
        tail.append((p, u - a.phases[p] * k, u))
        u -= a.phases[p] * k
    if steps is None:
        for p in MIDDLE + (("other_s",) if with_other else ()):
            out.append((p, t, t + a.phases[p] * k))
            t += a.phases[p] * k
    else:
        for at, *timings in steps:
            for p, s in zip(MIDDLE, timings):
                lo, hi = max(at, t), min(at + s, u)
                if hi > lo:
                    out.append((p, lo, hi))
                at += s
    return out + tail[::-1]


def step_times(run: str, rec: dict) -> list[tuple] | None:
    """(start, observe s, model s, act s) of each step of an attempt, from its traj.jsonl; None when it
    has none to read. Bad lines are left out quietly: the episode page warns about them."""
    if not isinstance(rec.get("traj"), str) or not rec["traj"]:
        return None
    try:
        steps, _, _ = read_steps(confined_dir(run, rec["traj"]))
    except (Refused, OSError):
        return None
    out = []
    for _, st in steps:
        t, tm = st.get("time"), st.get("timings")
        if is_time(t) and type(tm) is dict:
            vals = [tm.get(k) for k in ("env_s", "model_s", "act_s")]
            if all(type(v) in (int, float) and 0 <= v <= 1e9 for v in vals):
                out.append((t, *vals))
    return out or None


def _attempt_title(a: Attempt, span: Span, steps: list | None) -> str:
    r = a.rec
    lines = [f"{r['task_id']} · sample {r['sample']} · attempt {r['attempt']}",
             f"{r['outcome']} ({r.get('stop_reason')}) · {r.get('steps')} steps"
             + (f", {len(steps)} drawn at their times" if steps else ""),
             f"{clock(a.start - span.t0)} · {a.end - a.start:.2f} s · lane {lane_label(a.lane)}"]
    if a.phases is None:
        lines.append("no phases recorded")
    else:
        lines += [f"{name(p)} {a.phases[p]:.3f} s" for p in PHASES]
    if r.get("error"):
        lines.append("error: " + " ".join(r["error"].split()))
    return clip("\n".join(clip(line, 300) for line in lines), 2000)


def _rect(cls: str, x0: float, x1: float, y: float, h: float) -> str:
    return f'<rect class="{cls}" x="{x0:.2f}" y="{y:g}" width="{x1 - x0:.2f}" height="{h:g}"/>'


def bars_svg(rows: list[Row], span: Span, steps_of=None) -> str:
    """Each attempt as a bar of its phases, one row per lane. `steps_of(attempt)` gives its step times
    (or None): only asked when the run is small enough."""
    out = []
    for i, row in enumerate(rows):
        y = i * ROW_H + (ROW_H - BAR_H) / 2
        out.append(f'<g class="lane" data-lane="{esc(row.title)}">'
                   f'<rect class="p-idle" x="0" y="{y:g}" width="{WIDTH}" height="{BAR_H}"/>')
        for a in sorted(row.attempts, key=lambda a: a.start):
            steps = steps_of(a) if steps_of and a.phases is not None else None
            x0, x1 = span.x(a.start), span.x(a.end)
            title = esc(_attempt_title(a, span, steps))
            out.append(f'<g class="attempt {a.rec["outcome"]}"><title>{title}</title>'
                       + _rect("bar", x0, max(x1, x0 + MIN_W), y, BAR_H))
            for p, t0, t1 in segments(a, steps):
                s0, s1 = span.x(t0), span.x(t1)
                if s1 - s0 >= MIN_W:
                    out.append(_rect(f"p-{name(p)}", s0, s1, y, BAR_H))
            out.append("</g>")
        out.append("</g>")
    return "".join(out)


def _add(column: np.ndarray, span: Span, t0: float, t1: float) -> None:
    """Adds the seconds of [t0, t1] to the slices they fall in."""
    if t1 <= t0:
        return
    b0, b1 = span.bin(t0), span.bin(t1)
    if b0 == b1:
        column[b0] += t1 - t0
        return
    edge = lambda b: span.t0 + b * span.bin_s  # noqa: E731
    column[b0] += edge(b0 + 1) - t0
    column[b0 + 1:b1] += span.bin_s
    column[b1] += t1 - edge(b1)


def _band_pixels(share: np.ndarray) -> np.ndarray:
    """A row's band as palette indices (BAND_H x BINS): per column, the phases stacked from the bottom by
    their shares, idle (len(STACK)) above them."""
    cum = np.minimum(np.cumsum(share, axis=1), 1.0) * BAND_H
    levels = BAND_H - 0.5 - np.arange(BAND_H)  # pixel centres, from the top row down
    return (cum[None, :, :] <= levels[:, None, None]).sum(axis=2)


def _png(pixels: np.ndarray) -> str:
    """Palette image as a data URL: gaps between rows transparent."""
    img = Image.fromarray(pixels.astype(np.uint8), mode="P")
    palette = [COLOURS[name(p)] for p in STACK] + [COLOURS["idle"], "#ffffff"]
    img.putpalette([int(c[i:i + 2], 16) for c in palette for i in (1, 3, 5)])
    buf = io.BytesIO()
    img.save(buf, "PNG", optimize=True, transparency=len(STACK) + 1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def bands_svg(rows: list[Row], span: Span) -> str:
    """Each row as the share of its slots' time in each phase, per slice of the run: one image (its size
    bound by rows x slices however many attempts), a hover title per row."""
    pixels = np.full((len(rows) * ROW_H, BINS), len(STACK) + 1)
    out = []
    for i, row in enumerate(rows):
        sec = np.zeros((BINS, len(STACK)))
        for a in row.attempts:
            for p, t0, t1 in segments(a, with_other=True):
                _add(sec[:, STACK.index(p)], span, t0, t1)
        top = i * ROW_H + (ROW_H - BAND_H) // 2
        pixels[top:top + BAND_H] = _band_pixels(sec / (span.bin_s * len(row.lanes)))
        totals = sec.sum(axis=0) / (span.seconds * len(row.lanes))
        parts = [f"{name(p)} {100 * v:.1f}%" for p, v in zip(STACK, totals) if v > 0]
        title = (f"{row.title}\n{len(row.attempts)} attempts · busy {100 * min(totals.sum(), 1.0):.1f}%\n"
                 + " · ".join(parts))
        out.append(f'<g class="lane band" data-lane="{esc(row.title)}"><title>{esc(title)}</title>'
                   f'<rect class="hit" x="0" y="{i * ROW_H}" width="{WIDTH}" height="{ROW_H}"/></g>')
    image = (f'<image class="bands" href="{_png(pixels)}" x="0" y="0" width="{WIDTH}" height="{len(rows) * ROW_H}" '
             f'preserveAspectRatio="none"/>')
    return image + "".join(out)
