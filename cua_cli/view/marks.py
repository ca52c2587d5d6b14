"""Where the agent acted, drawn over its screenshot as an SVG overlay."""

import html


def marks_svg(actions: list[dict], width: int, height: int) -> str:
    """Circles at points, arrows for drags; numbered when a step has several actions."""
    r = max(width, height) / 40 + 2
    stroke = max(width, height) / 200 + 1
    parts = [f'<svg viewBox="0 0 {width} {height}" preserveAspectRatio="none" class="marks">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="4" markerHeight="4" '
             'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#cf222e"/></marker></defs>']
    numbered = sum(1 for a in actions if a.get("x") is not None) > 1
    for i, a in enumerate(actions, 1):
        if a.get("x") is None:
            continue
        x, y = a["x"], a["y"]
        kind = html.escape(a.get("type", ""))
        parts.append(f'<circle class="mark mark-{kind}" cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="rgba(207,34,46,.25)" '
                     f'stroke="#cf222e" stroke-width="{stroke:.1f}"/>'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{stroke:.1f}" fill="#cf222e"/>')
        if a.get("x2") is not None:
            parts.append(f'<line class="mark-drag" x1="{x:.1f}" y1="{y:.1f}" x2="{a["x2"]:.1f}" y2="{a["y2"]:.1f}" '
                         f'stroke="#cf222e" stroke-width="{stroke:.1f}" marker-end="url(#arrow)"/>')
        if numbered:
            parts.append(f'<text x="{x + r:.1f}" y="{y - r:.1f}" font-size="{r * 1.2:.1f}" fill="#cf222e">{i}</text>')
    parts.append("</svg>")
    return "".join(parts)
