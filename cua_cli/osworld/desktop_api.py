"""The client of OSWorld's in-VM server (Flask on port 5000, no authentication).

Bodies are what OSWorld's own client sends: JSON for commands and setup calls,
a form for `/file` and `/window_size` (the server reads only `request.form`
there), multipart for `/setup/upload`. Every call takes a Budget: each request
gets what is left of the episode and the step limit, and retries never wait
past the deadline.

Failures of the desktop (no connection, timeouts, 5xx, answers outside the
protocol) raise EnvError. A few 4xx/5xx answers are the protocol's way of
saying "not there" (a missing file, a window that is not open) and come back
as None, as OSWorld's getters see them. Nothing is ever executed locally:
commands travel to the desktop as data.
"""

import json
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, Union
from urllib.parse import urlencode

from .._util.budget import Budget
from .._util.httpclient import BadAnswer, Client, Response
from .._util.png import SIGNATURE
from .._util.retry import with_retries
from .._util.text import clip
from ..errors import DesktopLimit, EnvError

# OSWorld's exact prefix for pyautogui code (controllers/python.py): an agent's code runs after it.
PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "

Command = Union[list, str]
RECORDING_END_S = 90.0  # ffmpeg finishing an episode's mp4 on a loaded desktop


def pyautogui_command(code: str) -> list:
    """The argv OSWorld's DesktopEnv.step sends to `/execute` for pyautogui code."""
    return ["python", "-c", PYAUTOGUI_PREFIX + code]


@dataclass
class ApiSettings:
    url: str                      # http://host:5000
    timeout_s: float = 60.0       # any one request
    exec_timeout_s: float = 130.0  # /execute: the server itself gives a command 120 s
    retries: int = 3              # transient failures of a request that is safe to repeat
    apps: dict = field(default_factory=dict)  # published app ports: {"chromium"|"vlc": http://host:port}


class Desktop(Protocol):
    """What setup steps and getters need of a desktop (DesktopAPI, or a test's double)."""

    def execute(self, command: Command, budget: Budget, shell: bool = False, setup: bool = False) -> dict: ...
    def launch(self, command: Command, budget: Budget, shell: bool = False) -> None: ...
    def open_file(self, path: str, budget: Budget) -> None: ...
    def activate_window(self, name: str, budget: Budget, strict: bool = False, by_class: bool = False) -> None: ...
    def close_window(self, name: str, budget: Budget, strict: bool = False, by_class: bool = False) -> None: ...
    def change_wallpaper(self, path: str, budget: Budget) -> None: ...
    def upload(self, path: str, data: bytes, budget: Budget) -> None: ...
    def file(self, path: str, budget: Budget) -> Optional[bytes]: ...
    def list_directory(self, path: str, budget: Budget) -> Optional[dict]: ...
    def desktop_path(self, budget: Budget) -> Optional[str]: ...
    def accessibility(self, budget: Budget) -> Optional[str]: ...
    def terminal(self, budget: Budget) -> Optional[str]: ...
    def screen_size(self, budget: Budget) -> dict: ...
    def window_size(self, app_class_name: str, budget: Budget) -> Optional[dict]: ...
    def wallpaper(self, budget: Budget) -> Optional[bytes]: ...
    def app_url(self, app: str) -> Optional[str]: ...


class DesktopAPI:
    """One desktop's in-VM API. Threads may share it (the HTTP client keeps a connection per thread)."""

    def __init__(self, settings: ApiSettings, http: Optional[Client] = None):
        self.s = settings
        self.base = settings.url.rstrip("/")
        self.http = http or Client()

    def app_url(self, app: str) -> Optional[str]:
        """The base URL of an app's published port ("chromium": Chrome's debugging port, "vlc": VLC's
        web interface), or None when the desktop's source did not publish it."""
        return self.s.apps.get(app)

    # -- plumbing

    def _call(self, what: str, method: str, path: str, budget: Budget, *, json_body=None, form: Optional[dict] = None,
              multipart: Optional[tuple] = None, limit: Optional[float] = None, idempotent: bool = True,
              absent: tuple = (), check: Optional[Callable[[Response], None]] = None) -> Optional[Response]:
        """One request with retries. A status in `absent` returns None; any other status of 400
        or more, and an answer `check` refuses, end as EnvError once retries are spent."""
        data, ctype = None, "application/json"
        if form is not None:
            data = urlencode({k: _utf8(v) for k, v in form.items()}).encode()
            ctype = "application/x-www-form-urlencoded"
        elif multipart is not None:
            data, ctype = multipart

        def once() -> Optional[Response]:
            r = self.http.request(method, f"{self.base}{path}", budget.timeout(limit or self.s.timeout_s),
                                  json=json_body, data=data, content_type=ctype)
            if r.status in absent:
                return None
            if r.status == 503:
                _raise_at_limit(r, what)
            r.raise_for_status()
            if check is not None:
                check(r)
            return r

        return with_retries(once, self.s.retries, what, budget.should_stop, idempotent=idempotent,
                            error=EnvError, deadline=budget.deadline)

    def _json(self, what: str, *args, key: Optional[str] = None, **kwargs):
        """The JSON answer (or its `key`); an answer that is not JSON, or lacks `key`, is the desktop's fault."""
        def check(r: Response):
            obj = _parse(r)
            if key is not None and (not isinstance(obj, dict) or key not in obj):
                raise BadAnswer(f"answer has no {key!r}: {clip(r.text, 200)}")
        r = self._call(what, *args, check=check, **kwargs)
        if r is None:
            return None
        obj = _parse(r)
        return obj[key] if key is not None else obj

    # -- observation and actions

    def screenshot(self, budget: Budget) -> bytes:
        def check(r: Response):
            if not r.content.startswith(SIGNATURE):
                raise BadAnswer(f"screenshot is not a PNG ({r.headers.get('content-type', 'no content type')})")
        return self._call("screenshot", "GET", "/screenshot", budget, check=check).content

    def execute(self, command: Command, budget: Budget, shell: bool = False, setup: bool = False) -> dict:
        """Run a command on the desktop: {"output", "error", "returncode"}. Sent at most once when it
        may have arrived: a command that ran must not run twice."""
        path = "/setup/execute" if setup else "/execute"

        def check(r: Response):
            obj = _parse(r)
            if not isinstance(obj, dict) or not all(k in obj for k in ("output", "error", "returncode")):
                raise BadAnswer(f"answer is not a command's result: {clip(r.text, 200)}")
        r = self._call(f"execute {_show_command(command)}", "POST", path, budget, check=check,
                       json_body={"command": command, "shell": shell}, limit=self.s.exec_timeout_s, idempotent=False)
        return _parse(r)

    def run_pyautogui(self, code: str, budget: Budget) -> dict:
        return self.execute(pyautogui_command(code), budget)

    # -- setup calls (paths and names are the task's: sent as they are, as OSWorld does)

    def launch(self, command: Command, budget: Budget, shell: bool = False) -> None:
        self._call(f"launch {_show_command(command)}", "POST", "/setup/launch", budget,
                   json_body={"command": command, "shell": shell}, idempotent=False)

    def open_file(self, path: str, budget: Budget) -> None:
        self._call(f"open {clip(path, 100)!r}", "POST", "/setup/open_file", budget,
                   json_body={"path": path}, idempotent=False)

    # A window that is not there (404) is no error: OSWorld's setup logs it and the task goes on.
    def activate_window(self, name: str, budget: Budget, strict: bool = False, by_class: bool = False) -> None:
        self._call(f"activate window {clip(name, 100)!r}", "POST", "/setup/activate_window", budget,
                   json_body={"window_name": name, "strict": strict, "by_class": by_class}, absent=(404,))

    def close_window(self, name: str, budget: Budget, strict: bool = False, by_class: bool = False) -> None:
        self._call(f"close window {clip(name, 100)!r}", "POST", "/setup/close_window", budget,
                   json_body={"window_name": name, "strict": strict, "by_class": by_class}, absent=(404,))

    def change_wallpaper(self, path: str, budget: Budget) -> None:
        self._call(f"change wallpaper to {clip(path, 100)!r}", "POST", "/setup/change_wallpaper", budget,
                   json_body={"path": path})

    def upload(self, path: str, data: bytes, budget: Budget) -> None:
        """Put `data` at `path` on the desktop (the server expands ~ and $VARS)."""
        self._call(f"upload to {clip(path, 100)!r}", "POST", "/setup/upload", budget,
                   multipart=_multipart({"file_path": path}, "file_data", path, data))

    # -- reading the desktop

    def file(self, path: str, budget: Budget) -> Optional[bytes]:
        """The file's bytes; None when the server answers 404 (no such file)."""
        r = self._call(f"file {clip(path, 100)!r}", "POST", "/file", budget, form={"file_path": path}, absent=(404,))
        return None if r is None else r.content

    def list_directory(self, path: str, budget: Budget) -> Optional[dict]:
        """{"type", "name", "children"} recursively; None when the path is not a directory (HTTP 400, as
        OSWorld's server answers; 404 from servers that answer so for a missing path)."""
        return self._json(f"list directory {clip(path, 100)!r}", "POST", "/list_directory", budget,
                          json_body={"path": path}, key="directory_tree", absent=(400, 404))

    def accessibility(self, budget: Budget) -> Optional[str]:
        return self._json("accessibility tree", "GET", "/accessibility", budget, key="AT")

    def terminal(self, budget: Budget) -> Optional[str]:
        """The focused terminal's text, or None when no terminal is focused."""
        return self._json("terminal output", "GET", "/terminal", budget, key="output")

    def platform(self, budget: Budget) -> str:
        return self._call("platform", "GET", "/platform", budget).text.strip()

    def screen_size(self, budget: Budget) -> dict:
        return _size(self._json("screen size", "POST", "/screen_size", budget), "screen size")

    def window_size(self, app_class_name: str, budget: Budget) -> Optional[dict]:
        """The first window of that class, {"width", "height"}; None when no window has it (OSWorld's
        server then fails its own view with a 500, after a full answer: not a broken desktop)."""
        r = self._call(f"window size of {clip(app_class_name, 100)!r}", "POST", "/window_size", budget,
                       form={"app_class_name": app_class_name}, absent=(500,))
        return None if r is None else _size(_parse(r), "window size")

    def desktop_path(self, budget: Budget) -> Optional[str]:
        return self._json("desktop path", "POST", "/desktop_path", budget, key="desktop_path", absent=(404,))

    def wallpaper(self, budget: Budget) -> Optional[bytes]:
        r = self._call("wallpaper", "POST", "/wallpaper", budget, absent=(404,))
        return None if r is None else r.content

    # -- the screen recorded (OSWorld's /start_recording and /end_recording)

    def start_recording(self, budget: Budget) -> None:
        self._call("start recording", "POST", "/start_recording", budget, idempotent=False)

    def end_recording(self, budget: Budget) -> bytes:
        """The mp4 of the screen since start_recording."""
        def check(r: Response):
            if r.content[4:8] != b"ftyp":
                raise BadAnswer(f"the recording is not an mp4 ({r.headers.get('content-type', 'no content type')})")
        return self._call("end recording", "POST", "/end_recording", budget, check=check, idempotent=False,
                          limit=RECORDING_END_S).content

    # -- a person's input (cua's own routes, on cua's own desktops: `cua demo`)

    def input_start(self, budget: Budget) -> None:
        self._json("start recording input", "POST", "/cua/input/start", budget, json_body={})

    def input_read(self, after: int, budget: Budget) -> dict:
        """{"events", "frames", "now", "lost"}: the input events after seq `after` (guest/input_log.py)."""
        def check(r: Response):
            obj = _parse(r)
            if not (isinstance(obj, dict) and isinstance(obj.get("events"), list)
                    and isinstance(obj.get("now"), (int, float))):
                raise BadAnswer(f"answer is not an input log: {clip(r.text, 200)}")
        return _parse(self._call("read input", "POST", "/cua/input/read", budget, json_body={"after": after},
                                 check=check))

    def input_frame(self, frame: int, budget: Budget) -> Optional[bytes]:
        """The screen as PNG when the input log stamped events with `frame`; None once it dropped it."""
        def check(r: Response):
            if not r.content.startswith(SIGNATURE):
                raise BadAnswer("the frame is not a PNG")
        r = self._call(f"input frame {frame}", "POST", "/cua/input/frame", budget, json_body={"id": frame},
                       check=check, absent=(404,))
        return None if r is None else r.content

    def input_stop(self, budget: Budget) -> None:
        self._call("stop recording input", "POST", "/cua/input/stop", budget, json_body={})


def _parse(r: Response):
    try:
        return r.json()
    except (ValueError, RecursionError):
        raise BadAnswer(f"answer is not JSON: {clip(r.text, 200)}") from None


def _size(obj, what: str) -> dict:
    if not (isinstance(obj, dict) and all(isinstance(obj.get(k), int) and not isinstance(obj.get(k), bool)
                                          for k in ("width", "height"))):
        raise EnvError(f"{what}: answer is not {{'width': int, 'height': int}}: {clip(json.dumps(obj), 200)}")
    return {"width": obj["width"], "height": obj["height"]}


def _raise_at_limit(r: Response, what: str) -> None:
    """cua's desktops answer 503 with `desktop_limit` once one has hit a limit of its host (no retry helps)."""
    try:
        body = r.json()
    except (ValueError, RecursionError):
        return
    if isinstance(body, dict) and isinstance(body.get("desktop_limit"), str):
        kind = clip(body["desktop_limit"], 40)
        raise DesktopLimit(kind, f"{what}: {clip(str(body.get('message') or kind), 300)}")


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone surrogate in a task's path is sent as bytes, not a crash here
    return text.encode("utf-8", "surrogatepass")


def _show_command(command) -> str:
    text = " ".join(map(str, command)) if isinstance(command, list) else str(command)
    return repr(clip(text, 100))


def _multipart(fields: dict, file_field: str, path: str, data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body of text `fields` and one file, and its content type."""
    # The file name is only a label (the server saves to `file_path`): keep it to safe characters.
    label = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in path.rsplit("/", 1)[-1])
    values = [_utf8(v) for v in fields.values()]
    boundary = uuid.uuid4().hex
    while any(boundary.encode() in part for part in values + [data]):  # all but impossible: 128 random bits
        boundary = uuid.uuid4().hex
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value
                    + b"\r\n" for name, value in zip(fields, values))
    body = (head + f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{label or "file"}"'
            f'\r\nContent-Type: application/octet-stream\r\n\r\n'.encode() + data + f"\r\n--{boundary}--\r\n".encode())
    return body, f"multipart/form-data; boundary={boundary}"

