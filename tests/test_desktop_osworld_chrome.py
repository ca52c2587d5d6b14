"""One of OSWorld's own `chrome` task files (tests/data/osworld_chrome, unchanged) on cua's GNOME
desktops through a real `cua check-tasks`: its setup writes Chrome's History over the desktop API
(update_browse_history) and starts Chrome as OSWorld's image does (google-chrome on its debugging
port); it scores 0 when nothing is done and 1 once the YouTube visits are gone, as on OSWorld's
image."""

import sqlite3
import urllib.request
from pathlib import Path

import pytest
from helpers.chromium import Chromium
from helpers.cli import run_cua
from helpers.desktops import needs_desktops
from helpers.waiting import wait_for

from cua_cli.osworld.local_files import cache_key
from cua_cli.osworld.setup import EMPTY_HISTORY_URL
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
