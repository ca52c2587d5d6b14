"""OSWorld's setup steps (a task's `config`, an evaluator's `postconfig`), run through the in-VM API.

Each step is `{"type": ..., "parameters": {...}}`, as in OSWorld's SetupController.
Where OSWorld logs a failed step and carries on, cua stops: a step that fails is
the desktop's failure (EnvError) and the attempt is retried on a fresh desktop,
rather than playing, then scoring, a task that was never set up. A step the task
file gets wrong (a missing parameter, a local file outside the upload folder)
is a BadTask. Messages name the step: `config[3] (execute): ...`.
"""

import datetime
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .._util.atomic import write_atomic
from .._util.budget import Budget
from .._util.retry import pause
from .._util.text import clip
from ..errors import BadTask, EnvError
from . import chrome_cdp
from .desktop_api import Desktop
from .local_files import Downloads, safe_name

UNTIL_PAUSE_S = 0.3        # OSWorld's pause between runs of a step with `until`
UNTIL_MAX_FAILURES = 5     # ... and how many failed runs it tolerates
MAX_UPLOAD_BYTES = 256 << 20


@dataclass
class SetupContext:
    """What steps need beyond the desktop: where files come from and go."""
    desktop: Desktop
    downloads: Downloads
    folder: Path                              # this episode's folder: `stdout`/`stderr` captures land here
    upload_root: Optional[Path] = None        # `upload_file` reads only files inside this folder
    placeholders: dict = field(default_factory=dict)  # desktop-env 1.0.2's {CLIENT_PASSWORD}, {SCREEN_WIDTH}, ...
    until_limit_s: float = 300.0              # how long a step's `until` may keep re-running it


def run_steps(steps: list, ctx: SetupContext, budget: Budget, where: str = "config") -> None:
    """Run the steps in order; the first that fails raises, naming `where[index] (type)`."""
    for n, step in enumerate(steps):
        kind = step.get("type")
        fn = STEPS.get(kind)
        label = f"{where}[{n}] ({clip(str(kind), 40)})"
        if fn is None:
            raise BadTask(f"{label}: cua does not implement this step type")
        params = fill_placeholders(step.get("parameters") or {}, ctx.placeholders)
        try:
            fn(ctx, budget, params)
        except EnvError as e:
            raise EnvError(f"{label}: {e}") from e
        except BadTask as e:
            raise BadTask(f"{label}: {e}") from e


def fill_placeholders(value, placeholders: dict):
    """`value` with every `{NAME}` of `placeholders` replaced in its strings (desktop-env 1.0.2)."""
    if not placeholders:
        return value
    if isinstance(value, str):
        for name, text in placeholders.items():
            value = value.replace("{" + name + "}", str(text))
        return value
    if isinstance(value, list):
        return [fill_placeholders(v, placeholders) for v in value]
    if isinstance(value, dict):
        return {k: fill_placeholders(v, placeholders) for k, v in value.items()}
    return value


# -- parameters: the task file's, checked before anything is sent

def _param(p: dict, key: str, types, default=...):
    if key not in p or p[key] is None:
        if default is ...:
            raise BadTask(f"parameter {key!r} is missing")
        return default
    value = p[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _tuple(types):
        raise BadTask(f"parameter {key!r} must be {_names(types)}, not {type(value).__name__}")
    return value


def _tuple(types) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def _names(types) -> str:
    return " or ".join({str: "a string", list: "a list", bool: "true or false", dict: "an object",
                        int: "a number", float: "a number"}[t] for t in _tuple(types))


def _command(p: dict):
    command = _param(p, "command", (list, str))
    if not command or isinstance(command, list) and not all(isinstance(a, str) for a in command):
        raise BadTask("parameter 'command' must be a non-empty string or list of strings")
    return command


def _files(p: dict, keys: tuple) -> list:
    files = _param(p, "files", list)
    for n, f in enumerate(files):
        if not (isinstance(f, dict) and all(isinstance(f.get(k), str) and f[k] for k in keys)):
            raise BadTask(f"files[{n}] must be an object with string {' and '.join(map(repr, keys))}")
    return files


# -- the steps

def _execute(ctx: SetupContext, budget: Budget, p: dict) -> None:
    """`/setup/execute`, re-run while `until` ({returncode, stdout, stderr}) is not met, as OSWorld does."""
    command, shell = _command(p), _param(p, "shell", bool, False)
    until = _param(p, "until", dict, {})
    captures = [(key, _param(p, key, str, "")) for key in ("stdout", "stderr")]
    if not until:
        result = ctx.desktop.execute(command, budget, shell=shell, setup=True)
    else:
        result = _until(ctx, budget, command, shell, until)
    for key, name in captures:
        if name:
            text = result["output" if key == "stdout" else "error"]
            write_atomic(ctx.folder / safe_name(name), str(text).encode("utf-8", "surrogatepass"))


def _until(ctx: SetupContext, budget: Budget, command, shell: bool, until: dict) -> dict:
    end = min(budget.deadline, time.monotonic() + ctx.until_limit_s)
    runs = failures = 0
    last = None
    while True:
        try:
            result = ctx.desktop.execute(command, budget, shell=shell, setup=True)
            runs += 1
            if _met(until, result):
                return result
            last = f"the last run gave returncode {result.get('returncode')!r}"
        except EnvError as e:
            failures += 1
            if failures >= UNTIL_MAX_FAILURES:
                raise EnvError(f"{failures} runs failed; the last: {e}") from e
            last = str(e)
        if time.monotonic() + UNTIL_PAUSE_S >= end:
            raise EnvError(f"`until` {clip(str(until), 100)} not met after {runs} runs ({last})")
        pause(UNTIL_PAUSE_S, budget.should_stop, end)


def _met(until: dict, result: dict) -> bool:
    return ("returncode" in until and result.get("returncode") == until["returncode"]
            or "stdout" in until and str(until["stdout"]) in str(result.get("output"))
            or "stderr" in until and str(until["stderr"]) in str(result.get("error")))


def _sleep(ctx: SetupContext, budget: Budget, p: dict) -> None:
    seconds = _param(p, "seconds", (int, float))
    if not 0 <= seconds <= 3600:
        raise BadTask(f"parameter 'seconds' must be between 0 and 3600, not {seconds}")
    pause(seconds, budget.should_stop, budget.deadline)


def _launch(ctx: SetupContext, budget: Budget, p: dict) -> None:
    command, shell = _command(p), _param(p, "shell", bool, False)
    if not shell and isinstance(command, str):
        command = command.split()  # OSWorld's client splits a one-string command at spaces
    ctx.desktop.launch(command, budget, shell=shell)


def _open(ctx: SetupContext, budget: Budget, p: dict) -> None:
    ctx.desktop.open_file(_param(p, "path", str), budget)


def _window(ctx: SetupContext, budget: Budget, p: dict, close: bool) -> None:
    name = _param(p, "window_name", str)
    if not name:
        raise BadTask("parameter 'window_name' is empty")
    call = ctx.desktop.close_window if close else ctx.desktop.activate_window
    call(name, budget, strict=_param(p, "strict", bool, False), by_class=_param(p, "by_class", bool, False))


def _change_wallpaper(ctx: SetupContext, budget: Budget, p: dict) -> None:
    ctx.desktop.change_wallpaper(_param(p, "path", str), budget)


def _download(ctx: SetupContext, budget: Budget, p: dict) -> None:
    """cua fetches each URL (through its cache), then pushes the file to the desktop."""
    for f in _files(p, ("url", "path")):
        local = ctx.downloads.fetch(f["url"], f["path"], budget)
        ctx.desktop.upload(f["path"], _read(local), budget)


def _upload_file(ctx: SetupContext, budget: Budget, p: dict) -> None:
    for f in _files(p, ("local_path", "path")):
        ctx.desktop.upload(f["path"], _read(_confined(ctx.upload_root, f["local_path"])), budget)


def _confined(root: Optional[Path], local_path: str) -> Path:
    """`local_path` resolved inside `root`: a task file may not send the client's other files anywhere."""
    if root is None:
        raise BadTask("upload_file needs an upload folder in the config (none is set)")
    root = Path(root).resolve()
    try:
        path = (root / local_path).resolve()
    except (OSError, ValueError) as e:
        raise BadTask(f"local_path {clip(local_path, 100)!r}: {e}") from None
    if not path.is_relative_to(root):
        raise BadTask(f"local_path {clip(local_path, 100)!r} is outside the upload folder {root}")
    return path


def _read(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_UPLOAD_BYTES + 1)
    except OSError as e:
        raise BadTask(f"cannot read {path}: {e.strerror}") from None
    if len(data) > MAX_UPLOAD_BYTES:
        raise BadTask(f"{path} is larger than {MAX_UPLOAD_BYTES} bytes")
    return data


# -- Chrome, through its debugging port (chrome_cdp) and its profile's files

CHROME_WAIT_S = 75.0       # OSWorld's setup tries to connect 15 times, 5 s apart, while Chrome starts
TAB_LOAD_S = 60.0          # ... and gives each tab it opens 60 s to load
HISTORY = "~/.config/google-chrome/Default/History"
# The empty History database OSWorld's update_browse_history starts from, for a desktop whose Chrome
# has none yet.
EMPTY_HISTORY_URL = ("https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/chrome/"
                     "44ee5668-ecd5-4366-a6ce-c1c9b8d4e938/history_empty.sqlite?download=true")
CHROME_EPOCH = datetime.datetime(1601, 1, 1)
TYPED_LINK = 805306368     # the `transition` OSWorld gives every visit it adds (a link, chain start and end)


def _strings(p: dict, key: str) -> list:
    value = _param(p, key, list)
    if not all(isinstance(v, str) for v in value):
        raise BadTask(f"parameter {key!r} must be a list of strings")
    return value


def _chrome_open_tabs(ctx: SetupContext, budget: Budget, p: dict) -> None:
    """A tab per URL in Chrome's own profile. As OSWorld: a page that does not load in time stays
    open as it is, and once the first is open, the tab that was first before goes."""
    urls = _strings(p, "urls_to_open")
    chrome_cdp.cdp_url(ctx.desktop)
    _, Error = chrome_cdp.playwright_api()
    with chrome_cdp.session() as pw:
        context = chrome_cdp.default_context(chrome_cdp.must_connect(pw, ctx.desktop, budget, CHROME_WAIT_S))
        for i, url in enumerate(urls):
            try:
                page = context.new_page()
            except Error as e:
                raise EnvError(f"Chrome opened no tab: {chrome_cdp.describe(e)}") from None
            try:
                page.goto(url, timeout=chrome_cdp.ms(budget, TAB_LOAD_S))
            except Error:
                pass  # OSWorld logs it and goes on: the tab shows whatever it got
            if i == 0:
                chrome_cdp.close_quietly(context.pages[0])


def _chrome_close_tabs(ctx: SetupContext, budget: Budget, p: dict) -> None:
    """For each URL, the first tab showing that page (OSWorld's compare_urls) is closed; a URL no tab
    shows closes none."""
    urls = _strings(p, "urls_to_close")
    chrome_cdp.cdp_url(ctx.desktop)
    with chrome_cdp.session() as pw:
        context = chrome_cdp.default_context(chrome_cdp.must_connect(pw, ctx.desktop, budget, CHROME_WAIT_S))
        for url in urls:
            for page in context.pages:
                if chrome_cdp.same_page_url(page.url, url):
                    chrome_cdp.close_quietly(page)
                    break


def _update_browse_history(ctx: SetupContext, budget: Budget, p: dict) -> None:
    """Chrome's History as OSWorld makes it: no history but the task's visits, each a typed link
    `visit_time_from_now_in_seconds` ago. The desktop's own History is pulled and emptied (OSWorld
    starts from an empty one it downloads; that one is the fallback when the desktop has none), the
    visits are added in a copy in the episode folder, and it goes back in Chrome's place. Chrome
    should not be running: the tasks launch it after this step."""
    visits = _param(p, "history", list)
    for n, v in enumerate(visits):
        if not (isinstance(v, dict) and isinstance(v.get("url"), str) and isinstance(v.get("title"), str)
                and isinstance(v.get("visit_time_from_now_in_seconds"), (int, float))
                and not isinstance(v["visit_time_from_now_in_seconds"], bool)):
            raise BadTask(f"history[{n}] must be an object with string 'url' and 'title' and a number "
                          "'visit_time_from_now_in_seconds'")
    data = ctx.desktop.file(HISTORY, budget)
    if data is None:
        data = _read(ctx.downloads.fetch(EMPTY_HISTORY_URL, "history_empty.sqlite", budget))
        fresh = True
    else:
        fresh = False
    local = ctx.folder / "history_new.sqlite"
    write_atomic(local, data)
    try:
        _add_visits(local, visits, clear=not fresh)
    except sqlite3.DatabaseError as e:
        where = "OSWorld's empty History" if fresh else f"the desktop's {HISTORY}"
        raise EnvError(f"{where} is no Chrome history database: {e}") from None
    if fresh:  # a Chrome that never ran has no profile folder, and an upload makes none
        ctx.desktop.execute('mkdir -p "$HOME/.config/google-chrome/Default"', budget, shell=True, setup=True)
    ctx.desktop.upload(HISTORY, local.read_bytes(), budget)
    # OSWorld then gives the file to the desktop's user (its server may run as another); a desktop
    # where that fails (no sudo, another user name) has the file as its server wrote it, which is
    # the user's on cua's desktops.
    ctx.desktop.execute(["sudo chown -R user:user /home/user/.config/google-chrome/Default/History"], budget,
                        shell=True, setup=True)


def _add_visits(path: Path, visits: list, clear: bool) -> None:
    # OSWorld's times: the client's local clock, naive, as microseconds since 1601 (Chrome reads them as UTC)
    now = datetime.datetime.now()
    db = sqlite3.connect(path)
    try:
        with db:
            if clear:
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                for table in ("visits", "urls", "visit_source", "keyword_search_terms", "segments",
                              "segment_usage", "content_annotations", "context_annotations"):
                    if table in tables:
                        db.execute(f"DELETE FROM {table}")
            for v in visits:
                when = now - datetime.timedelta(seconds=v["visit_time_from_now_in_seconds"])
                stamp = int((when - CHROME_EPOCH).total_seconds() * 1_000_000)
                url_id = db.execute("INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time, hidden)"
                                    " VALUES (?, ?, 1, 0, ?, 0)", (v["url"], v["title"], stamp)).lastrowid
                db.execute("INSERT INTO visits (url, visit_time, from_visit, transition, segment_id, visit_duration)"
                           " VALUES (?, ?, 0, ?, 0, 0)", (url_id, stamp, TYPED_LINK))
    finally:
        db.close()


# the steps that need one of cua's extras
EXTRAS = {"chrome_open_tabs": chrome_cdp.EXTRA, "chrome_close_tabs": chrome_cdp.EXTRA}

STEPS: dict[str, Callable[[SetupContext, Budget, dict], None]] = {
    "execute": _execute,
    "command": _execute,
    "sleep": _sleep,
    "launch": _launch,
    "open": _open,
    "activate_window": lambda c, b, p: _window(c, b, p, close=False),
    "close_window": lambda c, b, p: _window(c, b, p, close=True),
    "change_wallpaper": _change_wallpaper,
    "download": _download,
    "upload_file": _upload_file,
    "chrome_open_tabs": _chrome_open_tabs,
    "chrome_close_tabs": _chrome_close_tabs,
    "update_browse_history": _update_browse_history,
}
