"""cua's desktops are OSWorld's Ubuntu to an agent: GNOME's top bar and dock, Ctrl+Alt+T, the
overview, the dock's menu, Files, window keys, text scaling, Chrome by its name, the web of its
allow-list. Each behaviour is proved through OSWorld's in-VM API alone, the way an agent's actions
reach a desktop (pyautogui code through /execute, OSWorld's own command), on one real GNOME desktop."""

import io
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest
from helpers.desktops import PREFIX, keyboard_switches, needs_desktops, png_size, request, run
from helpers.servers import LoopbackHTTPServer
from helpers.waiting import wait_for
from PIL import Image

from cua_cli._util.allowlist import HostAllowList
from cua_cli.envserver.desktop.desktop import LocalDesktop

pytestmark = [needs_desktops, pytest.mark.slow]
COMPONENT = "{https://accessibility.ubuntu.example.org/ns/component}"


class Web(LoopbackHTTPServer):
    def serve(self, handler, method, body):
        self.reply(handler, 200, "text/html", f"<title>page {handler.path}</title>".encode())


@pytest.fixture(scope="module")
def web():
    """"The web": pages on 127.0.0.2, a loopback address of the host that the desktop (whose own
    loopback is its own) reaches only through its proxy, as it would a site of its allow-list."""
    with Web("127.0.0.2") as server:
        yield server


@pytest.fixture(scope="module")
def desktop(tmp_path_factory, web):
    workdir = tmp_path_factory.mktemp("gnome")
    workdir.chmod(0o711)
    allow = HostAllowList([web.url.removeprefix("http://")])
    d = LocalDesktop(workdir, "127.0.0.1", (1920, 1080), session="gnome", web=allow)
    try:
        yield d
    finally:
        d.close()
    assert d.sandbox.processes() == []


@pytest.fixture(scope="module")
def url(desktop):
    return f"http://127.0.0.1:{desktop.port}"


def act(url, code: str) -> None:
    """An agent's step: pyautogui code, sent as OSWorld's client sends it."""
    out = run(url, ["python", "-c", PREFIX + code])
    assert out["returncode"] == 0, out


def sh(url, script: str) -> str:
    return run(url, script, shell=True)["output"]


def windows(url) -> list[str]:
    return [line.split(None, 3)[-1] for line in sh(url, "wmctrl -l").splitlines()]


def on_screen(url) -> dict:
    """What the accessibility tree shows, by name: the centre of each named, placed element."""
    status, _, raw = request(url + "/accessibility")
    assert status == 200, raw
    found = {}
    for node in ET.fromstring(json.loads(raw)["AT"]).iter():
        where, size = node.get(f"{COMPONENT}screencoord"), node.get(f"{COMPONENT}size")
        if node.get("name") and where and size:
            (x, y), (w, h) = (tuple(map(int, v.strip("()").split(", "))) for v in (where, size))
            if x >= 0 and y >= 0 and w > 0 and h > 0:
                found.setdefault(node.get("name"), (x + w // 2, y + h // 2))
    return found


def close_all(url) -> None:
    sh(url, "wmctrl -l | awk '{print $1}' | xargs -r -n1 wmctrl -i -c")
    wait_for(lambda: windows(url) == [], 30, "every window to close")


def test_an_agents_first_key_finds_the_keyboard_settled(url):
    """The first key through XTest on a fresh desktop switches no keyboard: if it did, GNOME would
    retake its grabs as the agent's next keys arrive and lose them (a first Ctrl+Alt+T was lost
    about one time in five on a busy host). First in this file: no key has been pressed before."""
    assert keyboard_switches(url) == 0


def test_the_screen_is_ubuntus_top_bar_dock_and_wallpaper(url):
    shown = on_screen(url)
    for name in ("Activities", "System", "Google Chrome", "Thunderbird", "LibreOffice Calc", "Files",
                 "Show Applications"):
        assert name in shown, (name, sorted(shown))
    assert shown["Activities"][1] < 30 and shown["Google Chrome"][0] < 60, "the top bar above, the dock on the left"
    status, _, png = request(url + "/screenshot")
    assert status == 200 and png_size(png) == (1920, 1080)
    picture = Image.open(io.BytesIO(png)).convert("RGB")
    assert picture.getpixel((960, 540)) != (0, 0, 0), "the shell has drawn its wallpaper before the desktop is ready"
    assert "Overview" not in windows(url), "the session starts on the desktop, as Ubuntu's does, not in the overview"


def test_ctrl_alt_t_opens_a_terminal_that_has_the_keyboard(url):
    act(url, "pyautogui.hotkey('ctrl', 'alt', 't')")
    # gnome-terminal's server starts on first use, over D-Bus: slow on a loaded 2-core host
    wait_for(lambda: "Terminal" in windows(url), 120, "a terminal window")
    act(url, "pyautogui.write('echo $((6*7)) > ~/answer.txt\\n', interval=0.02)")
    wait_for(lambda: sh(url, "cat ~/answer.txt 2>/dev/null") == "42\n", 60, "the typed command to run")
    close_all(url)


def test_an_app_starts_from_the_overview_by_its_name(url):
    act(url, "pyautogui.press('win')")
    wait_for(lambda: "Overview" in on_screen(url), 60, "the overview")
    act(url, "pyautogui.write('gedit', interval=0.05)")  # a name only the text editor answers to
    wait_for(lambda: "gedit" in on_screen(url), 60, "the text editor (gedit) among the search results")
    act(url, "pyautogui.press('enter')")
    wait_for(lambda: any("gedit" in w for w in windows(url)), 120, "the text editor's window")


def test_super_up_maximises_and_alt_f4_closes_the_focused_window(url):
    if not any("gedit" in w for w in windows(url)):
        assert request(url + "/setup/launch", "POST", {"command": ["gedit"]})[0] == 200
    wait_for(lambda: any("gedit" in w for w in windows(url)), 120, "the text editor's window")
    act(url, "pyautogui.hotkey('win', 'up')")  # pyautogui's X11 keys know 'win', not 'super'
    wait_for(lambda: "MAXIMIZED_VERT" in sh(url, "xprop -id $(xdotool getactivewindow) _NET_WM_STATE"), 30,
             "the window maximised")
    act(url, "pyautogui.hotkey('alt', 'f4')")
    wait_for(lambda: not any("gedit" in w for w in windows(url)), 30, "the window closed")


def test_the_docks_menu_unpins_a_favorite(url):
    x, y = on_screen(url)["Thunderbird"]
    act(url, f"pyautogui.rightClick({x}, {y})")
    wait_for(lambda: "Unpin" in on_screen(url), 30, "the dock's menu")
    ux, uy = on_screen(url)["Unpin"]
    act(url, f"pyautogui.click({ux}, {uy})")
    wait_for(lambda: "thunderbird" not in sh(url, "gsettings get org.gnome.shell favorite-apps"), 30,
             "Thunderbird gone from the favorites")
    assert "google-chrome.desktop" in sh(url, "gsettings get org.gnome.shell favorite-apps")


def test_a_double_click_in_files_opens_a_file_in_its_app(url):
    sh(url, "mkdir -p ~/Documents && echo hello > ~/Documents/hello.txt")
    status, _, raw = request(url + "/setup/launch", "POST", {"command": ["nautilus", "/home/user/Documents"]})
    assert status == 200, raw
    wait_for(lambda: "hello.txt" in on_screen(url), 60, "the file's icon in Files")
    x, y = on_screen(url)["hello.txt"]
    # Files is a GTK 4 app: its accessibility tree places things within the window's frame, which
    # starts past the window's shadow (_GTK_FRAME_EXTENTS) from where X has the window.
    geometry = sh(url, "xdotool search --name '^Documents$' getwindowgeometry --shell")
    left, _, top, _ = map(int, sh(url, "xprop -id $(xdotool search --name '^Documents$') _GTK_FRAME_EXTENTS")
                          .split("=")[1].split(","))
    origin = dict(line.split("=") for line in geometry.split())
    x, y = x + int(origin["X"]) + left, y + int(origin["Y"]) + top
    act(url, f"pyautogui.doubleClick({x}, {y})")
    wait_for(lambda: any(w.startswith("hello.txt") and "gedit" in w for w in windows(url)), 60,
             "hello.txt open in the text editor")
    close_all(url)


def test_a_larger_text_scaling_factor_reaches_what_apps_draw(url):
    assert "Xft.dpi:\t96" in sh(url, "xrdb -query")
    sh(url, "gsettings set org.gnome.desktop.interface text-scaling-factor 1.5")
    wait_for(lambda: "Xft.dpi:\t144" in sh(url, "xrdb -query"), 30, "the settings daemon to scale text")
    sh(url, "gsettings reset org.gnome.desktop.interface text-scaling-factor")


def test_google_chrome_starts_by_its_name_with_its_debugging_port_published_to_the_host(desktop, url):
    status, _, raw = request(url + "/setup/launch", "POST",
                             {"command": ["google-chrome", "--remote-debugging-port=1337", "about:blank"]})
    assert status == 200, raw
    probe = "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:1337/json/version').read().decode())\""
    wait_for(lambda: '"Browser"' in sh(url, probe + " 2>/dev/null"), 90, "Chrome's debugging port")
    wait_for(lambda: any("Chromium" in w for w in windows(url)), 60, "Chrome's window")
    # OSWorld's tasks find its window by the name "Google Chrome"
    status, _, raw = request(url + "/setup/activate_window", "POST", {"window_name": "Google Chrome"})
    assert status == 200, raw
    assert {"google-chrome", "chromium"} & set(os.path.basename(p) for p in sh(url, "ps -eo args=").split())
    # As OSWorld's VMs publish Chrome's port (9222), for the getters that reach Chrome over CDP
    status, _, raw = request(f"http://127.0.0.1:{desktop.published.ports['chromium']}/json/version")
    assert status == 200 and json.loads(raw)["Browser"].startswith("Chrome/"), raw
    close_all(url)


def test_the_hosts_of_the_allow_list_are_reached_through_the_proxy_and_nothing_else(desktop, url, web):
    curl = "curl -s --max-time 30 "
    assert sh(url, curl + web.url + "/by-curl") == "<title>page /by-curl</title>"
    assert sh(url, curl + "-o /dev/null -w '%{http_code}' http://example.org/") == "403"  # not on the list
    assert run(url, curl + "--noproxy '*' " + web.url + "/direct", shell=True)["returncode"] != 0  # no other way
    # Chrome by its name goes through it too (GNOME's own proxy settings would not); the test's page is on a
    # loopback address, which Chrome would not send to any proxy unless told
    status, _, raw = request(url + "/setup/launch", "POST", {"command": [
        "google-chrome", "--remote-debugging-port=1337", "--proxy-bypass-list=<-loopback>", web.url + "/by-chrome"]})
    assert status == 200, raw
    wait_for(lambda: web.requests["/by-chrome"] >= 1, 90, "Chrome's request for the page")
    wait_for(lambda: any("page /by-chrome" in w for w in windows(url)), 60, "the page's title on Chrome's window")
    assert web.requests["/direct"] == 0
    close_all(url)


def test_a_recording_of_the_screen_is_a_playable_mp4(url, tmp_path):
    assert request(url + "/end_recording", "POST", {})[0] == 400, "nothing is being recorded"
    assert request(url + "/start_recording", "POST", {})[0] == 200
    assert request(url + "/start_recording", "POST", {})[0] == 400, "one recording at a time, as OSWorld's"
    for x in (200, 900, 1600):
        act(url, f"pyautogui.moveTo({x}, 500, duration=0.3)")
    status, kind, video = request(url + "/end_recording", "POST", {})
    assert status == 200 and kind == "video/mp4", video[:200]
    (tmp_path / "rec.mp4").write_bytes(video)
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration:stream=width,height",
                            "-of", "json", str(tmp_path / "rec.mp4")], capture_output=True, text=True, check=True)
    info = json.loads(probe.stdout)
    assert float(info["format"]["duration"]) > 0.5
    assert (info["streams"][0]["width"], info["streams"][0]["height"]) == (1920, 1080)


def test_vlcs_web_port_is_published_and_only_while_something_listens_there(desktop, url):
    published = f"http://127.0.0.1:{desktop.published.ports['vlc']}/"
    try:
        request(published, timeout=10)
        raise AssertionError("nothing listens on 8080 inside yet: the connection must close")
    except OSError:
        pass
    sh(url, "cd /tmp && (python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 &)")
    wait_for(lambda: _answers(published), 30, "the desktop's port 8080 through the host's")


def _answers(address) -> bool:
    try:
        return request(address, timeout=10)[0] == 200
    except OSError:
        return False
