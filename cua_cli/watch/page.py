"""The watch pages: the run's running episodes, and one episode's live screen beside its last step,
with the buttons of a takeover: take the desktop over, then give it back or end the episode (a
person's demonstration, `cua demo`, is held from the start and has nobody to give it back to).

Everything the run folder says is fetched as JSON and shown with textContent, never as markup: a
task's instruction or a model's answer cannot put code on the page. noVNC comes from the same
server (Debian's novnc), so the page needs nothing from the internet.
"""

import html

STYLE = """
body { margin: 0; font: 14px system-ui, sans-serif; background: #111; color: #ddd; }
header { padding: 8px 14px; background: #222; display: flex; gap: 16px; align-items: baseline; }
header b { color: #fff; } a { color: #8cf; }
main { display: flex; height: calc(100vh - 38px); }
#screen { flex: 1; min-width: 0; background: #000; }
aside { width: 360px; padding: 10px 14px; overflow: auto; border-left: 1px solid #333; }
aside h3 { margin: 14px 0 4px; font-size: 12px; text-transform: uppercase; color: #999; }
pre { white-space: pre-wrap; word-break: break-word; margin: 0; font: 12px ui-monospace, monospace; }
#status.ended { color: #f96; } table { border-collapse: collapse; margin: 14px; }
td, th { padding: 4px 10px; border-bottom: 1px solid #333; text-align: left; }
#controls button { margin-right: 6px; } #status.held { color: #fc6; font-weight: bold; }
"""

INDEX = """<!doctype html>
<html><head><meta charset="utf-8"><title>cua watch: {run}</title><style>{style}</style></head>
<body><header><b>cua watch</b><span>{run}</span><span id="status"></span></header>
<table><thead><tr><th>task</th><th>attempt</th><th>steps</th><th>running for</th></tr></thead>
<tbody id="episodes"></tbody></table>
<script>
async function refresh() {{
  let list;
  try {{ list = await (await fetch("episodes.json", {{cache: "no-store"}})).json(); }}
  catch (e) {{ document.getElementById("status").textContent = "the watch server is gone"; return; }}
  const body = document.getElementById("episodes");
  body.replaceChildren();
  for (const e of list) {{
    const row = body.insertRow(), link = document.createElement("a");
    link.href = "e/" + e.key; link.textContent = e.task_id;
    row.insertCell().append(link);
    row.insertCell().textContent = e.traj ? e.traj.split("/").pop() : "";
    row.insertCell().textContent = e.steps;
    row.insertCell().textContent = e.since ? Math.round(Date.now() / 1000 - e.since) + " s" : "";
  }}
  document.getElementById("status").textContent = list.length ? "" : "no episode runs on a desktop now";
  setTimeout(refresh, 2000);
}}
refresh();
</script></body></html>
"""

EPISODE = """<!doctype html>
<html><head><meta charset="utf-8"><title>cua watch: {task}</title><style>{style}</style></head>
<body><header><b>{task}</b><span>{traj}</span><span id="status">connecting</span>
<span id="controls"><button id="hold">take over</button><button id="return" hidden>give back to the agent</button>
<button id="finished" hidden>end: done</button><button id="fail" hidden>end: infeasible</button>
<button id="abandon" hidden>end: abandon</button></span><a href="../">all episodes</a></header>
<main><div id="screen"></div>
<aside><h3>instruction</h3><pre id="instruction"></pre><h3>steps</h3><pre id="steps"></pre>
<h3>last thought</h3><pre id="thought"></pre><h3>last action</h3><pre id="action"></pre>
<h3>last answer</h3><pre id="response"></pre><h3>last error</h3><pre id="error"></pre></aside></main>
<script type="module">
import RFB from "../novnc/core/rfb.js";
const status = document.getElementById("status");
const DEMO = {demo};  // a person's demonstration (cua demo): no agent to give the desktop back to
let rfb = null, running = true, control = false;
function connect() {{
  const url = new URL("{key}/vnc" + (control ? "?control=1" : ""), location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const mine = new RFB(document.getElementById("screen"), url.href, {{wsProtocols: ["binary"]}});
  rfb = mine;
  mine.viewOnly = !control;
  mine.scaleViewport = true;
  mine.addEventListener("connect", () => {{
    status.textContent = !control ? "live, view only"
      : DEMO ? "yours: solve the task, then end it; what you do is recorded"
      : "yours: the agent waits until you give the desktop back";
    status.className = control ? "held" : "";
    if (control) mine.focus();
  }});
  mine.addEventListener("disconnect", () => {{
    if (rfb !== mine) return;  // replaced on purpose (view-only <-> control)
    rfb = null;
    status.textContent = running ? "reconnecting" : "the episode has ended";
    if (running) setTimeout(() => {{ if (!rfb) connect(); }}, 2000);
  }});
}}
function show(s) {{
  const holding = s.running && s.takeover === "hold";
  document.getElementById("hold").hidden = !s.running || holding || DEMO;
  for (const k of ["return", "finished", "fail", "abandon"]) document.getElementById(k).hidden = !s.held;
  if (DEMO) document.getElementById("return").hidden = true;
  if (holding && !s.held)
    status.textContent = DEMO ? "setting the desktop up" : "taking over: waiting for the agent to end its step";
  if (s.running && s.held !== control) {{  // the desktop changed hands: reconnect with or without input
    control = s.held;
    const old = rfb;
    rfb = null;
    if (old) old.disconnect();
    connect();
  }}
}}
for (const k of ["hold", "return", "finished", "fail", "abandon"])
  document.getElementById(k).addEventListener("click", async () => {{
    const r = await fetch("{key}/takeover", {{method: "POST", body: JSON.stringify({{state: k}})}});
    if (r.ok) show(await r.json()); else status.textContent = await r.text();
  }});
async function refresh() {{
  try {{
    const s = await (await fetch("{key}/state.json", {{cache: "no-store"}})).json();
    for (const k of ["instruction", "steps", "thought", "action", "response", "error"])
      document.getElementById(k).textContent = s[k] ?? "";
    show(s);
    if (!s.running) {{
      running = false;
      status.textContent = "the episode has ended";
      status.className = "ended";
      if (rfb) rfb.disconnect();
      return;
    }}
  }} catch (e) {{ status.textContent = "the watch server is gone"; }}
  setTimeout(refresh, 1000);
}}
connect();
refresh();
</script></body></html>
"""


def index_page(run: str) -> bytes:
    return INDEX.format(run=html.escape(run), style=STYLE).encode()


def episode_page(key: str, task_id: str, traj: str | None, demo: bool = False) -> bytes:
    return EPISODE.format(key=html.escape(key), task=html.escape(task_id), traj=html.escape(traj or ""),
                          style=STYLE, demo="true" if demo else "false").encode()
