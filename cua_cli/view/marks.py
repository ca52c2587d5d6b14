"""Where the agent acted, drawn over its screenshot as an SVG overlay."""

import html
import math


def _coord(v) -> float | None:
    """A coordinate from a step file, or None when it is not a finite number."""
    if type(v) not in (int, float):
        return None
    try:
        return float(v) if math.isfinite(v) else None
    except OverflowError:
        return None


def marks_svg(actions: list, width: int, height: int) -> str:
    """Circles at points, arrows for drags; numbered when a step has several actions."""
    r = max(width, height) / 40 + 2
    stroke = max(width, height) / 200 + 1
    parts = [f'<svg viewBox="0 0 {width} {height}" preserveAspectRatio="none" class="marks">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="4" markerHeight="4" '
             'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#cf222e"/></marker></defs>']
    points = [(i, a) for i, a in enumerate(actions, 1)
              if isinstance(a, dict) and _coord(a.get("x")) is not None and _coord(a.get("y")) is not None]
    for i, a in points:
        x, y = _coord(a["x"]), _coord(a["y"])
        kind = html.escape(str(a.get("type", "")))
        parts.append(f'<circle class="mark mark-{kind}" cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="rgba(207,34,46,.25)" '
                     f'stroke="#cf222e" stroke-width="{stroke:.1f}"/>'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{stroke:.1f}" fill="#cf222e"/>')
        x2, y2 = _coord(a.get("x2")), _coord(a.get("y2"))
        if x2 is not None and y2 is not None:
            parts.append(f'<line class="mark-drag" x1="{x:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                         f'stroke="#cf222e" stroke-width="{stroke:.1f}" marker-end="url(#arrow)"/>')
        if len(points) > 1:
            parts.append(f'<text x="{x + r:.1f}" y="{y - r:.1f}" font-size="{r * 1.2:.1f}" fill="#cf222e">{i}</text>')
    parts.append("</svg>")
    return "".join(parts)
