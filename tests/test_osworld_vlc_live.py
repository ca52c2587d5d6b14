"""vlc_playing_info and is_vlc_playing against a real VLC: `cvlc -I http` playing a small video made
with ffmpeg, its web interface on a free port of 127.0.0.1 with OSWorld's password, read by cua's
getter (through the desktop's published VLC URL) and by OSWorld's own getter, and scored by both
metrics. One VLC for the module, stopped by its process group."""

import shutil
import subprocess
import types
from xml.etree import ElementTree

import pytest
import requests
from helpers.net import free_port
from helpers.osworld_reference import reference_apart
from helpers.osworld_standin import StandIn
from helpers.processes import kill_group
from helpers.waiting import wait_for
from test_osworld_apps import MEDIA, run_vlc_as_user, vlc_home

from cua_cli._util.budget import Budget
from cua_cli.errors import EnvError
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.getters import EvalContext
from cua_cli.osworld.getters import vlc as vlc_getters
from cua_cli.osworld.getters.vlc import VLC_PASSWORD, get_vlc_playing_info
from cua_cli.osworld.local_files import Downloads
from cua_cli.osworld.metrics.vlc import is_vlc_playing

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (shutil.which("cvlc") and shutil.which("ffmpeg")), reason="needs VLC and ffmpeg")]

MOVIE = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"


@pytest.fixture(scope="module")
def vlc_server():
    """(base URL, the folder of the video) of a VLC playing MOVIE in a loop."""
    home = vlc_home()
    movie = home / MOVIE
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=duration=5:size=160x120:rate=10",
                    "-f", "lavfi", "-i", "sine=duration=5", "-shortest", "-pix_fmt", "yuv420p", str(movie)],
                   check=True, timeout=120)
    movie.chmod(0o644)
    port = free_port()
    p = run_vlc_as_user(["cvlc", "-I", "http", "--http-host", "127.0.0.1", "--http-port", str(port),
                         "--http-password", VLC_PASSWORD, "--loop", "--vout", "dummy", "--aout", "dummy",
                         str(movie)], home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: state(base) == "playing", timeout=90, what="VLC playing")
        yield base
    finally:
        kill_group(p)
        p.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


def state(base: str, command: str = ""):
    try:
        r = requests.get(f"{base}/requests/status.xml{command}", auth=("", VLC_PASSWORD), timeout=5)
    except requests.RequestException:
        return None
    return ElementTree.fromstring(r.content).findtext("state") if r.status_code == 200 else r.status_code


@pytest.fixture
def desktop(tmp_path):
    s = StandIn(tmp_path / "vm")
    yield s
    s.close()


def contexts(desktop, tmp_path, vlc_url):
    """(cua's EvalContext with the desktop publishing `vlc_url`, OSWorld's env as its getter sees it)."""
    api = DesktopAPI(ApiSettings(desktop.url, timeout_s=10, retries=1, apps={"vlc": vlc_url} if vlc_url else {}))
    ours = EvalContext(api, Downloads(tmp_path / "downloads"), tmp_path / "ours", Budget(30))
    (tmp_path / "ours").mkdir(parents=True)
    (tmp_path / "theirs").mkdir()
    host, _, port = (vlc_url or "http://127.0.0.1:1").removeprefix("http://").partition(":")
    env = types.SimpleNamespace(vm_ip=host, vlc_port=int(port), cache_dir=str(tmp_path / "theirs"))
    return ours, env


def meta(path: str) -> tuple:
    root = ElementTree.parse(path).getroot()
    return root.findtext("state"), root.findtext('information/category[@name="meta"]/info[@name="filename"]')


def test_what_vlc_plays_is_read_and_scored_as_osworld_does(vlc_server, desktop, tmp_path):
    getters, metrics = reference_apart("getters.vlc"), reference_apart("metrics.vlc", MEDIA)
    ctx, env = contexts(desktop, tmp_path, vlc_server)
    rule = {"type": "file_name", "file_name": MOVIE}
    ours = get_vlc_playing_info(ctx, {"dest": "status.xml"})
    theirs = getters.get_vlc_playing_info(env, {"dest": "status.xml"})
    assert meta(ours) == meta(theirs) == ("playing", MOVIE)
    assert is_vlc_playing(ours, rule) == 1.0 == metrics.is_vlc_playing(theirs, rule)
    assert is_vlc_playing(ours, {"type": "file_name", "file_name": "other.mp4"}) == 0.0

    assert state(vlc_server, "?command=pl_pause") in ("playing", "paused")
    try:
        wait_for(lambda: state(vlc_server) == "paused", timeout=30, what="VLC paused")
        ours = get_vlc_playing_info(ctx, {"dest": "status.xml"})
        theirs = getters.get_vlc_playing_info(env, {"dest": "status.xml"})
        assert meta(ours)[0] == meta(theirs)[0] == "paused"
        assert is_vlc_playing(ours, rule) == 0.0 == metrics.is_vlc_playing(theirs, rule)
    finally:
        state(vlc_server, "?command=pl_play")
        wait_for(lambda: state(vlc_server) == "playing", timeout=30, what="VLC playing again")


def test_a_refused_password_or_no_vlc_is_no_score_and_no_vlc_url_is_the_desktops_fault(vlc_server, desktop, tmp_path,
                                                                                      monkeypatch):
    ctx, _ = contexts(desktop, tmp_path, vlc_server)
    monkeypatch.setattr(vlc_getters, "VLC_PASSWORD", "wrong")  # as a VLC started with another password meets it
    assert get_vlc_playing_info(ctx, {"dest": "status.xml"}) is None
    monkeypatch.undo()
    assert get_vlc_playing_info(ctx, {"dest": "status.xml"}) is not None

    ctx, _ = contexts(desktop, tmp_path / "closed", f"http://127.0.0.1:{free_port()}")  # nothing listens: VLC closed
    assert get_vlc_playing_info(ctx, {"dest": "status.xml"}) is None
    assert is_vlc_playing(None, {"type": "file_name", "file_name": MOVIE}) == 0.0

    gone = types.SimpleNamespace(url=f"http://127.0.0.1:{free_port()}")  # the desktop is gone too: its failure
    ctx, _ = contexts(gone, tmp_path / "gone", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(EnvError):
        get_vlc_playing_info(ctx, {"dest": "status.xml"})

    ctx, _ = contexts(desktop, tmp_path / "none", None)
    with pytest.raises(EnvError, match="publishes no VLC"):
        get_vlc_playing_info(ctx, {"dest": "status.xml"})
