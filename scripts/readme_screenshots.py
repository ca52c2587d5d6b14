#!/usr/bin/env python3
"""Makes the README's pictures of `cua view`: a real rollout, its report, and
headless Chromium screenshots of the index and of one episode page.

    .venv/bin/python scripts/readme_screenshots.py
"""

import pathlib
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cua_cli.envserver.miniwob_backend import _chrome_paths  # noqa: E402


def main():
    work = pathlib.Path(tempfile.mkdtemp(prefix="cua-shots-"))
    (work / "c.yaml").write_text("""
run: {name: demo, results_dir: results}
tasks: {kind: miniwob, miniwob: {names: [click-test, click-button, click-test-2, focus-text], seeds: [0, 1, 2]}}
env: {url: local, local: {max_envs: 2}}
model: {provider: random, seed: 0}
runner: {num_envs: 2, max_steps: 4}
""")
    cua = str(ROOT / ".venv/bin/cua")
    subprocess.run([cua, "rollout", str(work / "c.yaml")], check=True, capture_output=True)
    (run,) = (work / "results").iterdir()
    index = pathlib.Path(subprocess.run([cua, "view", str(run)], check=True, capture_output=True,
                                        text=True).stdout.strip())
    binary, driver = _chrome_paths()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,900", "--hide-scrollbars",
                f"--user-data-dir={work / 'profile'}"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        d.get(index.as_uri())
        time.sleep(0.3)
        d.save_screenshot(str(ROOT / "docs/view-index.png"))
        # an episode with several steps makes the better picture
        rows = d.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
        best = max(rows, key=lambda r: int(r.find_elements(By.TAG_NAME, "td")[5].text or 0))
        best.find_element(By.TAG_NAME, "a").click()
        time.sleep(0.3)
        d.set_window_size(1200, 1250)
        d.save_screenshot(str(ROOT / "docs/view-episode.png"))
    finally:
        d.quit()
    print("wrote docs/view-index.png and docs/view-episode.png")


if __name__ == "__main__":
    main()
