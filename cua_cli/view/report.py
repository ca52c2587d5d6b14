"""Builds the static report: index.html (summary, per-domain chart, a filterable
table of every pair) and one page per (task, sample) with every step drawn.

Pages only reference screenshots (relative links), so a report inside the
run folder adds a few KB per episode; a report written elsewhere hard-links
(or copies) the screenshots so it stays self-contained. Works on a run that
is still going: unfinished pairs are listed as missing.
"""

import html
import json
import os
import shutil
from pathlib import Path
from urllib.parse import quote

from ..jsonl import read_lines
from ..names import pair_key
from ..results import RunReader
from ..stats.compare import task_scores
from ..stats.figures import run_figures
from ..stats.readers import from_reader
from .assets import CSS, INDEX_JS
from .marks import marks_svg

E = html.escape


def _page(title: str, body: str, css_href: str, script: str = "") -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{E(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="stylesheet" href="{css_href}"></head><body>{body}{script}</body></html>')


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


class Report:
    def __init__(self, run_path, out_dir=None):
        self.run = Path(run_path).resolve()
        if not (self.run / "scheduled.jsonl").exists():
            raise FileNotFoundError(f"{run_path}: not a cua run folder (no scheduled.jsonl)")
        self.out = Path(out_dir).resolve() if out_dir else self.run / "view"
        self.inside = self.out.is_relative_to(self.run)
        self.reader = RunReader(self.run).refresh(warn=True)
        self.data = from_reader(self.reader)  # the same reading feeds the figures
        self.pairs = sorted(self.reader.scheduled, key=lambda p: (str(p[0]), p[1]))

    def page_path(self, pair) -> Path:
        return self.out / "episodes" / f"{pair_key(*pair)}.html"

    def href(self, pair) -> str:
        """URL of a pair's page, relative to the report folder (file names may hold '%')."""
        return "episodes/" + quote(f"{pair_key(*pair)}.html")

    def build(self) -> Path:
        (self.out / "episodes").mkdir(parents=True, exist_ok=True)
        (self.out / "style.css").write_text(CSS)
        (self.out / "index.js").write_text(INDEX_JS)
        for i, pair in enumerate(self.pairs):
            prev = self.pairs[i - 1] if i > 0 else None
            nxt = self.pairs[i + 1] if i + 1 < len(self.pairs) else None
            self.page_path(pair).write_text(self._episode_page(pair, prev, nxt))
        index = self.out / "index.html"
        index.write_text(self._index_page())
        return index

    # -- index --------------------------------------------------------------
    def _index_page(self) -> str:
        fig = run_figures(self.data)
        ci = fig["ci95"]
        cards = [("success rate", _pct(fig["success_rate"]) + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "")),
                 ("scheduled", fig["scheduled"]), ("finished", fig["finished"]), ("missing", fig["missing"]),
                 ("errors", fig["errors"]), ("success of finished", _pct(fig["success_rate_finished"]))]
        cards_html = "".join(f'<div class="card">{E(k)}<b>{E(str(v))}</b></div>' for k, v in cards)
        errors = ", ".join(f"{E(k)}: {v}" for k, v in sorted(fig["errors_by_stop_reason"].items())) or "none"
        rows = []
        for pair in self.pairs:
            rec = self.reader.final.get(pair)
            rows.append({"task_id": pair[0], "domain": self.reader.scheduled[pair], "sample": pair[1],
                         "outcome": rec["outcome"] if rec else "missing",
                         "score": rec.get("score") if rec else None, "steps": rec.get("steps") if rec else None,
                         "duration_s": rec.get("duration_s") if rec else None,
                         "stop_reason": rec.get("stop_reason") if rec else None, "href": self.href(pair)})
        domains = sorted({str(r["domain"]) for r in rows})
        options = "".join(f'<option value="{E(d)}">{E(d)}</option>' for d in domains)
        outcomes = "".join(f'<option value="{o}">{o}</option>' for o in ("success", "failure", "error", "missing"))
        # Inside a <script> block only "</" can end it early; escape it.
        data = json.dumps(rows, ensure_ascii=False).replace("</", "<\\/")
        headers = "".join(f'<th data-key="{k}">{label}</th>' for k, label in (
            ("task_id", "task"), ("domain", "domain"), ("sample", "sample"), ("outcome", "outcome"),
            ("score", "score"), ("steps", "steps"), ("duration_s", "duration (s)"), ("stop_reason", "stop reason")))
        body = f"""<header><h1>{E(self.run.name)}</h1></header><main>
<div class="cards">{cards_html}</div>
<p>Errors by stop reason: {errors}. Missing pairs and errors count 0 in the success rate.</p>
<h2>Success rate by domain</h2>{_domain_chart(fig["domains"])}
<h2>Episodes</h2>
<div class="controls">
 <label>outcome <select id="f-outcome"><option value="">all</option>{outcomes}</select></label>
 <label>domain <select id="f-domain"><option value="">all</option>{options}</select></label>
 <label>task <input id="f-text" type="search" placeholder="filter task ids"></label>
 <span id="shown"></span><button id="prev">previous page</button><button id="next">next page</button>
</div>
<table id="episodes"><thead><tr>{headers}</tr></thead><tbody></tbody></table>
</main><script id="rows" type="application/json">{data}</script>"""
        return _page(f"cua run {self.run.name}", body, "style.css", '<script src="index.js"></script>')

    # -- episode pages ------------------------------------------------------
    def _shot_src(self, traj_dir: Path, name: str) -> str:
        src = traj_dir / name
        if self.inside:
            return quote(os.path.relpath(src, self.out / "episodes"))
        dst = self.out / "shots" / traj_dir.relative_to(self.run) / name
        if not dst.exists() and src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
        return quote(os.path.relpath(dst, self.out / "episodes"))

    def _episode_page(self, pair, prev, nxt) -> str:
        rec = self.reader.final.get(pair)
        task_id, sample = pair
        nav = (f'<div class="nav"><span>{self._link(prev, "&larr; previous")}</span>'
               f'<a href="../index.html">all episodes</a><span>{self._link(nxt, "next &rarr;")}</span></div>')
        head = f"<header><h1>{E(task_id)} · sample {sample}</h1></header>"
        if rec is None:
            body = f'{head}<main>{nav}<p class="missing">Not finished (yet): this pair counts as missing.</p></main>'
            return _page(task_id, body, "../style.css")
        outcome = rec["outcome"]
        facts = [("outcome", f'<span class="outcome {E(outcome)}">{E(outcome)}</span>'),
                 ("score", E(str(rec.get("score")))), ("reward", E(str(rec.get("reward")))),
                 ("steps", E(str(rec.get("steps")))), ("stop reason", E(str(rec.get("stop_reason")))),
                 ("duration", f'{rec.get("duration_s", 0):.1f} s'), ("attempt", E(str(rec.get("attempt")))),
                 ("domain", E(str(rec.get("domain"))))]
        facts_html = "".join(f'<div class="card">{k}<b>{v}</b></div>' for k, v in facts)
        error = f'<pre class="bad-text">{E(rec["error"])}</pre>' if rec.get("error") else ""
        steps_html = ""
        if rec.get("traj"):
            traj_dir = self.run / rec["traj"]
            for st in read_lines(traj_dir / "traj.jsonl", warn=False):
                steps_html += self._step_html(traj_dir, st)
        body = (f'{head}<main>{nav}<h2>Instruction</h2><pre>{E(str(rec.get("instruction") or ""))}</pre>'
                f'<div class="cards">{facts_html}</div>{error}<h2>Steps</h2>{steps_html or "<p>No steps.</p>"}'
                f'{nav}</main>')
        return _page(f"{task_id} · {sample}", body, "../style.css")

    def _step_html(self, traj_dir: Path, st: dict) -> str:
        src = self._shot_src(traj_dir, st["screenshot"])
        w, h = st.get("width") or 0, st.get("height") or 0
        overlay = marks_svg(st.get("action") or [], w, h) if w and h else ""
        actions = "\n".join(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in a.items()},
                                        ensure_ascii=False) for a in st.get("action") or []) or "none"
        timings = ", ".join(f"{k} {v:.3f}s" for k, v in (st.get("timings") or {}).items())
        extra = f" · model {E(str(st['model_version']))}" if st.get("model_version") else ""
        err = f'<pre class="bad-text">{E(st["error"])}</pre>' if st.get("error") else ""
        return (f'<section class="step" id="step-{st["step"]}"><div class="shot">'
                f'<img src="{E(src)}" alt="screenshot of step {st["step"]}" width="{max(w * 2, 320) if w else 320}">'
                f'{overlay}</div><div><h2>Step {st["step"]}</h2>'
                f'<div>Thought</div><pre>{E(st.get("thought") or "")}</pre>'
                f'<div>Model response</div><pre>{E(st.get("response") or "")}</pre>'
                f'<div>Parsed action</div><pre>{E(actions)}</pre>{err}'
                f'<div>{E(timings)}{extra}</div></div></section>')

    def _link(self, pair, label: str) -> str:
        if pair is None:
            return ""
        return f'<a href="{E(quote(pair_key(*pair)))}.html">{label}</a>'


def _domain_chart(domains: dict) -> str:
    """Horizontal bars, one per domain, drawn as inline SVG."""
    if not domains:
        return "<p>No episodes.</p>"
    bar_w, row_h, label_w = 320, 22, 200
    height = row_h * len(domains) + 4
    parts = [f'<svg class="chart" width="{label_w + bar_w + 140}" height="{height}" role="img" '
             f'aria-label="success rate by domain">']
    for i, (d, f) in enumerate(domains.items()):
        y = i * row_h + 2
        rate = f["success_rate"] or 0.0
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12">{E(d)}</text>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="{row_h - 6}" fill="#eaeef2"/>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{rate * bar_w:.1f}" height="{row_h - 6}" fill="#2da44e"/>'
                     f'<text x="{label_w + bar_w + 6}" y="{y + 15}" font-size="12">{_pct(f["success_rate"])} '
                     f'of {f["scheduled"]}</text>')
    parts.append("</svg>")
    return "".join(parts)


def build_compare(a: Report, b: Report, out_file: Path) -> Path:
    """A page listing the tasks whose results differ, linking into both reports."""
    sa, sb = task_scores(a.data), task_scores(b.data)
    samples = {}
    for report, side in ((a, "a"), (b, "b")):
        for task, sample in report.pairs:
            samples.setdefault((side, task), []).append(sample)
    rows = []
    for task in sorted(set(sa) & set(sb)):
        if sa[task] == sb[task]:
            continue
        links = []
        for report, side in ((a, "a"), (b, "b")):
            base = quote(os.path.relpath(report.out, out_file.parent))
            links.append(" ".join(f'<a href="{E(base)}/{E(report.href((task, s)))}">{s}</a>'
                                  for s in sorted(samples[(side, task)])))
        better = "A" if sa[task] > sb[task] else "B"
        rows.append(f"<tr><td>{E(task)}</td><td class='num'>{sa[task]:.2f}</td><td class='num'>{sb[task]:.2f}</td>"
                    f"<td>{better}</td><td>{links[0]}</td><td>{links[1]}</td></tr>")
    css = os.path.relpath(a.out / "style.css", out_file.parent)
    body = (f"<header><h1>{E(a.run.name)} (A) vs {E(b.run.name)} (B)</h1></header><main>"
            f"<p>{len(rows)} of {len(set(sa) & set(sb))} shared tasks differ (mean score over samples; "
            f"missing and errors count 0).</p><table><thead><tr><th>task</th><th>A</th><th>B</th><th>better</th>"
            f"<th>A samples</th><th>B samples</th></tr></thead><tbody>{''.join(rows)}</tbody></table></main>")
    out_file.write_text(_page("cua compare", body, css))
    return out_file
