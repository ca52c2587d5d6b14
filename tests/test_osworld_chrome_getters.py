"""cua's Chrome profile-file and address-bar getters against OSWorld's own (desktop-env 1.0.2's
getters/chrome.py), both reading the same files off the stand-in of OSWorld's in-VM server
(helpers/osworld_standin.py): cua's through its DesktopAPI, OSWorld's through its own
PythonController. OSWorld asks its VM for the profile's path with a Python command the stand-in
does not run: the test's controller answers it as the VM would (HOME=/home/user).

The files are generated (Preferences and Local State with every key the getters read, of every
JSON type, in several encodings or not JSON at all; Cookies and History databases, WAL or not, and
files that are none), and written by a real Chromium (`chromium --headless`, marked slow)."""

import ast
import importlib
import json
import re
import shutil
import sqlite3
import subprocess
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.osworld_reference import reference_apart
from helpers.osworld_standin import StandIn
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cua_cli._util.budget import Budget
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.getters import GETTERS, EvalContext
from cua_cli.osworld.getters import chrome as getters
from cua_cli.osworld.metrics import chrome as metrics

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
CRASH = "crash"
PROFILE = "home/user/.config/google-chrome"
_PATH_COMMAND = re.compile(r"import os; print\(os\.path\.join\(os\.getenv\('HOME'\), (.*)\)\)")
_SHORTCUT_COMMAND = re.compile(r"import os; print\(os\.path\.join\(os\.path\.expanduser\('~'\), (.*)\)\)")


@pytest.fixture(scope="module")
def osw():
    return reference_apart("getters.chrome", ("pydrive.auth", "pydrive.drive", "playwright.sync_api"))


@pytest.fixture
def vm(tmp_path, osw):
    """(the stand-in, cua's EvalContext, OSWorld's env) over one simulated desktop."""
    controllers = importlib.import_module("desktop_env.controllers.python")

    class Controller(controllers.PythonController):
        def execute_python_command(self, command: str) -> dict:
            """The path OSWorld's command prints on a VM whose HOME is /home/user."""
            for pattern, home in ((_PATH_COMMAND, "/home/user"), (_SHORTCUT_COMMAND, "/home/user")):
                m = pattern.fullmatch(command)
                if m:
                    parts = ast.literal_eval(f"({m.group(1)},)")
                    return {"output": "/".join((home,) + parts) + "\n", "error": "", "returncode": 0}
            raise AssertionError(f"OSWorld asked an unexpected command: {command!r}")

    standin = StandIn(tmp_path / "vm")

    def desktop_path(handler):
        """As a VM answers: the Desktop's path on the VM (the shared stand-in answers its local folder)."""
        handler._body()
        if not (standin.desktop.home / "Desktop").is_dir():
            return handler._send(404, {"error": "Unsupported operating system or desktop path not found"})
        handler._send(200, {"desktop_path": "/home/user/Desktop"})

    standin.server.RequestHandlerClass.r_desktop_path = desktop_path
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    ctx = EvalContext(DesktopAPI(ApiSettings(standin.url, timeout_s=30, retries=1)), None, tmp_path / "ours",
                      Budget(step_timeout=30, deadline=time.monotonic() + 600), file_tries=1)
    port = int(standin.url.rsplit(":", 1)[1])
    controller = Controller("127.0.0.1", port)
    controller.retry_times, controller.retry_interval = 1, 0
    env = types.SimpleNamespace(vm_platform="Linux", controller=controller, cache_dir=str(tmp_path / "theirs"))
    yield standin, ctx, env
    standin.close()


def theirs(fn, *args):
    try:
        value = fn(*args)
    except Exception:  # noqa: BLE001 - OSWorld's getter crashed
        event("OSWorld's getter: crash")  # --hypothesis-show-statistics
        return CRASH
    event(f"OSWorld's getter: {'None' if value is None else 'empty' if not value else 'a value'}")
    return value


def put(standin, path: str, data) -> None:
    """Write (bytes) or remove (None) a file of the simulated desktop."""
    target = standin.desktop.root / path
    if data is None:
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


# -- Preferences and Local State

VALUE = st.one_of(st.none(), st.booleans(), st.integers(-1, 6), st.sampled_from(["", "Bing", "Thomas", "en-GB"]),
                  st.just([]), st.just({}), st.just(["a@1", "b"]))


def nested(**keys):
    return st.one_of(VALUE, st.fixed_dictionaries({}, optional=keys))


EXTENSION = nested(path=st.one_of(VALUE, st.sampled_from(["/home/user/Desktop/helloExtension", "ext/1.0"])),
                   manifest=nested(name=st.one_of(VALUE, st.sampled_from(["Momentum", "Google Translate"]))))
PREFERENCES = st.fixed_dictionaries({}, optional={
    "default_search_provider_data": nested(template_url_data=nested(short_name=VALUE)),
    "profile": nested(name=VALUE, default_content_setting_values=VALUE),
    "webkit": nested(webprefs=nested(default_font_size=st.integers(9, 30), minimum_font_size=st.integers(0, 20))),
    "enable_do_not_track": VALUE,
    "safebrowsing": nested(enhanced=VALUE, enabled=VALUE),
    "session": nested(restore_on_startup=st.one_of(VALUE, st.sampled_from([5, 5.0, 4, 1])), startup_urls=VALUE),
    "extensions": nested(settings=st.one_of(VALUE, st.dictionaries(st.sampled_from(["aapoc", "bmnlc", "cjpal"]),
                                                                   EXTENSION, max_size=3))),
    "browser": nested(enabled_labs_experiments=st.one_of(VALUE, st.lists(st.sampled_from(
        ["chrome-refresh-2023@1", "chrome-webui-refresh-2023@1"]), max_size=2))),
    "intl": nested(app_locale=VALUE),
})
FILES = st.one_of(
    st.builds(lambda prefs, encoding: json.dumps(prefs).encode(encoding), PREFERENCES,
              st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16"])),
    st.sampled_from([None, b"", b"{", b"[1, 2]", b'"text"', b"\xff\xfe\x00", b"null", b"[" * 3000 + b"]" * 3000]))
PREFERENCE_GETTERS = ["default_search_engine", "enabled_experiments", "chrome_language", "profile_name",
                      "chrome_font_size", "enable_do_not_track", "enable_enhanced_safety_browsing",
                      "enable_safe_browsing", "new_startup_page", "find_unpacked_extension_path",
                      "find_installed_extension_name", "data_delete_automacally"]


@pytest.mark.slow
@SETTINGS
@given(data=FILES)
def test_preferences_are_read_as_osworld_reads_them(vm, osw, data):
    standin, ctx, env = vm
    put(standin, f"{PROFILE}/Default/Preferences", data)
    put(standin, f"{PROFILE}/Local State", data)
    for name in PREFERENCE_GETTERS:
        assert GETTERS[name](ctx, {"type": name}) == getattr(osw, f"get_{name}")(env, {"type": name}), name


def test_a_fresh_profile_reads_as_osworld_reads_it(vm, osw):
    standin, ctx, env = vm
    for name in PREFERENCE_GETTERS:  # no profile at all
        assert GETTERS[name](ctx, {}) == getattr(osw, f"get_{name}")(env, {}), name
    assert GETTERS["enable_enhanced_safety_browsing"](ctx, {}) == "Google"  # OSWorld's fallback, kept
    assert GETTERS["chrome_font_size"](ctx, {}) == {"default_fixed_font_size": 13, "default_font_size": 16}
    put(standin, f"{PROFILE}/Default/Preferences", json.dumps({"profile": {"name": "Thomas"}, "webkit": {
        "webprefs": {"default_font_size": 20}}, "session": {"restore_on_startup": 5}}).encode())
    assert GETTERS["profile_name"](ctx, {}) == "Thomas"
    assert GETTERS["new_startup_page"](ctx, {}) == "true"
    size = GETTERS["chrome_font_size"](ctx, {})
    assert metrics.check_font_size(size, {"type": "range", "min": 16, "max": 99999}) == 1


BOOKMARK_FILES = st.one_of(
    st.builds(lambda roots: json.dumps({"checksum": "x", "roots": roots, "version": 1}).encode(), st.one_of(
        VALUE, st.fixed_dictionaries({"bookmark_bar": st.fixed_dictionaries({"children": st.lists(
            st.fixed_dictionaries({"type": st.sampled_from(["url", "folder"]),
                                   "name": st.sampled_from(["Favorites", "x"]),
                                   "url": st.just("https://jalammar.github.io/illustrated-transformer/")}),
            max_size=3)})}))),
    st.sampled_from([None, b"", b"{", b"[]", b"[1]", b'{"version": 1}', b"7"]))


@SETTINGS
@given(data=BOOKMARK_FILES)
def test_bookmarks_are_read_as_osworld_reads_them(vm, osw, data):
    standin, ctx, env = vm
    put(standin, f"{PROFILE}/Default/Bookmarks", data)
    ours, osworld = GETTERS["bookmarks"](ctx, {}), theirs(osw.get_bookmarks, env, {})
    if osworld == CRASH:  # a file the agent broke: nothing any bookmark rule accepts
        assert ours == []
    else:
        assert ours == osworld
    rule = {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}
    assert metrics.is_expected_bookmarks(ours, rule) == (0.0 if osworld == CRASH else
                                                         metrics.is_expected_bookmarks(osworld, rule))


# -- Cookies and History

def _database(path: Path, kind: str, rows: list, wal: bool) -> bytes:
    connection = sqlite3.connect(path)
    if wal:
        connection.execute("PRAGMA journal_mode=WAL")
    if kind == "cookies":
        connection.execute("CREATE TABLE cookies (creation_utc INTEGER, host_key TEXT, top_frame_site_key TEXT, "
                           "name TEXT, value TEXT)")
        connection.executemany("INSERT INTO cookies VALUES (?, ?, '', ?, 'v')", rows)
    elif kind == "urls":
        connection.execute("CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT, title TEXT, last_visit_time INTEGER)")
        connection.executemany("INSERT INTO urls (url, title, last_visit_time) VALUES (?, ?, ?)", rows)
    else:
        connection.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    connection.commit()
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = path.read_bytes()  # as Chrome's file is pulled: the database file alone
    connection.close()
    path.unlink()
    return data


HOSTS = st.sampled_from([".amazon.com", "www.amazon.com", ".google.com", "localhost", ""])
COOKIE_ROWS = st.lists(st.tuples(st.integers(0, 2**62), HOSTS, st.sampled_from(["sid", "session-id"])), max_size=4)
HISTORY_ROWS = st.lists(st.tuples(st.sampled_from(["https://www.youtube.com/", "https://www.amazon.com/dp/1", None]),
                                  st.sampled_from(["YouTube", ""]), st.integers(0, 2**62)), max_size=4)


@pytest.mark.slow
@SETTINGS
@given(kind=st.sampled_from(["cookies", "urls", "other", "garbage", "empty", "missing"]), cookies=COOKIE_ROWS,
       history=HISTORY_ROWS, wal=st.booleans())
def test_cookies_and_history_are_read_as_osworld_reads_them(vm, osw, tmp_path, kind, cookies, history, wal):
    standin, ctx, env = vm
    for name, table, rows, dest in (("Cookies", "cookies", cookies, "Cookies"),
                                    ("History", "urls", history, "history.sqlite")):
        if kind in ("cookies", "urls", "other"):
            data = _database(tmp_path / f"{name}.db", table if kind != "other" else "other", rows, wal)
        else:
            data = {"garbage": b"SQLite format 3\x00" + b"\x01" * 200, "empty": b"", "missing": None}[kind]
        put(standin, f"{PROFILE}/Default/{name}", data)
        getter = "cookie_data" if name == "Cookies" else "history"
        config = {"type": getter, "dest": dest}
        ours, osworld = GETTERS[getter](ctx, config), theirs(getattr(osw, f"get_{getter}"), env, config)
        assert ours == osworld, (name, kind)
    assert not list(Path(ctx.folder).glob("*-wal")) and not list(Path(ctx.folder).glob("*-shm"))


def test_a_database_query_that_runs_too_long_is_no_result(vm, tmp_path, monkeypatch):
    standin, ctx, env = vm
    path = tmp_path / "slow.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE VIEW urls AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                       "SELECT 'u' AS url, 't' AS title, i AS last_visit_time FROM n")
    connection.commit()
    connection.close()
    put(standin, f"{PROFILE}/Default/History", path.read_bytes())
    monkeypatch.setattr(getters, "SQL_WORK_S", 0.5)
    started = time.monotonic()
    assert GETTERS["history"](ctx, {"dest": "history.sqlite"}) is None
    assert time.monotonic() - started < 20


# -- the Desktop's shortcuts

SHORTCUT = st.one_of(st.builds(lambda name: f"[Desktop Entry]\nName={name}\nType=Application\n".encode(),
                               st.sampled_from(["Play Puzzle Game 2048", "Other"])),
                     st.sampled_from([b"\xff\xfe not UTF-8", b"", "Name=Café\n".encode()]))


@pytest.mark.slow
@SETTINGS
@given(files=st.dictionaries(st.sampled_from(["2048.desktop", "notes.txt", "Chrome app.desktop", "x.DESKTOP"]),
                             SHORTCUT, max_size=3),
       folder=st.sampled_from(["none", "plain", "plain", "with a .desktop folder"]))
def test_desktop_shortcuts_are_read_as_osworld_reads_them(vm, osw, files, folder):
    standin, ctx, env = vm
    put(standin, "home/user/Desktop", None)
    if folder != "none":
        (standin.desktop.root / "home/user/Desktop").mkdir()
        for name, data in files.items():
            put(standin, f"home/user/Desktop/{name}", data)
        if folder == "with a .desktop folder":
            (standin.desktop.root / "home/user/Desktop/folder.desktop").mkdir()
    ours, osworld = GETTERS["shortcuts_on_desktop"](ctx, {}), theirs(osw.get_shortcuts_on_desktop, env, {})
    if osworld == CRASH:
        assert ours is None
    else:
        assert ours == osworld
    rule = {"type": "name", "name": "Play Puzzle Game 2048"}
    assert metrics.is_shortcut_on_desktop(ours, rule) == (0.0 if osworld == CRASH else
                                                          theirs_score(osworld, rule))


def theirs_score(shortcuts, rule) -> float:
    return float(any("Name=" + rule["name"] + "\n" in text for text in shortcuts.values()))


# -- the address bar

ADDRESSES = st.sampled_from(["drugs.com/npc/", "www.drugs.com/tamiflu.html#side-effects", "",
                             "google.com/search?q=drip+coffee+maker&tbs=mr:1,price:1&q=second",
                             "cars.com/shopping/results/?list_price_max=50000&zip=10001&fuel_slugs[]=electric",
                             "macys.com/shop/mens-clothing/mens-shirts/Men_regular_size_t,Sleeve_length/L,Short%20Sleeve"
                             "?id=20626", "macys.com/shop/mens-clothing/shirts/Price_discount_range,Product_department/"
                             "50_PERCENT_ off %26 more|30_PERCENT_ off %26 more,Shirts",
                             "timeanddate.com/weather/uk/manchester/may-weather", "a&amp;b/x"])


def _chrome_tree(app: str, bars: list) -> str:
    entries = "".join(f'<entry name="Address and search bar">{text}</entry>' if text is not None
                      else '<entry name="Address and search bar"/>' for text in bars)
    return (f'<desktop-frame name="main"><application name="{app}"><frame name="x - {app}">'
            f'<tool-bar>{entries}</tool-bar></frame></application>'
            f'<application name="gnome-shell"><entry name="Address and search bar">shell</entry></application>'
            f'</desktop-frame>')


TREES = st.one_of(st.builds(_chrome_tree, st.sampled_from(["Google Chrome", "Google Chrome", "Firefox"]),
                            st.lists(st.one_of(ADDRESSES, st.none()), max_size=2)),
                  st.sampled_from(["", "<a><b></a>", '<?xml version="1.0" encoding="UTF-8"?><a/>']))
URL_CONFIGS = [
    {"type": "active_url_from_accessTree"}, {"type": "active_url_from_accessTree", "goto_prefix": "https://www."},
    {"type": "active_url_from_accessTree", "goto_prefix": ""},
    {"type": "active_tab_url_parse", "goto_prefix": "https://www.", "parse_keys": ["q", "tbs"]},
    {"type": "active_tab_url_parse", "goto_prefix": "https://www.",
     "parse_keys": ["list_price_max", "maximum_distance", "zip", "fuel_slugs[]"]},
    {"type": "active_tab_url_parse", "parse_keys": ["q", "zip"], "replace": {"zip": "time"}, "split_list": True},
    {"type": "url_dashPart", "goto_prefix": "https://www.", "partIndex": -1, "needDeleteId": True,
     "returnType": "string"},
    {"type": "url_dashPart", "goto_prefix": "https://www.", "partIndex": -2, "needDeleteId": False,
     "returnType": "json", "key": "time"},
    {"type": "url_dashPart", "partIndex": 5, "returnType": "string"},
    {"type": "url_dashPart", "partIndex": -9, "returnType": "string"},
    {"type": "url_dashPart", "partIndex": "x", "returnType": "string"},
    {"type": "url_dashPart", "partIndex": 3, "returnType": "yaml"},
    {"type": "url_path_parse", "parse_keys": ["mens_clothing", "Men_regular_size_t", "Price_discount_range"]},
    {"type": "macys_product_url_parse", "goto_prefix": "https://www.",
     "parse_keys": ["Sleeve_length", "Price_discount_range", "shirts"]},
]


@pytest.mark.slow
@SETTINGS
@given(tree=TREES)
def test_the_address_bar_is_read_as_osworld_reads_it(vm, osw, tree):
    standin, ctx, env = vm
    standin.desktop.accessibility = tree
    for config in URL_CONFIGS:
        ours, osworld = GETTERS[config["type"]](ctx, config), theirs(getattr(osw, f"get_{config['type']}"), env, config)
        if osworld == CRASH:  # a tree that is no XML, a part the URL lacks: nothing a rule accepts
            assert ours is None, config
        else:
            assert ours == osworld, config


def test_chromium_s_address_bar_stands_for_chrome_s(vm, osw):
    """cua's desktops run Chromium, whose bar OSWorld reads on ARM hosts."""
    standin, ctx, env = vm
    standin.desktop.accessibility = _chrome_tree("Chromium", ["drugs.com/npc/"])
    assert osw.get_active_url_from_accessTree(env, {"goto_prefix": "https://www."}) is None  # OSWorld on x86
    assert GETTERS["active_url_from_accessTree"](ctx, {"goto_prefix": "https://www."}) == "https://www.drugs.com/npc/"
    standin.desktop.accessibility = _chrome_tree("Google Chrome", [None, "drugs.com/npp/"])
    assert GETTERS["active_url_from_accessTree"](ctx, {}) == "https://None"  # OSWorld's quirk, kept


def test_a_task_s_broken_getter_options_raise(vm):
    standin, ctx, env = vm
    standin.desktop.accessibility = _chrome_tree("Google Chrome", ["drugs.com/npc/"])
    for config in ({"type": "active_tab_url_parse"}, {"type": "active_tab_url_parse", "parse_keys": ["q"],
                                                      "replace": {"zip": "time"}},
                   {"type": "url_dashPart", "returnType": "string"},
                   {"type": "url_dashPart", "partIndex": 1, "returnType": "json"},
                   {"type": "cookie_data"}):
        with pytest.raises(Exception) as e:
            GETTERS[config["type"]](ctx, config)
        assert type(e.value).__name__ == "BadTask", config


# -- a real Chromium's profile

class _Page(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<html><head><title>Probe page</title></head><body>hello</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Set-Cookie", "sid=1; Max-Age=3600; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_a_real_chromium_profile_is_read_as_osworld_reads_it(vm, osw):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no chromium on this host")
    standin, ctx, env = vm
    profile = standin.desktop.root / PROFILE
    profile.mkdir(parents=True)
    (profile / "Default").mkdir()
    # a profile name and a font size, as Chrome's settings page writes them; Chrome keeps them
    (profile / "Default/Preferences").write_text(json.dumps({"profile": {"name": "Thomas"},
                                                             "webkit": {"webprefs": {"default_font_size": 20}}}))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://localhost:{server.server_address[1]}/watch?v=youtube"
        done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               f"--user-data-dir={profile}", "--dump-dom", url],
                              capture_output=True, timeout=120, check=False)
    finally:
        server.shutdown()
        server.server_close()
    assert b"hello" in done.stdout, done.stderr[-2000:]
    for name in PREFERENCE_GETTERS:
        assert GETTERS[name](ctx, {}) == getattr(osw, f"get_{name}")(env, {}), name
    assert GETTERS["profile_name"](ctx, {}) == "Thomas"
    history = GETTERS["history"](ctx, {"dest": "history.sqlite"})
    assert history == osw.get_history(env, {"dest": "history.sqlite"})
    assert [row[0] for row in history] == [url]
    assert metrics.check_history_deleted(history, {"type": "keywords", "keywords": ["youtube"]}) == 0.0
    assert metrics.check_history_deleted(history, {"type": "keywords", "keywords": ["amazon"]}) == 1.0
    cookies = GETTERS["cookie_data"](ctx, {"dest": "Cookies"})
    assert cookies == osw.get_cookie_data(env, {"dest": "Cookies"})
    assert [row[1] for row in cookies] == ["localhost"]
    assert metrics.is_cookie_deleted(cookies, {"type": "domains", "domains": ["localhost"]}) == 0.0
    assert metrics.is_cookie_deleted(cookies, {"type": "domains", "domains": [".amazon.com"]}) == 1.0
    assert metrics.check_font_size(GETTERS["chrome_font_size"](ctx, {}), {"type": "value", "value": 20}) == 1.0


# -- OSWorld's real tasks, scored end to end by cua's evaluator

def _tasks_evaluators() -> dict:
    """The evaluators of OSWorld's chrome tasks (evaluation_examples, Apache-2.0) by task id."""
    rule = lambda rules: {"type": "rule", "rules": rules}  # noqa: E731
    return {
        "2ae9ba84": {"func": "exact_match", "result": {"type": "profile_name"},
                     "expected": rule({"expected": "Thomas"})},
        "44ee5668": {"func": "check_history_deleted", "result": {"type": "history", "dest": "history.sqlite"},
                     "expected": rule({"type": "keywords", "keywords": ["youtube"]})},
        "7b6c7e24": {"func": "is_cookie_deleted", "result": {"type": "cookie_data", "dest": "Cookies"},
                     "expected": rule({"type": "domains", "domains": [".amazon.com"]})},
        "35253b65": {"func": "is_shortcut_on_desktop", "result": {"type": "shortcuts_on_desktop"},
                     "expected": rule({"type": "name", "name": "Play Puzzle Game 2048"})},
        "af630914": {"func": "check_font_size", "result": {"type": "chrome_font_size"},
                     "expected": rule({"type": "range", "min": 16, "max": 99999})},
        "3299584d": {"func": "exact_match", "result": {"type": "new_startup_page"},
                     "expected": rule({"expected": "true"})},
        "6766f2b8": {"func": "is_in_list", "result": {"type": "find_unpacked_extension_path"},
                     "expected": rule({"expected": "/home/user/Desktop/helloExtension"})},
        "0d8b7de3": {"func": ["is_expected_active_tab", "is_expected_active_tab"], "conj": "or",
                     "result": [{"type": "active_url_from_accessTree", "goto_prefix": "https://www."}] * 2,
                     "expected": [rule({"type": "url", "url": "https://www.drugs.com/npc/"}),
                                  rule({"type": "url", "url": "https://www.drugs.com/npp/"})]},
    }


def _profile(standin, tmp_path, good: bool) -> None:
    prefs = {"profile": {"name": "Thomas" if good else "Tom"}, "webkit": {"webprefs": {"default_font_size": 20 if good
                                                                                       else 16}},
             "extensions": {"settings": {"aapoc": {"path": "/home/user/Desktop/helloExtension" if good else "x"}}}}
    if not good:
        prefs["session"] = {"restore_on_startup": 4}
    put(standin, f"{PROFILE}/Default/Preferences", json.dumps(prefs).encode())
    visited = [("https://www.amazon.com/", "Amazon", 1)] + ([] if good else [("https://www.youtube.com/", "YT", 2)])
    put(standin, f"{PROFILE}/Default/History", _database(tmp_path / "h.db", "urls", visited, False))
    hosts = [(1, ".google.com", "sid")] + ([] if good else [(2, ".amazon.com", "session-id")])
    put(standin, f"{PROFILE}/Default/Cookies", _database(tmp_path / "c.db", "cookies", hosts, False))
    name = "Play Puzzle Game 2048" if good else "2048"
    put(standin, "home/user/Desktop/2048.desktop", f"[Desktop Entry]\nName={name}\nType=Application\n".encode())
    standin.desktop.accessibility = _chrome_tree("Chromium", ["drugs.com/npp/" if good else "drugs.com/"])


def test_osworlds_chrome_tasks_score_one_when_done_and_zero_when_not(vm, tmp_path):
    from cua_cli.osworld.evaluator import evaluate
    from cua_cli.osworld.setup import SetupContext

    standin, ctx, env = vm
    setup = SetupContext(ctx.desktop, None, ctx.folder)
    for good in (True, False):
        _profile(standin, tmp_path, good)
        for task, evaluator in _tasks_evaluators().items():
            score = evaluate(evaluator, "DONE", setup, ctx.budget, file_tries=1)
            assert score == float(good), (task, good)
