"""OSWorld's Chrome setup steps and live-page getters (cua_cli/osworld/setup.py's chrome_* steps,
getters/chrome_pages.py) on a real Chromium reached over its debugging port, as a desktop publishes
Chrome's: cua's getters must give what OSWorld's own (desktop-env 1.0.2) give on the same browser,
tabs and pages. The web is a local HTTP server; the desktop's API a stand-in of OSWorld's server
(for the accessibility tree, launches and files). One Chromium serves the whole module."""

import dataclasses
import json
import sqlite3
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from xml.sax.saxutils import escape

import pytest
from helpers.chromium import Chromium, OSWorldEnv, osworld_chrome_getters
from helpers.osworld_standin import StandIn, Web
from helpers.waiting import wait_for

from cua_cli._util.budget import Budget
from cua_cli.errors import BadTask, EnvError
from cua_cli.osworld import chrome_cdp
from cua_cli.osworld import setup as steps
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.getters import chrome_pages
from cua_cli.osworld.getters.context import EvalContext
from cua_cli.osworld.local_files import Downloads, cache_key
from cua_cli.osworld.setup import SetupContext, run_steps

pytestmark = pytest.mark.slow
playwright = pytest.importorskip("playwright.sync_api")

HTML = {"Content-Type": "text/html; charset=utf-8"}


def page(title: str, body: str = "") -> tuple:
    return (200, HTML, f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>".encode())


PARSE_BODY = """
<div class="city">Paris</div><div class="city"> Lyon </div><div class="city">Nice</div>
<div class="date">2024-05-01</div>
<div class="route">SEA<span class="sep">-</span>NYC<b>x</b>LAX</div><div class="route">ONE</div>
<div class="card"><h3> First </h3></div><div class="card"><p>no heading</p></div><div class="card"><h3>Third</h3></div>
<span class="tag">Red</span><span class="tag">Blue</span><span class="tag">green</span>
<ul class="cats"><li class="catAllProducts"><span> Shoes </span></li><li class="catAllProducts"><span>Hats</span></li>
<li class="other"><span>Bags</span></li></ul>
<main><section><p>From here</p><p>  To there  </p></section></main>
<form><input id="name" value="  Ada  "><input id="mail" value=""><textarea>notes</textarea></form>
<label>Departure</label><div>Price: 12 EUR</div>
"""

SITES = {
    "/": page("Home", "<p>the start</p>"),
    "/a": page("Page A", "<p>alpha</p>"),
    "/b": page("Page B", "<p>beta</p>"),
    "/c": page("Page C", "<p>gamma</p>"),
    "/caf%C3%A9/": page("Café", "<p>accents</p>"),
    "/moved": (302, {"Location": "/b"}, b""),
    "/missing": (404, HTML, b"<html><head><title>Not here</title></head><body>gone</body></html>"),
    "/script": page("Before", "<script>document.title = 'After ' + (1 + 1);</script>"),
    "/parse": page("Parse", PARSE_BODY),
    "/parse?x=1&tag=red": page("Parse", PARSE_BODY),
    "/profile": page("Profile", '<h1 id="name">Grace Hopper</h1><table id="stats"><tr><td>Citations</td>'
                                '<td>1234</td></tr><tr><td>h-index</td><td>56</td></tr></table>'
                                '<a id="first" href="/paper">COBOL</a><img id="pic" src="/p.png" alt="portrait">'),
    "/busy": page("Busy", "<script>setInterval(() => fetch('/ping?' + Date.now()), 150);</script>"),
    "/paper": page("Paper", '<div id="venue">CACM 1960</div><a id="doi" href="https://doi.example/10.1">doi</a>'),
}


@pytest.fixture(scope="module")
def web():
    w = Web(SITES)
    yield w
    w.close()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    c = Chromium(tmp_path_factory.mktemp("chromium") / "profile")
    yield c
    c.close()


@pytest.fixture(scope="module")
def osworld():
    return osworld_chrome_getters()


@pytest.fixture(scope="module")
def driver():
    """One Playwright driver for the module: a start costs a second or more of the host's cores."""
    p = playwright.sync_playwright().start()
    yield p
    p.stop()


class _Use:
    """`sync_playwright()` over the module's driver: the connections of one use are closed when it
    ends, as stopping a driver of its own closes them."""

    def __init__(self, p):
        self.p, self.chromium, self.browsers = p, self, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for browser in self.browsers:
            if browser.is_connected():
                browser.close()

    def connect_over_cdp(self, *args, **kwargs):
        self.browsers.append(self.p.chromium.connect_over_cdp(*args, **kwargs))
        return self.browsers[-1]


@pytest.fixture(autouse=True)
def one_driver(request, driver, monkeypatch):
    """cua, OSWorld and the helpers start Playwright's driver for each use; here they share the
    module's (each use still connects afresh; no second driver may start beside it in one thread)."""
    monkeypatch.setattr(playwright, "sync_playwright", lambda: _Use(driver))
    if "osworld" in request.fixturenames:
        monkeypatch.setattr(request.getfixturevalue("osworld"), "sync_playwright", lambda: _Use(driver))


def sleeps(monkeypatch, osworld=None) -> tuple[list, list]:
    """(cua's, OSWorld's) fixed waits in a getter (a retry's pause, the PDF's 3 s to render),
    recorded rather than waited: on the test's pages they change nothing."""
    ours, theirs = [], []
    monkeypatch.setattr(chrome_pages, "pause", lambda s, *args: ours.append(s))
    if osworld is not None:
        monkeypatch.setattr(osworld, "time", SimpleNamespace(sleep=theirs.append))  # the only `time` it uses
    return ours, theirs


@pytest.fixture
def desktop(tmp_path):
    s = StandIn(tmp_path / "vm")
    yield s
    s.close()


def budget() -> Budget:
    return Budget(step_timeout=120)


def contexts(desktop: StandIn, chromium_url, folder: Path):
    api = DesktopAPI(ApiSettings(desktop.url, apps={"chromium": chromium_url} if chromium_url else {}))
    downloads = Downloads(folder / "downloads")
    folder.mkdir(exist_ok=True)
    return SetupContext(api, downloads, folder), EvalContext(api, downloads, folder, budget())


def env_for(chromium: Chromium, desktop: StandIn, folder: Path, tree=None) -> OSWorldEnv:
    return OSWorldEnv(chromium.port, int(desktop.url.rsplit(":", 1)[1]), folder, tree)


def tabs_now(chromium: Chromium) -> list[str]:
    """The URLs of Chromium's tabs, from its debugging port's own list (no Playwright driver)."""
    with urllib.request.urlopen(f"{chromium.url}/json/list", timeout=30) as r:
        return [t["url"] for t in json.load(r) if t["type"] == "page"]


def set_tabs(chromium: Chromium, urls: list[str]) -> None:
    """Exactly these tabs, each loaded (where a redirect led)."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.connect_over_cdp(chromium.url)
        context = browser.contexts[0]
        old = list(context.pages)
        for url in urls:
            context.new_page().goto(url)
        for pg in old:
            pg.close()
        assert len(context.pages) == len(urls)


def address_bar(text: str, app: str = "Google Chrome") -> str:
    return (f'<desktop-frame name="main"><application name="{app}"><frame name="x">'
            f'<entry name="Address and search bar">{escape(text)}</entry></frame></application></desktop-frame>')


# -- steps


def test_open_and_close_tabs_leave_the_tabs_asked_for(chromium, web, desktop, tmp_path, osworld):
    set_tabs(chromium, ["about:blank"])
    setup, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    a, b, c = (f"{web.url}/{x}" for x in "abc")
    run_steps([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": [a, b, c]}}], setup, budget())
    # the tab that was there first is gone (a new connection lists tabs in Chrome's order, not theirs)
    assert sorted(tabs_now(chromium)) == [a, b, c]
    # a URL the server redirects and one spelt differently (www., no slash) name the same pages
    run_steps([{"type": "chrome_close_tabs",
                "parameters": {"urls_to_close": [b, f"http://www.127.0.0.1:{web.url.rsplit(':', 1)[1]}/zzz"]}}],
              setup, budget())
    assert sorted(tabs_now(chromium)) == [a, c]
    ours = chrome_pages.get_open_tabs_info(ctx, {"type": "open_tabs_info"})
    assert sorted(ours, key=str) == [{"title": "Page A", "url": a}, {"title": "Page C", "url": c}]
    assert ours == osworld.get_open_tabs_info(env_for(chromium, desktop, tmp_path), {})


def test_close_tabs_closes_the_first_tab_of_a_page_only(chromium, web, desktop, tmp_path):
    a, b = f"{web.url}/a", f"{web.url}/b"
    set_tabs(chromium, [a, b, a, b])
    setup, _ = contexts(desktop, chromium.url, tmp_path / "ep")
    run_steps([{"type": "chrome_close_tabs", "parameters": {"urls_to_close": [a, a, b]}}], setup, budget())
    assert tabs_now(chromium) == [b]


def test_open_tabs_keeps_a_tab_that_does_not_load(chromium, web, desktop, tmp_path):
    set_tabs(chromium, ["about:blank"])
    setup, _ = contexts(desktop, chromium.url, tmp_path / "ep")
    dead = "http://127.0.0.1:9/nothing"  # the discard port: refused
    run_steps([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": [dead, f"{web.url}/a"]}}], setup, budget())
    assert sorted(tabs_now(chromium)) == sorted([dead, f"{web.url}/a"])


def test_chrome_steps_check_their_parameters_and_the_port(desktop, tmp_path):
    setup, _ = contexts(desktop, None, tmp_path / "ep")
    with pytest.raises(BadTask, match="urls_to_open"):
        run_steps([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": "http://x"}}], setup, budget())
    with pytest.raises(BadTask, match="urls_to_close"):
        run_steps([{"type": "chrome_close_tabs", "parameters": {"urls_to_close": [1]}}], setup, budget())
    with pytest.raises(EnvError, match="publishes no Chrome debugging port"):
        run_steps([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://x"]}}], setup, budget())


def test_a_chrome_that_never_answers_fails_the_step(desktop, tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "CHROME_WAIT_S", 1.0)
    setup, _ = contexts(desktop, "http://127.0.0.1:9", tmp_path / "ep")
    with pytest.raises(EnvError, match=r"config\[0\] \(chrome_open_tabs\).*did not answer"):
        run_steps([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://x"]}}], setup, budget())


# -- update_browse_history


HISTORY = [{"url": "https://www.youtube.com/watch?v=1", "title": "One", "visit_time_from_now_in_seconds": 3600},
           {"url": "https://www.bbc.co.uk/", "title": "BBC", "visit_time_from_now_in_seconds": 300},
           {"url": "https://www.youtube.com/watch?v=1", "title": "One", "visit_time_from_now_in_seconds": 7200.5}]


def chrome_history(chromium: Chromium, web) -> bytes:
    """A History file Chromium itself wrote, with visits of its own."""
    set_tabs(chromium, [f"{web.url}/a", f"{web.url}/b"])
    path = chromium.profile / "Default" / "History"

    def visited() -> bool:  # Chromium writes its history a little after each visit
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            return db.execute("SELECT count(*) FROM urls").fetchone()[0] >= 2
        except sqlite3.DatabaseError:
            return False
        finally:
            db.close()

    wait_for(visited, 60, "Chromium's History to have the visits")
    return path.read_bytes()


def rows(path: Path):
    db = sqlite3.connect(path)
    try:
        urls = db.execute("SELECT id, url, title, visit_count, typed_count, last_visit_time, hidden FROM urls"
                          " ORDER BY id").fetchall()
        visits = db.execute("SELECT url, visit_time, from_visit, transition, segment_id, visit_duration FROM visits"
                            " ORDER BY id").fetchall()
        return urls, visits
    finally:
        db.close()


def test_update_browse_history_replaces_the_desktops_history(chromium, web, desktop, tmp_path):
    import datetime

    original = chrome_history(chromium, web)
    target = desktop.desktop.home / ".config/google-chrome/Default/History"
    target.parent.mkdir(parents=True)
    target.write_bytes(original)
    setup, _ = contexts(desktop, chromium.url, tmp_path / "ep")
    before = (datetime.datetime.now() - datetime.datetime(1601, 1, 1)).total_seconds() * 1e6
    run_steps([{"type": "update_browse_history", "parameters": {"history": HISTORY}}], setup, budget())
    after = (datetime.datetime.now() - datetime.datetime(1601, 1, 1)).total_seconds() * 1e6
    urls, visits = rows(target)
    assert [(u[1], u[2], u[3], u[4], u[6]) for u in urls] == [(h["url"], h["title"], 1, 0, 0) for h in HISTORY]
    for u, v, h in zip(urls, visits, HISTORY):
        ago = h["visit_time_from_now_in_seconds"] * 1e6
        assert before - ago - 1 <= u[5] <= after - ago + 1 and v == (u[0], u[5], 0, 805306368, 0, 0)
    assert len(visits) == len(HISTORY)  # Chromium's own visits are gone, as from OSWorld's empty file
    assert (tmp_path / "ep" / "history_new.sqlite").read_bytes() == target.read_bytes()
    assert desktop.desktop.executed[-1] == {"command": ["sudo chown -R user:user /home/user/.config/google-chrome/"
                                                        "Default/History"], "shell": True}


def test_update_browse_history_starts_from_osworlds_empty_file_without_one(chromium, web, desktop, tmp_path):
    # OSWorld's empty History, as the download cache holds it: Chromium's, emptied
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(chrome_history(chromium, web))
    db = sqlite3.connect(empty)
    db.execute("DELETE FROM visits")
    db.execute("DELETE FROM urls")
    db.commit()
    db.close()
    setup, _ = contexts(desktop, chromium.url, tmp_path / "ep")
    setup.downloads.cache_dir.mkdir(parents=True)
    (setup.downloads.cache_dir / cache_key(steps.EMPTY_HISTORY_URL, "history_empty.sqlite")).write_bytes(
        empty.read_bytes())
    run_steps([{"type": "update_browse_history", "parameters": {"history": HISTORY[:2]}}], setup, budget())
    urls, visits = rows(desktop.desktop.home / ".config/google-chrome/Default/History")
    assert [u[1] for u in urls] == [h["url"] for h in HISTORY[:2]] and len(visits) == 2
    # a Chrome that never ran has no profile folder: it is made before the upload
    assert {"command": 'mkdir -p "$HOME/.config/google-chrome/Default"', "shell": True} in desktop.desktop.executed


@pytest.mark.parametrize("history", [None, "x", [{"url": "u", "title": "t"}],
                                     [{"url": "u", "title": 1, "visit_time_from_now_in_seconds": 1}],
                                     [{"url": "u", "title": "t", "visit_time_from_now_in_seconds": True}]])
def test_update_browse_history_refuses_a_broken_history(desktop, tmp_path, history):
    setup, _ = contexts(desktop, None, tmp_path / "ep")
    with pytest.raises(BadTask):
        run_steps([{"type": "update_browse_history", "parameters": {"history": history}}], setup, budget())
    assert not any(c == "/setup/upload" for c in desktop.desktop.calls)


def test_update_browse_history_refuses_a_history_that_is_no_database(desktop, tmp_path):
    target = desktop.desktop.home / ".config/google-chrome/Default/History"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not sqlite at all" * 100)
    setup, _ = contexts(desktop, None, tmp_path / "ep")
    with pytest.raises(EnvError, match="no Chrome history database"):
        run_steps([{"type": "update_browse_history", "parameters": {"history": HISTORY}}], setup, budget())


# -- getters, against OSWorld's


TAB_SETS = [["/a"], ["/a", "/b", "/c"], ["/moved", "/missing", "/script"], ["/caf%C3%A9/", "/a", "/a"]]


@pytest.mark.parametrize("tabs", TAB_SETS)
def test_open_tabs_info_is_osworlds(chromium, web, desktop, tmp_path, osworld, tabs):
    set_tabs(chromium, [web.url + t for t in tabs])
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    ours = chrome_pages.get_open_tabs_info(ctx, {"type": "open_tabs_info"})
    assert len(ours) == len(tabs)
    assert ours == osworld.get_open_tabs_info(env_for(chromium, desktop, tmp_path), {})


def test_a_tab_that_never_goes_quiet_is_an_error_as_in_osworld(chromium, web, desktop, tmp_path, osworld,
                                                              monkeypatch):
    """OSWorld quirk: its `Load timeout` title is never given (Playwright's TimeoutError is not Python's)."""
    set_tabs(chromium, [f"{web.url}/busy", f"{web.url}/a"])
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    quick = dataclasses.replace(ctx, budget=Budget(step_timeout=3))  # cua gives up sooner; OSWorld waits 30 s
    ours = chrome_pages.get_open_tabs_info(quick, {"type": "open_tabs_info"})
    assert sorted(ours, key=str) == [{"title": "Error encountered", "url": f"{web.url}/busy"},
                                     {"title": "Page A", "url": f"{web.url}/a"}]
    # the busy tab fetches every 150 ms for ever: OSWorld's wait of it ends as it does after 30 s
    wait = playwright.Page.wait_for_load_state
    monkeypatch.setattr(playwright.Page, "wait_for_load_state",
                        lambda page, state=None, timeout=None: wait(page, state, timeout=min(timeout, 3000)))
    assert ours == osworld.get_open_tabs_info(env_for(chromium, desktop, tmp_path), {})


def test_open_tabs_info_relaunches_a_chrome_that_is_gone(desktop, tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_pages, "RELAUNCH_WAIT_S", 0.5)
    _, ctx = contexts(desktop, "http://127.0.0.1:9", tmp_path / "ep")
    assert chrome_pages.get_open_tabs_info(ctx, {"type": "open_tabs_info"}) == []
    assert desktop.desktop.processes == [chrome_cdp.LAUNCH]  # OSWorld gives up on a relaunched one at once


@pytest.mark.parametrize("path", ["/a", "/moved", "/missing", "/script", "/caf%C3%A9/"])
def test_page_info_is_osworlds(chromium, web, desktop, tmp_path, osworld, path):
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    before = tabs_now(chromium)
    config = {"type": "page_info", "url": web.url + path}
    ours = chrome_pages.get_page_info(ctx, config)
    assert ours["url"].startswith(web.url) and ours["content"].startswith("<")
    assert ours == osworld.get_page_info(env_for(chromium, desktop, tmp_path), config)
    assert tabs_now(chromium) == before  # the fresh context is gone with its tab


def test_page_info_of_a_page_that_cannot_load_is_osworlds(chromium, desktop, tmp_path, osworld, monkeypatch):
    waited = sleeps(monkeypatch, osworld)
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    config = {"type": "page_info", "url": "http://127.0.0.1:9/"}
    ours = chrome_pages.get_page_info(ctx, config)
    assert ours == {"title": "Connection failed", "url": "http://127.0.0.1:9/", "content": ""}
    assert ours == osworld.get_page_info(env_for(chromium, desktop, tmp_path), config)
    assert waited == ([3], [3])  # tried again 3 s later


@pytest.mark.parametrize("bar,prefix", [("127.0.0.1:{port}/a", "http://"), ("127.0.0.1:{port}/script", "http://"),
                                        ("127.0.0.1:{port}/moved", "http://"), ("127.0.0.1:9/", "http://"),
                                        ("", "http://"), (None, None)])
def test_active_tab_info_is_osworlds(chromium, web, desktop, tmp_path, osworld, bar, prefix):
    port = web.url.rsplit(":", 1)[1]
    tree = address_bar(bar.format(port=port)) if bar is not None else "<desktop-frame/>"
    desktop.desktop.accessibility = tree
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    config = {"type": "active_tab_info", "goto_prefix": prefix} if prefix else {"type": "active_tab_info"}
    ours = chrome_pages.get_active_tab_info(ctx, config)
    assert (ours is None) == (bar in (None, "", "127.0.0.1:9/"))
    assert ours == osworld.get_active_tab_info(env_for(chromium, desktop, tmp_path, tree), config)


PARSES = [
    {"category": "class", "class_multiObject": {"city": {"0": "start", "2": "end", "5": "far"}},
     "class_singleObject": {"date": "time", "nothing": "none"}},
    {"category": "class", "class_multiObject_child": {"route": {"0": "from", "1": "to", "2": "via", "3": "past"}},
     "class_multiObject_only_child": {"card": {"0": "first", "1": "second", "2": "third"}}},
    {"category": "class", "class_multiObject_search_exist": {"tag": ["Red", "Blue", "Pink", "is_other_exist"]}},
    {"category": "class", "class_multiObject_search_exist": {"tag": ["Red", "Blue", "green"]}},
    {"category": "xpath", "xpathObject": {"/html/body/main/section/p[1]": "from", "/html/body/main/section/p[2]": "to",
                                          "/html/body/main/section/p[9]": "none", "//label": "label"}},
    {"category": "input", "inputObject": {"//input[@id='name']": "name", "//input[@id='mail']": "mail",
                                          "//textarea": "notes", "//input[@id='none']": "none", "//label": "label"}},
    {"category": "label", "labelObject": {"Departure": "dep", "Price": "price"}},
    {"category": "class&url", "class_multiObject": {"tag": ["red", "BLUE"]},
     "class_multiObject_li": {"cats": ["shoes", "Hats"]},
     "url_include_expected": ["tag=red", "blue"], "url_include_expected_multichoice": {"x=1": "one", "x=2": "two"}},
    {"category": "class&url", "class_multiObject": {"tag": ["red", "blue", "greens"]}},
    {"category": "something else"},
]


def test_active_tab_html_parse_is_osworlds(chromium, web, desktop, tmp_path, osworld):
    path = "/parse?x=1&tag=red"
    set_tabs(chromium, [f"{web.url}/a", web.url + path])
    tree = address_bar(f"127.0.0.1:{web.url.rsplit(':', 1)[1]}{path}")
    desktop.desktop.accessibility = tree
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    env = env_for(chromium, desktop, tmp_path, tree)
    for parse in PARSES:  # on the same tabs: neither getter changes a page it reads
        config = {"type": "active_tab_html_parse", "goto_prefix": "http://", **parse}
        ours = chrome_pages.get_active_tab_html_parse(ctx, config)
        if config["category"] != "something else":
            assert any(v not in ("", False) for v in ours.values()), config  # the page was read
        assert ours == osworld.get_active_tab_html_parse(env, config), config


def test_active_tab_html_parse_finds_the_tab_by_its_decoded_url(chromium, web, desktop, tmp_path, osworld):
    set_tabs(chromium, [f"{web.url}/a", f"{web.url}/caf%C3%A9/"])
    port = web.url.rsplit(":", 1)[1]
    for bar, found in ((f"127.0.0.1:{port}/café", True), (f"127.0.0.1:{port}/c", False)):
        tree = address_bar(bar, app="Google Chrome")
        desktop.desktop.accessibility = tree
        _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
        config = {"type": "active_tab_html_parse", "goto_prefix": "http://", "category": "xpath",
                  "xpathObject": {"//p": "p"}}
        ours = chrome_pages.get_active_tab_html_parse(ctx, config)
        assert ours == ({"p": "accents"} if found else {})
        assert ours == osworld.get_active_tab_html_parse(env_for(chromium, desktop, tmp_path, tree), config)


def test_active_tab_html_parse_reads_chromiums_address_bar_too(chromium, web, desktop, tmp_path):
    set_tabs(chromium, [f"{web.url}/b"])
    desktop.desktop.accessibility = address_bar(f"127.0.0.1:{web.url.rsplit(':', 1)[1]}/b", app="Chromium")
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    config = {"type": "active_tab_html_parse", "goto_prefix": "http://", "category": "xpath",
              "xpathObject": {"//p": "p"}}
    assert chrome_pages.get_active_tab_html_parse(ctx, config) == {"p": "beta"}


INFOS = [
    [{"action": "inner_text", "selector": "#name"},
     {"action": "inner_text", "selector": "#stats > tbody > tr:nth-child(2) > td:nth-child(2)"},
     {"action": "attribute", "selector": "#pic", "attribute": "alt"},
     {"action": "attribute", "selector": "#pic", "attribute": "title"},
     {"action": "click_and_inner_text", "selector": ["#first", "#venue"]},
     {"action": "click_and_attribute", "selector": ["#first", "#doi"], "attribute": "href"},
     {"selector": "#first"}],
    [{"action": "click_and_inner_text", "selector": ["#name"]}],
]


@pytest.mark.parametrize("infos", INFOS)
def test_info_from_website_is_osworlds(chromium, web, desktop, tmp_path, osworld, infos):
    set_tabs(chromium, [f"{web.url}/a"])
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    config = {"type": "info_from_website", "url": f"{web.url}/profile", "infos": infos, "backups": ["b"]}
    ours = chrome_pages.get_info_from_website(ctx, config)
    assert ours != ["b"]
    assert ours == osworld.get_info_from_website(env_for(chromium, desktop, tmp_path), config)


def test_info_from_website_gives_the_backups_when_the_site_fails(chromium, desktop, tmp_path, osworld):
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    config = {"type": "info_from_website", "url": "http://127.0.0.1:9/", "backups": ["Grace", "1"],
              "infos": [{"action": "inner_text", "selector": "#name"}]}
    assert chrome_pages.get_info_from_website(ctx, config) == ["Grace", "1"]
    assert osworld.get_info_from_website(env_for(chromium, desktop, tmp_path), config) == ["Grace", "1"]


@pytest.mark.parametrize("infos", [[{"action": "hover", "selector": "#x"}], [{"action": "inner_text"}],
                                   [{"action": "click_and_inner_text", "selector": "#x"}],
                                   [{"action": "attribute", "selector": "#x"}], "x"])
def test_info_from_website_refuses_broken_infos(desktop, tmp_path, infos):
    _, ctx = contexts(desktop, "http://127.0.0.1:9", tmp_path / "ep")
    with pytest.raises(BadTask):
        chrome_pages.get_info_from_website(ctx, {"type": "info_from_website", "url": "http://x/", "infos": infos})


def test_pdf_from_url_prints_the_page_as_osworld_does(chromium, web, desktop, tmp_path, osworld, monkeypatch):
    waited = sleeps(monkeypatch, osworld)
    _, ctx = contexts(desktop, chromium.url, tmp_path / "ep")
    config = {"type": "pdf_from_url", "path": f"{web.url}/profile", "dest": "gold's page.pdf"}
    ours = Path(chrome_pages.get_pdf_from_url(ctx, config))
    assert ours.parent == tmp_path / "ep" / "expected" and ours.read_bytes().startswith(b"%PDF-")
    theirs = Path(osworld.get_pdf_from_url(env_for(chromium, desktop, tmp_path), config))
    assert theirs.read_bytes().startswith(b"%PDF-") and len(theirs.read_bytes()) > 100
    assert page_count(ours) == page_count(theirs) == 1
    assert waited == ([3], [3])  # for the page to render


def page_count(path: Path) -> int:
    return path.read_bytes().count(b"/Type /Page\n") + path.read_bytes().count(b"/Type /Page/") \
        + path.read_bytes().count(b"/Type/Page/") + path.read_bytes().count(b"/Type/Page\n")


def test_a_gold_pdf_that_cannot_be_printed_raises(chromium, desktop, tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_pages, "RELAUNCH_WAIT_S", 0.1)
    waited, _ = sleeps(monkeypatch)
    _, ctx = contexts(desktop, "http://127.0.0.1:9", tmp_path / "ep")
    with pytest.raises(EnvError, match="could not print"):
        chrome_pages.get_pdf_from_url(ctx, {"type": "pdf_from_url", "path": "http://127.0.0.1:9/", "dest": "g.pdf"})
    assert not (tmp_path / "ep" / "expected" / "g.pdf").exists()
    assert waited == [5, 5]  # three tries 5 s apart, as OSWorld's


def test_getters_need_the_desktops_chrome_port(desktop, tmp_path):
    _, ctx = contexts(desktop, None, tmp_path / "ep")
    desktop.desktop.accessibility = address_bar("example.org/")
    for name, config in (("open_tabs_info", {}), ("page_info", {"url": "http://x/"}),
                         ("active_tab_info", {}), ("active_tab_html_parse", {"category": "class"}),
                         ("info_from_website", {"url": "http://x/", "infos": []})):
        with pytest.raises(EnvError, match="publishes no Chrome debugging port"):
            chrome_pages.GETTERS[name](ctx, {"type": name, **config})
