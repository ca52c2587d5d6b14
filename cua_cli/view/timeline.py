"""The report's timeline page: where each env slot's time went, attempt by attempt (lanes.py), over
the model servers' and GPUs' load (curves.py), on one time axis (timespan.py). Inline SVG written
here; the page's script only draws the axis's ticks and zooms. Its size is bounded: a run too large to
draw attempt by attempt is drawn as bands (one image), and the curves as means per slice of the run.
"""

from .._util.text import percent
from ..runfolder.reader import RunReader
from ..stats.timing import timing_figures
from .curves import GAP, PANEL_H, panels
from .lanes import MAX_BARS, MAX_ROWS, MAX_STEPS, ROW_H, STACK, bands_svg, bars_svg, name, placed, rows_of, step_times
from .timespan import BINS, WIDTH, Span, esc, is_time

AXIS_H = 22
LABEL_W = 250
ZOOMS = (1, 2, 4, 8, 16, 32)
KEYS = {"allocate": "getting an env or desktop", "setup": "the task's reset and setup steps",
        "observe": "screenshots and other observations", "model": "model calls (re-asks too)",
        "act": "actions", "other": "what no phase claims: the agent's own work, writing the trajectory",
        "evaluate": "the task's evaluation", "release": "giving the env back",
        "untimed": "an attempt recorded without phases", "idle": "no attempt in the slot"}


def _claim_wait(r: dict) -> float:
    w = r.get("claim_wait_s")
    return w if type(w) in (int, float) and 0 <= w <= 1e9 else 0.0


def _seconds(s) -> str:
    if s is None:
        return "–"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _cards(fig: dict, drawn: int, attempts: int) -> str:
    env = fig.get("env") or {}
    cards = [("attempts drawn", f"{drawn} of {attempts}"), ("lanes", fig.get("lanes") or "–"),
             ("wall time", _seconds(fig.get("wall_s"))), ("env busy", percent(env.get("busy"), "%")),
             ("model busy", percent(fig.get("model_busy"), "%")), ("largest wait", fig.get("largest_wait") or "–")]
    return "".join(f'<div class="card">{esc(k)}<b>{esc(str(v))}</b></div>' for k, v in cards)


def _legend(mode: str, span: Span, rows: int, lanes: int, stepped: list) -> str:
    if mode == "bands":
        drawn = (f"Too many attempts ({MAX_BARS} at most) or lanes ({MAX_ROWS} at most) to draw one by one: each row "
                 f"is {'a lane' if rows == lanes else 'a group of neighbouring lanes'}, and each of its {BINS} "
                 f"columns a slice of the run ({span.bin_s:.3g} s) showing the share of its slots' time in each phase, "
                 f"stacked from the bottom; the rest is idle. Hover over a row for its totals.")
    else:
        steps = "then observe, model and act, each summed over its steps"
        if mode == "steps":
            found = sum(map(bool, stepped))
            steps = ("then each step's observe, model and act where it happened (its time and timings in traj.jsonl"
                     + (")" if found == len(stepped) else f"; {found} of {len(stepped)} attempts, the others' summed)"))
        drawn = (f"One row per lane (the env slot that played the attempts), each attempt a bar of its phases in the "
                 f"order it spends them: allocate and setup from its start, {steps}, then evaluate and release up to "
                 f"its end. Gaps between bars are idle slot time; an attempt that ended in an error is outlined in "
                 f"red. Hover over a bar for its task and the seconds of each phase.")
    keys = "".join(f'<span class="key" title="{esc(KEYS[k])}"><svg width="12" height="12">'
                   f'<rect class="p-{k}" width="12" height="12"/></svg>{k}</span>'
                   for k in [name(p) for p in STACK] + ["idle"])
    curves = ('<span class="key"><svg width="16" height="12"><path class="c-running" d="M0 6H16"/></svg>'
              'requests running</span><span class="key"><svg width="16" height="12"><path class="c-waiting" '
              'd="M0 6H16"/></svg>requests waiting</span><span class="key"><svg width="12" height="12"><rect '
              'class="c-kv" width="12" height="12"/></svg>KV cache used (panel height = 100%)</span>'
              '<span class="key"><svg width="16" height="12"><path class="c-gpu" d="M0 6H16"/></svg>GPU utilisation'
              '</span>')
    return (f'<p class="legend-text">{esc(drawn)} Under the lanes, per model server and for the GPUs, the means per '
            f'slice of the run of the samples in metrics.jsonl.</p><div class="legend">{keys}</div>'
            f'<div class="legend">{curves}</div>')


def _notes(attempts: list, bars: list, unplaced: int, metrics: list[dict]) -> list[str]:
    notes = []
    if not attempts:
        notes.append("No attempt has finished yet.")
    elif not bars:
        notes.append("The episode lines of this run have no start times or phases: it was written before cua timed "
                     "each attempt (or by another tool), so there are no lanes to draw.")
    elif unplaced:
        notes.append(f"{unplaced} of {len(attempts)} attempts have no start time (written before cua timed attempts, "
                     "or for an attempt that never started): not drawn.")
    untimed = sum(a.phases is None for a in bars)
    if untimed:
        notes.append(f"{untimed} attempts have a start and a duration but no phases: drawn as '{name(STACK[-1])}'.")
    if not any("server" in m for m in metrics):
        notes.append("No model server samples (metrics.jsonl is missing or has none: the random, replay and script "
                     "providers have no servers, and a server without /metrics is not sampled).")
    return notes


def _lanes(run: str, bars: list, rows: list, span: Span) -> tuple[str, str, list]:
    """The lanes' SVG, how they are drawn (bands, bars or steps), and per attempt asked whether its steps
    were found."""
    if len(bars) > MAX_BARS or sum(len(r.lanes) for r in rows) > MAX_ROWS:
        return bands_svg(rows, span), "bands", []
    if sum(a.rec.get("steps") or 0 for a in bars) > MAX_STEPS:
        return bars_svg(rows, span), "bars", []
    stepped = []

    def steps_of(a):
        found = step_times(run, a.rec)
        stepped.append(found is not None)
        return found

    svg = bars_svg(rows, span, steps_of)
    return svg, "steps" if any(stepped) else "bars", stepped


def _figure(rows: list, lanes_svg: str, found: list, span: Span, mode: str) -> str:
    """The labels beside the plot, the plot (lanes, then the curves' panels) in its scrolling frame."""
    labels, plot, y = [], [lanes_svg], len(rows) * ROW_H
    for i, row in enumerate(rows):
        labels.append(f'<text class="lane-label" x="{LABEL_W - 6}" y="{i * ROW_H + 11}">{esc(row.label)}'
                      f'<title>{esc(row.title)}</title></text>')
    for p in found:
        y += GAP
        labels.append(f'<text class="panel-label" x="{LABEL_W - 6}" y="{y + 14}">{esc(p.label)}</text>'
                      f'<text class="panel-legend" x="{LABEL_W - 6}" y="{y + 28}">{esc(p.legend)}</text>')
        plot.append(f'<g transform="translate(0 {y})">{p.body}</g>')
        y += PANEL_H
    height = max(y, 1)
    zoom = "".join(f'<option value="{z}">{z}×</option>' for z in ZOOMS)
    return (f'<div class="controls"><label>zoom <select id="tl-zoom">{zoom}</select></label>'
            f'<span>time from the run\'s start; drag the scroll bar to move along</span></div>'
            f'<div id="timeline" class="tl" data-span="{span.seconds!r}" data-mode="{mode}">'
            f'<svg class="tl-labels" width="{LABEL_W}" height="{height + AXIS_H}">'
            f'<g transform="translate(0 {AXIS_H})">{"".join(labels)}</g></svg>'
            f'<div class="tl-scroll"><div class="tl-inner"><div class="tl-axis"></div>'
            f'<svg class="tl-plot" viewBox="0 0 {WIDTH} {height}" preserveAspectRatio="none" width="100%" '
            f'height="{height}">{"".join(plot)}</svg></div></div></div>')


def timeline_page(reader: RunReader, metrics: list[dict]) -> str:
    """The page's <header> and <main>, for the report's page frame. `reader` keeps every attempt."""
    attempts = reader.attempts or []
    bars, unplaced = placed(attempts)
    if bars:  # from the first slot's wait for its first claim: the rollout's start
        span = Span(min(a.start - _claim_wait(a.rec) for a in bars), max(a.end for a in bars))
    else:
        times = [m["t"] for m in metrics if is_time(m["t"])]
        span = Span(min(times), max(times)) if times else None
    fig = timing_figures(reader.path, reader, metrics)
    html = (f'<header><h1>{esc(reader.path.name)} · timeline</h1><a href="index.html">all episodes</a></header>'
            f'<main><div class="cards">{_cards(fig, len(bars), len(attempts))}</div>'
            + "".join(f'<p class="note">{esc(n)}</p>' for n in _notes(attempts, bars, unplaced, metrics)))
    if span is None:
        return html + "</main>"
    rows = rows_of(bars)
    lanes_svg, mode, stepped = _lanes(str(reader.path), bars, rows, span)
    found, left_out = panels(metrics, span)
    return (html + _legend(mode, span, len(rows), sum(len(r.lanes) for r in rows), stepped)
            + "".join(f'<p class="note">{esc(n)}</p>' for n in left_out)
            + _figure(rows, lanes_svg, found, span, mode) + "</main>")
