"""A `cua top` frame: a snapshot's figures (watch.py) drawn with rich, and its one-line form for logs.

Everything from the run folder (task ids, stop reasons, server names) is
data: it goes into rich Text, never into markup, with its control characters
shown as escapes so a crafted name cannot move the cursor or recolour the
terminal.
"""

import time

from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from .._util.text import clip, percent


def shown(value, limit: int = 60) -> str:
    """A value from the run folder as a terminal may show it: control characters escaped, cut to `limit`."""
    text = str(value)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return clip(text, limit)


def duration(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def rate(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ci(snap: dict) -> str:
    ci = snap["ci95"]
    return f", 95% CI [{percent(ci[0], '%')}, {percent(ci[1], '%')}]" if ci else ""


def finished(snap: dict) -> int:
    return snap["queue"]["done"] + snap["queue"]["failed"]


def line(snap: dict) -> str:
    """The frame in one line, for a log: what changed since the last one is all a reader needs."""
    return (f"{time.strftime('%H:%M:%S', time.localtime(snap['now']))} {snap['status']}: "
            f"finished {finished(snap)}/{snap['scheduled']}, running {snap['queue']['claimed']}, "
            f"success {percent(snap['success_rate'], '%')} of {snap['judged']}{_ci(snap)}, "
            f"errors {snap['errors']}, steps/s {rate(snap['steps_per_s_recent'])} (last {snap['window_s']:g} s)")


def _env(snap: dict) -> str:
    if not snap["slots"]:
        return "-"
    text = f"{snap['slots']} slots: busy {percent(snap['env_busy_recent'], '%')} last {snap['window_s']:g} s"
    mix = snap["env_recent"]
    if mix:
        parts = [f"{k} {percent(v, '%')}" for k, v in mix.items() if v >= 0.0005]
        text += f" ({', '.join(parts)})" if parts else ""
    return text + f" · {percent(snap['env_busy'], '%')} overall"


def _summary(snap: dict) -> Table:
    q = snap["queue"]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    done, total = finished(snap), snap["scheduled"]
    bar = Table.grid(padding=(0, 1))
    bar.add_row(Text(f"{done} / {total} scheduled"), ProgressBar(total=max(total, 1), completed=min(done, total),
                                                               width=30),
                Text(percent(done / total, "%") if total else "-"))
    grid.add_row("finished", bar)
    grid.add_row("queue", Text(f"running {q['claimed']} · pending {q['pending']} · done {q['done']} · "
                               f"failed {q['failed']}"))
    grid.add_row("success", Text(f"{percent(snap['success_rate'], '%')} of {snap['judged']} judged{_ci(snap)} · "
                                 f"{percent(snap['success_rate_scheduled'], '%')} of scheduled"))
    grid.add_row("errors", Text(f"{snap['errors']} pair{'s' * (snap['errors'] != 1)} · {snap['error_attempts']} "
                                f"error attempts of {snap['attempts']}"))
    grid.add_row("steps/s", Text(f"{rate(snap['steps_per_s_recent'])} last {snap['window_s']:g} s · "
                                 f"{rate(snap['steps_per_s'])} overall · {snap['steps']} steps · "
                                 f"{duration(snap['elapsed_s'])}"))
    grid.add_row("env", Text(_env(snap)))
    servers = snap["servers"]
    grid.add_row("model", Text(f"busy {percent(snap['model_busy'], '%')} last {snap['window_s']:g} s "
                               f"({len(servers)} server{'s' * (len(servers) != 1)})" if servers else
                               "- (no load samples in metrics.jsonl)"))
    for p in snap["problems"]:
        grid.add_row("problem", Text(shown(p, 200)))
    return grid


def _table(title: str, *columns: str) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False)
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 else "right", no_wrap=True, overflow="ellipsis",
                     min_width=10 if i == 0 else len(c))
    return t


def _servers(snap: dict) -> Table:
    t = _table("Model servers (now; rates over the window)", "server", "state", "run", "wait", "KV", "prefix",
               "gen/s", "queue", "busy")
    for s in snap["servers"]:
        name = Text(shown(s["server"].removeprefix("http://")))
        if not s["up"]:
            t.add_row(name, Text("down", style="bold red"), *["-"] * 7)
            continue
        t.add_row(name, "up", rate(s["running"], 0), rate(s["waiting"], 0),
                  percent(s["kv_usage"], "%"), percent(s["prefix_hit_rate"], "%"),
                  rate(s["generation_tokens_per_s"], 1),
                  "-" if s["queue_wait_mean_s"] is None else f"{s['queue_wait_mean_s']:.2f} s",
                  percent(s["busy"], "%"))
    return t


def _gpus(snap: dict) -> Table:
    t = _table("GPUs", "gpu", "util", "memory")
    for g in snap["gpus"]:
        mem = (f"{g['mem_used'] / 2 ** 30:.1f} / {g['mem_total'] / 2 ** 30:.1f} GiB"
               if g["mem_used"] is not None and g["mem_total"] else "-")
        t.add_row(str(g["gpu"]), "-" if g["util"] is None else f"{g['util']:.0f}%", mem)
    return t


def _errors(snap: dict) -> Table:
    t = _table("Errors by stop reason", "stop reason", "pairs")
    for reason, n in snap["errors_by_stop_reason"]:
        t.add_row(Text(shown(reason, 40)), str(n))
    return t


def _slowest(snap: dict) -> Table:
    links = snap.get("links")
    t = _table("Slowest running episodes", "task", "sample", "attempt", "running for", "steps",
               *(["live view"] if links is not None else []))
    if links is not None:
        t.columns[0].max_width, t.columns[-1].min_width = 20, len("e/") + 12  # a page's path, whole, in 80 columns
    for e in snap["slowest"]:
        row = [Text(shown(e["task_id"])), str(e["sample"]), str(e["attempt"]), duration(e["running_s"]),
               "-" if e["steps"] is None else str(e["steps"])]
        if links is not None:
            url = links.get((e["task_id"], e["sample"], e["attempt"]))
            # The page's path after the live view's URL (in the frame), the whole URL as the hyperlink.
            row.append(Text(url[url.rindex("/e/") + 1:], style=f"link {url}") if url else Text("-"))
        t.add_row(*row)
    return t


def frame(snap: dict, interval: float | None = None):
    """The whole frame, a rich renderable."""
    head = Text.assemble(("cua top", "bold"), " · ", shown(snap["run"], 80), " · ",
                         (snap["status"], "bold green" if snap["status"] == "running" else "bold yellow"),
                         f" · {time.strftime('%H:%M:%S', time.localtime(snap['now']))}",
                         f" (every {interval:g} s)" if interval else "")
    parts = [head, Panel(_summary(snap), box=box.ROUNDED, expand=False)]
    if snap.get("live_view"):
        url = snap["live_view"]
        parts.append(Text.assemble("live view of every running desktop: ", (url, f"link {url}")))
    if snap["servers"]:
        parts.append(_servers(snap))
    if snap["gpus"]:
        parts.append(_gpus(snap))
    if snap["errors_by_stop_reason"]:
        parts.append(_errors(snap))
    if snap["slowest"]:
        parts.append(_slowest(snap))
    return Group(*parts)
