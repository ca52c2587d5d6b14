"""The report's stylesheet and the index page's script (no network, no libraries)."""

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
.shot { position: relative; display: inline-block; line-height: 0; }
.shot img { display: block; max-width: 720px; min-width: 320px; image-rendering: pixelated; border: 1px solid var(--line); }
.shot svg { position: absolute; left: 0; top: 0; width: 100%; height: 100%; pointer-events: none; }
.shot pre.observation { line-height: 1.35; width: 640px; max-height: 720px; overflow: auto; margin: 0; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 8px; white-space: pre-wrap;
      word-break: break-word; margin: 4px 0; font-size: 12px; }
.nav { display: flex; justify-content: space-between; margin: 8px 0; }
.bad-text { color: var(--bad); }
"""

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
