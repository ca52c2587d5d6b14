"""The timeline's curves, under its lanes on the same time axis: per model server, the requests
running and waiting and the KV-cache usage; the GPUs' utilisation. From metrics.jsonl
(runfolder/records.py metric_record), as means per slice of the run (timespan.BINS), so a long run
draws as many points as a short one. A sample of a server that was down breaks its curves.
"""

from dataclasses import dataclass

from .._util.text import clip
from .timespan import BINS, WIDTH, Span, esc

PANEL_H, GAP = 56, 12
MAX_PANELS = 12       # servers beyond these are named in a note, not drawn
_LIMIT = 1e12         # a count of requests or a percentage beyond this is noise


@dataclass
class Panel:
    label: str      # beside the panel
    legend: str     # under the label
    body: str       # SVG, drawn from y = 0 (the page moves it down)


def _value(v, top: float = _LIMIT) -> float | None:
    return None if v is None else min(float(v), top)


def _binned(samples: list[dict], span: Span, keys: tuple, tops: tuple) -> list[tuple[float, list | None]]:
    """(x, means of `keys` or None when the source was down) per slice that has samples."""
    acc: dict[int, list] = {}
    for s in samples:
        if not span.t0 <= s["t"] <= span.t1:
            continue
        slot = acc.setdefault(span.bin(s["t"]), [0, [0.0] * len(keys), [0] * len(keys)])
        if s.get("up", True):
            slot[0] += 1
            for i, (k, top) in enumerate(zip(keys, tops)):
                v = _value(s.get(k), top)
                if v is not None:
                    slot[1][i] += v
                    slot[2][i] += 1
    step = WIDTH / BINS
    return [((b + 0.5) * step, [t / n if n else None for t, n in zip(sums, counts)] if up else None)
            for b, (up, sums, counts) in sorted(acc.items())]


def _line(cls: str, points: list[tuple[float, float | None]], y) -> str:
    d, pen = [], False
    for x, v in points:
        if v is None:
            pen = False
            continue
        d.append(f"{'L' if pen else 'M'}{x:g} {y(v):.1f}")
        pen = True
    return f'<path class="{cls}" d="{"".join(d)}"/>' if d else ""


def _area(cls: str, points: list[tuple[float, float | None]], y, bottom: float) -> str:
    d, run = [], []
    for x, v in points + [(None, None)]:
        if v is None:
            if run:
                d.append(f"M{run[0][0]:g} {bottom:g}" + "".join(f"L{px:g} {y(pv):.1f}" for px, pv in run)
                         + f"L{run[-1][0]:g} {bottom:g}Z")
            run = []
        else:
            run.append((x, v))
    return f'<path class="{cls}" d="{"".join(d)}"/>' if d else ""


def nice_top(v: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at or above v (at least 1)."""
    top = 1.0
    while True:
        for m in (1, 2, 5):
            if top * m >= v:
                return top * m
        top *= 10


def _kv_fraction(v) -> float | None:
    return None if v is None else min(max(float(v), 0.0), 1.0)


def server_panel(server: str, samples: list[dict], span: Span) -> Panel | None:
    points = _binned(samples, span, ("running", "waiting", "kv_usage"), (_LIMIT, _LIMIT, 1.0))
    if not points:
        return None
    vals = [v for _, m in points if m for v in m[:2] if v is not None]
    top = nice_top(max(vals, default=0.0))
    y = lambda v: PANEL_H - v / top * PANEL_H  # noqa: E731
    kv = [(x, _kv_fraction(m[2]) if m else None) for x, m in points]
    running = [(x, m[0] if m else None) for x, m in points]
    waiting = [(x, m[1] if m else None) for x, m in points]
    up = [s for s in samples if s.get("up")]
    peak = lambda k: max((s.get(k) or 0 for s in up), default=0)  # noqa: E731
    kvs = [s["kv_usage"] for s in up if s.get("kv_usage") is not None]
    title = (f"{server}\n{len(samples)} samples, {len(samples) - len(up)} down\n"
             f"running: max {peak('running'):g} · waiting: max {peak('waiting'):g}"
             + (f" · KV cache: mean {100 * sum(kvs) / len(kvs):.1f}%, max {100 * max(kvs):.1f}%" if kvs else ""))
    body = (f'<g class="curves server" data-server="{esc(server)}"><title>{esc(clip(title, 2000))}</title>'
            f'<rect class="panel-bg" x="0" y="0" width="{WIDTH}" height="{PANEL_H}"/>'
            + _area("c-kv", kv, lambda v: PANEL_H - v * PANEL_H, PANEL_H)
            + _line("c-waiting", waiting, y) + _line("c-running", running, y) + "</g>")
    return Panel(clip(server, 40), f"running · waiting (0–{top:g}) · KV %", body)


def gpu_panel(samples: list[dict], span: Span) -> Panel | None:
    gpus = sorted({s["gpu"] for s in samples})
    lines, titles = [], []
    for g in gpus[:MAX_PANELS]:
        mine = [s for s in samples if s["gpu"] == g]
        points = _binned(mine, span, ("util",), (100.0,))
        lines.append(_line("c-gpu", [(x, m[0] if m else None) for x, m in points],
                           lambda v: PANEL_H - v / 100 * PANEL_H))
        utils = [s["util"] for s in mine if s.get("util") is not None]
        titles.append(f"GPU {g}: util mean {sum(utils) / len(utils):.0f}%" if utils else f"GPU {g}: no util")
    if not any(lines):
        return None
    title = "\n".join(titles) + (f"\n{len(gpus) - MAX_PANELS} more GPUs not drawn" if len(gpus) > MAX_PANELS else "")
    body = (f'<g class="curves gpus"><title>{esc(title)}</title>'
            f'<rect class="panel-bg" x="0" y="0" width="{WIDTH}" height="{PANEL_H}"/>{"".join(lines)}</g>')
    return Panel(f"GPUs ({len(gpus)})", "utilisation (0–100%)", body)


def panels(metrics: list[dict], span: Span) -> tuple[list[Panel], list[str]]:
    """The panels to draw under the lanes, and notes on what was left out."""
    by: dict[str, list] = {}
    for m in metrics:
        if "server" in m:
            by.setdefault(m["server"], []).append(m)
    out, notes = [], []
    names = sorted(by)
    for server in names[:MAX_PANELS]:
        p = server_panel(server, sorted(by[server], key=lambda s: s["t"]), span)
        if p:
            out.append(p)
    if len(names) > MAX_PANELS:
        more = len(names) - MAX_PANELS
        notes.append(f"{more} more model server{'s are' if more > 1 else ' is'} not drawn "
                     "(cua stats --timing has them all).")
    gpu = gpu_panel([m for m in metrics if "gpu" in m], span)
    if gpu:
        out.append(gpu)
    return out, notes
