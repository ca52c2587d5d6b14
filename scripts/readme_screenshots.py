#!/usr/bin/env python3
"""Makes the README's pictures of `cua view`: a real rollout, its report, and
headless Chromium screenshots of the index, of one episode page and of the timeline.

    .venv/bin/python scripts/readme_screenshots.py
    .venv/bin/python scripts/readme_screenshots.py --fleet fleet.json --only timeline

With --fleet the rollout goes through running model servers (e.g. the tiny
random Qwen2-VL served by vLLM on the CPU, as tests/test_fleet_e2e.py starts
it), so the timeline has their load under the lanes.
"""

import argparse
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

PAGES = ("index", "episode", "timeline")
MODEL = {"random": "{provider: random, seed: 0}",
         "fleet": "{provider: openai, guided: true, max_tokens: 128, retries: 1, timeout_s: 60}"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleet", help="a fleet file: roll out through its model servers (default: the random model)")
    ap.add_argument("--only", choices=PAGES, action="append", help="make only this picture (repeatable)")
    args = ap.parse_args()
    pages = args.only or PAGES
    work = pathlib.Path(tempfile.mkdtemp(prefix="cua-shots-"))
    (work / "c.yaml").write_text(f"""
run: {{name: demo, results_dir: results}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test, click-button, click-test-2, focus-text], seeds: [0, 1, 2]}}}}
env: {{url: local, local: {{max_envs: 2}}}}
model: {MODEL["fleet" if args.fleet else "random"]}
runner: {{num_envs: 2, max_steps: 4}}
""")
    cua = str(ROOT / ".venv/bin/cua")
    fleet = ["--fleet", args.fleet] if args.fleet else []
    subprocess.run([cua, "rollout", str(work / "c.yaml"), *fleet], check=True, capture_output=True)
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
        if "index" in pages:
            d.save_screenshot(str(ROOT / "docs/view-index.png"))
        if "episode" in pages:
            # an episode with several steps makes the better picture
            rows = d.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
            best = max(rows, key=lambda r: int(r.find_elements(By.TAG_NAME, "td")[5].text or 0))
            best.find_element(By.TAG_NAME, "a").click()
            time.sleep(0.3)
            d.set_window_size(1200, 1250)
            d.save_screenshot(str(ROOT / "docs/view-episode.png"))
        if "timeline" in pages:
            d.set_window_size(1200, 900)
            d.get((index.parent / "timeline.html").as_uri())
            time.sleep(0.3)
            box = d.find_element(By.ID, "timeline").rect  # the page down to the bottom of the plot
            frame = 900 - d.execute_script("return innerHeight")  # the window's size counts its frame
            d.set_window_size(1200, int(box["y"] + box["height"]) + 24 + frame)
            d.save_screenshot(str(ROOT / "docs/view-timeline.png"))
    finally:
        d.quit()
    print("wrote " + ", ".join(f"docs/view-{p}.png" for p in pages))


if __name__ == "__main__":
    main()
