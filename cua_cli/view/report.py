"""Builds the static report: index.html (summary, per-domain chart, a filterable
table of every pair), one page per (task, sample) with every step drawn, and
timeline.html, where each env slot's time went (timeline.py).

Pages only reference screenshots (relative links), so a report inside the
run folder adds a few KB per episode; a report written elsewhere hard-links
(or copies) the screenshots so it stays self-contained. Works on a run that
is still going: unfinished pairs are listed as missing.

A run folder is data, possibly crafted: the report reads and links only
regular files inside the run folder, reached through no link (confined.py),
and writes only inside its own folder, never through a link that is already there.
"""

import html
import json
import os
from pathlib import Path
from urllib.parse import quote

from .._util.atomic import place_file, write_atomic
from .._util.diag import warn, warn_problems
from .._util.text import percent
from ..errors import ReportError
from ..runfolder.confined import Refused, confine, open_regular
from ..runfolder.names import pair_key
from ..runfolder.reader import RunReader, read_steps, show_path, trajectory_dir
from ..runfolder.writer import VIDEO
from ..stats.compare import task_scores
from ..stats.figures import run_figures
from ..stats.readers import from_reader
from ..stats.timing import read_metrics
from .assets import CSS, INDEX_JS, TIMELINE_JS
from .marks import marks_svg
from .timeline import timeline_page

E = html.escape


def _page(title: str, body: str, css_href: str, script: str = "") -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{E(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="stylesheet" href="{css_href}"></head><body>{body}{script}</body></html>')




def _text(v) -> str:
    return "" if v is None else v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _is_size(v) -> bool:
    return type(v) is int and 0 < v < 100_000


def _is_seconds(v) -> bool:
    # Compared, never converted: a huge integer has no float, and NaN fails both tests.
    return type(v) in (int, float) and -1e12 < v < 1e12


def _write(path: Path, text: str) -> None:
    """Lone surrogates of task ids are written as \\udXXX."""
    write_atomic(path, text.encode("utf-8", "backslashreplace"))


class RunReport:
    def __init__(self, run_path, out_dir=None):
        self.run = Path(run_path).resolve()
        if not (self.run / "scheduled.jsonl").exists():
            raise ReportError(f"{run_path}: not a cua run folder (no scheduled.jsonl)")
        self.out = Path(out_dir or self.run / "view").resolve()
        if not out_dir and not self.out.is_relative_to(self.run):
            raise ReportError(f"{run_path}: view is a link out of the run folder; choose a folder with --out")
        self.inside = self.out.is_relative_to(self.run)
        # Per screenshot, paths are plain strings: pathlib's overhead was most of a large report's time.
        self._run_prefix = os.path.join(self.run, "")
        self._dirs = {str(self.out)}  # report folders made and checked
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            # Every attempt: the timeline draws them all.
            self.reader = RunReader(self.run, keep_attempts=True, strict=True).refresh(warn=True)
        except OSError as e:  # a file where a folder is due (a run file that is no file: UnreadableRun)
            raise ReportError(f"{run_path}: {e}") from None
        if not self._mkdir(os.path.join(self.out, "episodes")):
            raise ReportError(f"{self.out}: cannot write the report there; choose a folder with --out")
        self.data = from_reader(self.reader)  # the same reading feeds the figures
        self.pairs = sorted(self.reader.scheduled, key=lambda p: (str(p[0]), p[1]))

    def page_path(self, pair) -> Path:
        return self.out / "episodes" / f"{pair_key(*pair)}.html"

    def href(self, pair) -> str:
        """URL of a pair's page, relative to the report folder (file names may hold '%')."""
        return "episodes/" + quote(f"{pair_key(*pair)}.html")

    def build(self) -> Path:
        _write(self.out / "style.css", CSS)
        _write(self.out / "index.js", INDEX_JS)
        for i, pair in enumerate(self.pairs):
            prev = self.pairs[i - 1] if i > 0 else None
            nxt = self.pairs[i + 1] if i + 1 < len(self.pairs) else None
            _write(self.page_path(pair), self._episode_page(pair, prev, nxt))
        _write(self.out / "timeline.js", TIMELINE_JS)
        _write(self.out / "timeline.html", _page(f"cua run {self.run.name} · timeline",
                                                 timeline_page(self.reader, read_metrics(self.run, warn=True)[0]),
                                                 "style.css", '<script src="timeline.js"></script>'))
        index = self.out / "index.html"
        _write(index, self._index_page())
        return index

    def _mkdir(self, d: str) -> bool:
        """Make folder `d` of the report; False (with a warning) if on the way there is a link or a file."""
        if d in self._dirs:
            return True
        if not self._mkdir(os.path.dirname(d)):
            return False
        if os.path.islink(d) or os.path.exists(d) and not os.path.isdir(d):
            warn(f"{d}: a link or a file where the report needs a folder; nothing written there")
            return False
        os.makedirs(d, exist_ok=True)
        self._dirs.add(d)
        return True

    # -- index --------------------------------------------------------------
    def _index_page(self) -> str:
        fig = run_figures(self.data)
        ci = fig["ci95"]
        rate = percent(fig["success_rate"], "%")
        cards = [("success rate", rate + (f" [{percent(ci[0], '%')}, {percent(ci[1], '%')}]" if ci else "")),
                 ("scheduled", fig["scheduled"]), ("finished", fig["finished"]), ("missing", fig["missing"]),
                 ("errors", fig["errors"]), ("success of finished", percent(fig["success_rate_finished"], "%"))]
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
        # In a <script> block "</script" ends it and "<!--" changes how it ends: no "<" at all.
        data = json.dumps(rows, ensure_ascii=False).replace("<", "\\u003c")
        headers = "".join(f'<th data-key="{k}">{label}</th>' for k, label in (
            ("task_id", "task"), ("domain", "domain"), ("sample", "sample"), ("outcome", "outcome"),
            ("score", "score"), ("steps", "steps"), ("duration_s", "duration (s)"), ("stop_reason", "stop reason")))
        body = f"""<header><h1>{E(self.run.name)}</h1></header><main>
<div class="cards">{cards_html}</div>
<p>Errors by stop reason: {errors}. Missing pairs and errors count 0 in the success rate.</p>
<p><a href="timeline.html">Timeline</a>: where each env slot's time went, attempt by attempt, over the model
servers' load.</p>
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
    def _shot_src(self, traj_dir: str, name, where: str, what: str = "screenshot") -> str | None:
        """The URL of a step's screenshot (or the episode's other file, `what`) from its page, or None
        (with a warning) when there is none to show."""
        if name is None:  # a text env's step
            return None
        try:
            src = confine(traj_dir, name)
            with open_regular(src) as f:
                if not self.inside:
                    src = self._copy(src, f, where, what)
        except Refused as e:
            warn(f"{where}: {what} {show_path(name)} {e}; not read")
            return None
        except OSError as e:
            warn(f"{where}: {what} {show_path(name)} cannot be read ({e.strerror or e}); shown without it")
            return None
        if src is None:
            return None
        # A file name that is not UTF-8 holds surrogate escapes: the URL gets its bytes back.
        return quote(os.path.relpath(src, os.path.join(self.out, "episodes")), errors="surrogateescape")

    def _copy(self, src: str, f, where: str, what: str) -> str | None:
        """The file `src` (open as `f`) linked or copied into the report folder; its path there."""
        dst = os.path.join(self.out, "shots", src[len(self._run_prefix):])
        if not self._mkdir(os.path.dirname(dst)):
            return None
        try:
            place_file(src, dst, opened=f)  # src holds no link (confine): a link is to the file itself
        except OSError as e:
            warn(f"{where}: cannot copy the {what}: {e}")
            return None
        return dst

    def _steps(self, traj_dir: str | None) -> str:
        """The step sections of the episode whose trajectory folder is `traj_dir`."""
        if traj_dir is None:
            return ""
        steps, problems, traj_file = read_steps(traj_dir)
        warn_problems(traj_file, problems)
        return "".join(self._step_html(traj_dir, st, f"{traj_file}:{n}") for n, st in steps)

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
        duration = "–" if rec.get("duration_s") is None else f'{rec.get("duration_s"):.1f} s'
        facts = [("outcome", f'<span class="outcome {E(outcome)}">{E(outcome)}</span>'),
                 ("score", E(str(rec.get("score")))), ("reward", E(str(rec.get("reward")))),
                 ("steps", E(str(rec.get("steps")))), ("stop reason", E(str(rec.get("stop_reason")))),
                 ("duration", duration), ("attempt", E(str(rec["attempt"]))), ("domain", E(str(rec.get("domain"))))]
        facts_html = "".join(f'<div class="card">{k}<b>{v}</b></div>' for k, v in facts)
        error = f'<pre class="bad-text">{E(rec.get("error"))}</pre>' if rec.get("error") else ""
        traj_dir = trajectory_dir(str(self.run), rec, self.reader.where(pair))
        steps_html = self._steps(traj_dir)
        body = (f'{head}<main>{nav}<h2>Instruction</h2><pre>{E(rec.get("instruction") or "")}</pre>'
                f'<div class="cards">{facts_html}</div>{error}{self._video(traj_dir)}'
                f'<h2>Steps</h2>{steps_html or "<p>No steps.</p>"}{nav}</main>')
        return _page(f"{task_id} · {sample}", body, "../style.css")

    def _video(self, traj_dir: str | None) -> str:
        """The episode's screen recording (env.osworld.record), kept in view while the steps scroll by."""
        if traj_dir is None or not os.path.lexists(os.path.join(traj_dir, VIDEO)):
            return ""
        src = self._shot_src(traj_dir, VIDEO, os.path.join(traj_dir, VIDEO), "video")
        if src is None:
            return ""
        return (f'<h2>Video</h2><video class="episode" controls preload="metadata" src="{E(src)}">'
                f'<a href="{E(src)}">{VIDEO}</a></video>')

    def _step_html(self, traj_dir: str, st: dict, where: str) -> str:
        """One step. A field of the wrong type is left out, with a warning naming file and line."""
        for key, ok in (("width", _is_size), ("height", _is_size),
                        ("action", lambda v: isinstance(v, list)), ("timings", lambda v: isinstance(v, dict))):
            if st.get(key) is not None and not ok(st[key]):
                warn(f"{where}: {key} {_text(st[key])[:40]!r} has the wrong type; left out")
                st = {**st, key: None}
        step = st["step"]
        src = self._shot_src(traj_dir, st.get("screenshot"), where)
        w, h = st.get("width") or 0, st.get("height") or 0
        actions = st.get("action") or []
        overlay = marks_svg(actions, w, h) if w and h else ""
        actions_text = "\n".join(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in a.items()}
                                             if isinstance(a, dict) else a, ensure_ascii=False)
                                  for a in actions) or "none"
        timings = ", ".join(f"{k} {v:.3f}s" for k, v in (st.get("timings") or {}).items() if _is_seconds(v))
        extra = f" · model {E(_text(st['model_version']))}" if st.get("model_version") else ""
        err = f'<pre class="bad-text">{E(_text(st["error"]))}</pre>' if st.get("error") else ""
        if src:
            shot = (f'<img src="{E(src)}" alt="screenshot of step {step}" width="{max(w * 2, 320) if w else 320}">'
                    f'{overlay}')
        elif isinstance(st.get("observation"), str):  # a text env's step: what the agent read
            shot = f'<pre class="observation">{E(st["observation"])}</pre>'
        else:
            shot = '<p class="missing">No screenshot.</p>'
        who = ""
        if st.get("actor") == "human":  # a takeover's span, or a step of a demonstration (cua demo)
            held = any(isinstance(a, dict) and a.get("type") == "takeover" for a in actions)
            who = " · a person held the desktop" if held else " · a person's action"
        return (f'<section class="step" id="step-{step}"><div class="shot">{shot}</div><div><h2>Step {step}{who}</h2>'
                f'<div>Thought</div><pre>{E(_text(st.get("thought")))}</pre>'
                f'<div>Model response</div><pre>{E(_text(st.get("response")))}</pre>'
                f'<div>Parsed action</div><pre>{E(actions_text)}</pre>{err}'
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
                     f'<text x="{label_w + bar_w + 6}" y="{y + 15}" font-size="12">{percent(f["success_rate"], "%")} '
                     f'of {f["scheduled"]}</text>')
    parts.append("</svg>")
    return "".join(parts)


def build_compare(a: RunReport, b: RunReport, out_file: Path) -> Path:
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
    _write(out_file, _page("cua compare", body, css))
    return out_file
