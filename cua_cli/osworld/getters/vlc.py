"""OSWorld's VLC getters: what VLC is playing (its web interface's status.xml), its settings file
(vlcrc) and the desktop's default video player.

VLC's web interface is reached at the URL the desktop's source publishes for it
(`ctx.desktop.app_url("vlc")`, OSWorld's VMs at port 8080), with the password OSWorld's VMs give it.
"""

import json
from typing import Any, Callable, Optional

from ..._util.atomic import write_atomic
from ..._util.httpclient import Client, HttpError
from ...errors import EnvError
from ..local_files import safe_name
from .context import EvalContext, need

VLC_PASSWORD = "password"  # OSWorld's VMs start VLC's web interface with it (user name empty)
VLC_TIMEOUT_S = 30.0


def _home_path(ctx: EvalContext, relative: str) -> str:
    """`~/<relative>` as the desktop's user sees it: OSWorld asks the desktop's Python to expand it."""
    code = f"import os; print(os.path.expanduser({('~/' + relative)!r}))"
    path = ctx.desktop.execute(["python", "-c", code], ctx.budget)["output"].strip()
    if not path.startswith("/"):
        raise EnvError(f"the desktop's Python did not expand ~/{relative}: {path[:200]!r}")
    return path


def get_vlc_playing_info(ctx: EvalContext, config: dict) -> Optional[str]:
    """VLC's status.xml saved as `dest` in the episode folder: its local path, or None when the web
    interface answers anything but 200 (as OSWorld) or nothing at all while the desktop itself
    answers: VLC is not running (the agent closed it), which OSWorld's getter would crash on; the
    metric then scores 0. A desktop that does not answer either is the desktop's failure (EnvError)."""
    dest = need(config, "dest")
    base = ctx.desktop.app_url("vlc")
    if base is None:
        raise EnvError("the desktop publishes no VLC web interface (its source gave no vlc_port)")
    client = Client(basic=("", VLC_PASSWORD))
    try:
        r = client.request("GET", f"{base.rstrip('/')}/requests/status.xml", ctx.budget.timeout(VLC_TIMEOUT_S))
    except HttpError:
        ctx.desktop.screen_size(ctx.budget)  # raises EnvError when the desktop is gone too
        return None
    if r.status != 200:
        return None
    local = ctx.folder / safe_name(dest)
    write_atomic(local, r.content)
    return str(local)


def get_vlc_config(ctx: EvalContext, config: dict) -> Optional[str]:
    """VLC's vlcrc (~/.config/vlc/vlcrc on Linux) saved as `dest`: its local path; None when the file
    is not there (OSWorld's getter crashes then; its metrics would crash on no file: 0 either way)."""
    dest = need(config, "dest")
    data = ctx.desktop.file(_home_path(ctx, ".config/vlc/vlcrc"), ctx.budget)
    if data is None:
        return None
    local = ctx.folder / safe_name(dest)
    write_atomic(local, data)
    return str(local)


# OSWorld's list of video MIME subtypes. It asks about each twice but x-ogm+ogg once: asked once
# here, each answer counts twice but that one's once, so the most common application is OSWorld's.
VIDEO_TYPES = ("3gp", "3gpp", "3gpp2", "avi", "divx", "dv", "fli", "flv", "mp2t", "mp4", "mp4v-es", "mpeg",
               "mpeg-system", "msvideo", "ogg", "quicktime", "vnd.divx", "vnd.mpegurl", "vnd.rn-realvideo", "webm",
               "x-anim", "x-avi", "x-flc", "x-fli", "x-flv", "x-m4v", "x-matroska", "x-mpeg", "x-mpeg-system",
               "x-mpeg2", "x-ms-asf", "x-ms-asf-plugin", "x-ms-asx", "x-ms-wm", "x-ms-wmv", "x-ms-wmx", "x-ms-wvx",
               "x-msvideo", "x-nsv", "x-ogm", "x-ogm+ogg", "x-theora", "x-theora+ogg")

# cua's own script, run on the desktop: one command instead of OSWorld's 86 (`xdg-mime query default
# video/<type>` each); a query that fails answers "" as OSWorld's does (its getter skips it).
_QUERY = """import json, subprocess, sys
out = []
for t in json.loads(sys.argv[1]):
    try:
        out.append(subprocess.run(["xdg-mime", "query", "default", "video/" + t], capture_output=True,
                                  text=True, timeout=20).stdout)
    except Exception:
        out.append("")
print(json.dumps(out))
"""


def get_default_video_player(ctx: EvalContext, config: dict) -> str:
    """The application most video types open with, as `xdg-mime` names it (with its line end, as
    OSWorld's command output has it), or 'unknown' when none has one."""
    output = ctx.desktop.execute(["python", "-c", _QUERY, json.dumps(VIDEO_TYPES)], ctx.budget)["output"]
    try:
        answers = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise EnvError(f"default_video_player: the desktop's answer is not the query's: {output[:200]!r}") from None
    if not (isinstance(answers, list) and len(answers) == len(VIDEO_TYPES)
            and all(isinstance(a, str) for a in answers)):
        raise EnvError("default_video_player: the desktop's answer is not one text per video type")
    counts: dict[str, int] = {}
    for kind, app in zip(VIDEO_TYPES, answers):
        if app:
            counts[app] = counts.get(app, 0) + (1 if kind == "x-ogm+ogg" else 2)
    if not counts:
        return "unknown"
    return max(counts, key=lambda app: counts[app])  # max keeps the first of equals, as Counter.most_common


GETTERS: dict[str, Callable[[EvalContext, dict], Any]] = {
    "vlc_playing_info": get_vlc_playing_info,
    "vlc_config": get_vlc_config,
    "default_video_player": get_default_video_player,
}
EXTRA = None
