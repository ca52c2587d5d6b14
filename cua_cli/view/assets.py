"""The report's stylesheet and its pages' scripts (no network, no libraries)."""

from .lanes import COLOURS

CSS = """
:root { --ok: #1a7f37; --bad: #cf222e; --err: #9a6700; --miss: #6e7781; --line: #d0d7de; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
header { background: #24292f; color: #fff; padding: 12px 24px; }
header a { color: #9ecbff; }
main { padding: 16px 24px; max-width: 1400px; }
h1 { font-size: 20px; margin: 0; } h2 { font-size: 16px; margin: 20px 0 8px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 120px; }
.card b { display: block; font-size: 20px; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; white-space: nowrap; }
th { cursor: pointer; user-select: none; background: #eaeef2; position: sticky; top: 0; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.outcome { font-weight: 600; }
.success { color: var(--ok); } .failure { color: var(--bad); } .error { color: var(--err); } .missing { color: var(--miss); }
.controls { display: flex; gap: 12px; align-items: center; margin: 8px 0; flex-wrap: wrap; }
.step { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px; margin: 12px 0;
        display: grid; grid-template-columns: minmax(200px, auto) 1fr; gap: 16px; }
video.episode { position: sticky; top: 8px; float: right; width: 40%; max-width: 640px; margin: 0 0 12px 12px;
  z-index: 2; background: #000; border: 1px solid var(--line); border-radius: 6px; }
.shot { position: relative; display: inline-block; line-height: 0; }
.shot img { display: block; max-width: 720px; min-width: 320px; image-rendering: pixelated; border: 1px solid var(--line); }
.shot svg { position: absolute; left: 0; top: 0; width: 100%; height: 100%; pointer-events: none; }
.shot pre.observation { line-height: 1.35; width: 640px; max-height: 720px; overflow: auto; margin: 0; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 8px; white-space: pre-wrap;
      word-break: break-word; margin: 4px 0; font-size: 12px; }
.nav { display: flex; justify-content: space-between; margin: 8px 0; }
.bad-text { color: var(--bad); }
/* the timeline page */
.note { color: var(--err); }
.legend { display: flex; gap: 14px; flex-wrap: wrap; margin: 6px 0; }
.key { display: inline-flex; gap: 4px; align-items: center; }
.tl { display: grid; grid-template-columns: auto 1fr; background: #fff; border: 1px solid var(--line);
      border-radius: 6px; padding: 6px 0; }
.tl-scroll { overflow-x: auto; }
.tl-inner { position: relative; width: 100%; }
.tl-axis { height: 22px; position: relative; }
.tl-plot { display: block; position: relative; }  /* over the ticks' lines */
.tick { position: absolute; top: 0; height: 100%; border-left: 1px solid #eaeef2; pointer-events: none; }
.tick span { position: absolute; top: 3px; left: 3px; font-size: 11px; color: #57606a; white-space: nowrap; }
.lane-label, .panel-label, .panel-legend { text-anchor: end; font-size: 11px; fill: #1f2328; }
.panel-label { font-weight: 600; } .panel-legend { fill: #57606a; font-size: 10px; }
.tl-plot .attempt.error .bar { stroke: var(--bad); stroke-width: 1.5px;
  vector-effect: non-scaling-stroke; }
.panel-bg { fill: #f6f8fa; fill-opacity: .7; }
.bands { image-rendering: pixelated; } .hit { fill: transparent; }
.c-running, .c-waiting, .c-gpu { fill: none; stroke-width: 1.5px; vector-effect: non-scaling-stroke; }
.c-running { stroke: #0969da; } .c-waiting { stroke: #cf222e; } .c-gpu { stroke: #1a7f37; }
.c-kv { fill: #d8b9ff; fill-opacity: .55; }
""" + "".join(f".p-{k} {{ fill: {v}; }}\n" for k, v in COLOURS.items()) \
    + f".tl-plot .bar {{ fill: {COLOURS['other']}; }}\n"  # the phases' colours, as the bands' image has them

INDEX_JS = """
(function () {
  const rows = JSON.parse(document.getElementById('rows').textContent);
  const tbody = document.querySelector('#episodes tbody');
  const outcomeSel = document.getElementById('f-outcome');
  const domainSel = document.getElementById('f-domain');
  const textIn = document.getElementById('f-text');
  const info = document.getElementById('shown');
  const PAGE = 500;
  let sortKey = null, sortDir = 1, page = 0, view = rows;

  function cell(tag, text, cls) {
    const el = document.createElement(tag);
    el.textContent = text;
    if (cls) el.className = cls;
    return el;
  }
  function render() {
    tbody.textContent = '';
    const frag = document.createDocumentFragment();
    for (const r of view.slice(page * PAGE, (page + 1) * PAGE)) {
      const tr = document.createElement('tr');
      const a = document.createElement('a');
      a.href = r.href; a.textContent = r.task_id;
      const td = document.createElement('td'); td.appendChild(a); tr.appendChild(td);
      tr.appendChild(cell('td', r.domain ?? ''));
      tr.appendChild(cell('td', r.sample, 'num'));
      tr.appendChild(cell('td', r.outcome, 'outcome ' + r.outcome));
      tr.appendChild(cell('td', r.score == null ? '' : r.score.toFixed(2), 'num'));
      tr.appendChild(cell('td', r.steps ?? '', 'num'));
      tr.appendChild(cell('td', r.duration_s == null ? '' : r.duration_s.toFixed(1), 'num'));
      tr.appendChild(cell('td', r.stop_reason ?? ''));
      frag.appendChild(tr);
    }
    tbody.appendChild(frag);
    const pages = Math.max(1, Math.ceil(view.length / PAGE));
    info.textContent = view.length + ' of ' + rows.length + ' episodes' +
      (pages > 1 ? ' \\u2014 page ' + (page + 1) + ' of ' + pages : '');
    document.getElementById('prev').disabled = page === 0;
    document.getElementById('next').disabled = page >= pages - 1;
  }
  function apply() {
    const o = outcomeSel.value, d = domainSel.value, t = textIn.value.toLowerCase();
    view = rows.filter(r => (!o || r.outcome === o) && (!d || String(r.domain) === d) &&
                            (!t || r.task_id.toLowerCase().includes(t)));
    if (sortKey) {
      view.sort((a, b) => {
        const x = a[sortKey], y = b[sortKey];
        if (x == null) return 1; if (y == null) return -1;
        return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
      });
    }
    page = 0;
    render();
  }
  document.querySelectorAll('#episodes th').forEach(th => th.addEventListener('click', () => {
    const key = th.dataset.key;
    sortDir = sortKey === key ? -sortDir : 1;
    sortKey = key;
    document.querySelectorAll('#episodes th').forEach(h => h.className = '');
    th.className = sortDir > 0 ? 'sorted-asc' : 'sorted-desc';
    apply();
  }));
  [outcomeSel, domainSel].forEach(el => el.addEventListener('change', apply));
  textIn.addEventListener('input', apply);
  document.getElementById('prev').addEventListener('click', () => { page--; render(); });
  document.getElementById('next').addEventListener('click', () => { page++; render(); });
  const params = new URLSearchParams(location.search);
  if (params.get('outcome')) outcomeSel.value = params.get('outcome');
  apply();
})();
"""

TIMELINE_JS = """
(function () {
  // The time axis: ticks a readable distance apart at the zoom chosen; the plot itself is plain SVG.
  const tl = document.getElementById('timeline');
  if (!tl) return;
  const span = Number(tl.dataset.span);
  const inner = tl.querySelector('.tl-inner');
  const axis = tl.querySelector('.tl-axis');
  const zoom = document.getElementById('tl-zoom');
  const STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600,
                 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  function label(s, step) {
    const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
    const digits = step < 1 ? Math.min(3, Math.ceil(-Math.log10(step))) : 0;
    const ss = sec.toFixed(digits).padStart(digits ? digits + 3 : 2, '0');
    return '+' + h + ':' + String(m).padStart(2, '0') + ':' + ss;
  }
  function draw() {
    const px = inner.clientWidth;
    let step = STEPS.find(s => s / span * px >= 90);
    if (step === undefined) {  // days and more
      step = 86400;
      while (step / span * px < 90) step *= 2;
    }
    axis.parentNode.querySelectorAll('.tick').forEach(t => t.remove());
    const frag = document.createDocumentFragment();
    for (let i = 0; i * step <= span; i++) {
      const t = document.createElement('div');
      t.className = 'tick';
      t.style.left = (i * step / span * 100) + '%';
      if ((span - i * step) / span * px > 70) {  // a label that fits before the end
        const l = document.createElement('span');
        l.textContent = label(i * step, step);
        t.appendChild(l);
      }
      frag.appendChild(t);
    }
    inner.insertBefore(frag, inner.firstChild);
  }
  zoom.addEventListener('change', () => { inner.style.width = (100 * Number(zoom.value)) + '%'; draw(); });
  window.addEventListener('resize', draw);
  draw();
})();
"""
