"""OSWorld's Chrome on cua's GNOME desktops: Chrome started as OSWorld's image starts it (google-chrome
on its debugging port 1337, published as the desktop's `chromium` port), its tabs set up and read
over CDP by cua's steps and getters as by OSWorld's own; and one of OSWorld's own `chrome` task files
(tests/data/osworld_chrome, unchanged) through a real `cua check-tasks`: its setup writes Chrome's
History over the desktop API (update_browse_history); it scores 0 when nothing is done and 1 once the
YouTube visits are gone, as on OSWorld's image."""

import shutil
import sqlite3
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from helpers.chromium import Chromium, OSWorldEnv, osworld_chrome_getters
from helpers.cli import run_cua
from helpers.desktops import needs_desktops
from helpers.waiting import wait_for

from cua_cli._util.budget import Budget
from cua_cli.envserver.desktop.desktop import LocalDesktop
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.getters import chrome_pages
from cua_cli.osworld.getters.context import EvalContext
from cua_cli.osworld.local_files import Downloads, cache_key
from cua_cli.osworld.setup import EMPTY_HISTORY_URL, SetupContext, run_steps
from cua_cli.runfolder.jsonl import read_lines

pytestmark = [needs_desktops, pytest.mark.slow]
DATA = Path(__file__).parent / "data" / "osworld_chrome"


def empty_history(tmp_path: Path) -> bytes:
    """A History database as Debian's Chromium writes it, emptied: the stand-in for OSWorld's empty one."""
    chromium = Chromium(tmp_path / "profile")
    try:
        urllib.request.urlopen(urllib.request.Request(f"{chromium.url}/json/new?about:blank", method="PUT"),
                               timeout=30).read()
        path = chromium.profile / "Default" / "History"

        def made() -> bool:
            if not path.is_file():
                return False
            db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
            try:
                names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                return {"urls", "visits"} <= names
            except sqlite3.DatabaseError:
                return False
            finally:
                db.close()

        wait_for(made, 60, "Chromium's History and its tables")
    finally:
        chromium.close()
    db = sqlite3.connect(path)
    try:
        db.execute("DELETE FROM visits")
        db.execute("DELETE FROM urls")
        db.commit()
    finally:
        db.close()
    return path.read_bytes()


def test_osworlds_history_task_scores_0_untouched_and_1_when_solved(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    (files / cache_key(EMPTY_HISTORY_URL, "history_empty.sqlite")).write_bytes(empty_history(tmp_path))
    cfg = tmp_path / "chrome.yaml"
    cfg.write_text(f"""
run: {{name: chrome, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/test_all.json, examples_dir: {DATA}/examples}}}}
env:
  kind: osworld
  url: local
  local: {{max_envs: 1}}
  osworld: {{session: gnome, pause_s: 1.0, files_dir: {files}}}
agent: {{kind: osworld}}
runner: {{num_envs: 1, max_steps: 3, step_timeout_s: 300, episode_timeout_s: 900}}
""")
    r = run_cua("check-tasks", str(cfg), "--oracle", str(DATA / "oracle.json"), "--repeat", "1", timeout=2400)
    (folder,) = (tmp_path / "results").glob("chrome-check-*")
    (report,) = read_lines(folder / "report.jsonl")
    assert report["status"] == "ok", (report, r.stderr[-3000:])
    assert (report["oracle"]["scores"], report["noop"]["scores"]) == ([1.0], [0.0]), report
    assert r.returncode == 0


def test_chrome_on_a_desktop_is_set_up_and_read_over_its_published_port(tmp_path):
    # a short folder: the published ports are unix sockets in it (a path of 108 bytes at most), and the
    # host side of one whose path is too long drops every connection
    workdir = Path(tempfile.mkdtemp(prefix="cua-chrome-", dir="/tmp"))
    workdir.chmod(0o711)
    desktop = LocalDesktop(workdir, "127.0.0.1", (1280, 800))
    try:
        wait_for(desktop.screenshot_ready, 300, "the desktop")
        chromium = desktop.published.ports["chromium"]
        api = DesktopAPI(ApiSettings(f"http://127.0.0.1:{desktop.port}",
                                     apps={"chromium": f"http://127.0.0.1:{chromium}"}))
        budget = Budget(step_timeout=120, deadline=time.monotonic() + 900)
        for name in "abc":  # pages on the desktop itself: it has no network
            api.upload(f"~/{name}.html", f"<html><head><title>Page {name}</title></head>"
                                         f"<body><p class='x'>text {name}</p></body></html>".encode(), budget)
        urls = [f"file:///home/user/{name}.html" for name in "abc"]
        setup = SetupContext(api, Downloads(tmp_path / "downloads"), tmp_path)
        run_steps([{"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
                   {"type": "chrome_open_tabs", "parameters": {"urls_to_open": urls}},
                   {"type": "chrome_close_tabs", "parameters": {"urls_to_close": [urls[1]]}}], setup, budget)
        ctx = EvalContext(api, setup.downloads, tmp_path, budget)
        tabs = chrome_pages.get_open_tabs_info(ctx, {"type": "open_tabs_info"})
        assert sorted(tabs, key=str) == [{"title": "Page a", "url": urls[0]}, {"title": "Page c", "url": urls[2]}]
        env = OSWorldEnv(chromium, desktop.port, tmp_path)
        assert tabs == osworld_chrome_getters().get_open_tabs_info(env, {})
        # the last tab opened is the active one; Chromium's address bar shows a file's path without file://
        config = {"type": "active_tab_html_parse", "goto_prefix": "file://", "category": "class",
                  "class_singleObject": {"x": "text"}}
        assert chrome_pages.get_active_tab_html_parse(ctx, config) == {"text": "text c"}
        info = chrome_pages.get_active_tab_info(ctx, {"type": "active_tab_info", "goto_prefix": "file://"})
        assert info["title"] == "Page c" and "text c" in info["content"]
    finally:
        desktop.close()
        shutil.rmtree(workdir, ignore_errors=True)
