"""`cua watch` on a real rollout: `cua rollout` plays an OSWorld task on cua's own desktop (openbox,
Xvfb in its namespaces), `cua watch --no-browser` serves the episode's page, and a real headless
Chromium shows its screen through noVNC. The page's canvas turns red when the agent's action turns
the desktop red; x11vnc runs only while the page is open. Then a person takes the episode over on
the page: the agent pauses, the person's keys reach the desktop through the page, the agent plays
on when it is given back, and the record says who acted. The page says when the episode has ended."""

import io
import json
import shutil
import signal
import threading

import psutil
import pytest
from helpers import desktops
from helpers.chromium import selenium_browser
from helpers.cli import ROOT, finish, start_cua
from helpers.processes import kill_group, signal_group
from helpers.waiting import wait_for
from PIL import Image
from selenium.webdriver import ActionChains

pytestmark = [desktops.needs_desktops, pytest.mark.slow]

DATA = ROOT / "tests/data/osworld"
TASK = "cua-os-move-notes"


def _until_flag(name: str, then: str = "") -> str:
    """An action of the scripted agent: wait for the test's flag file in the desktop's home, then `then`."""
    return ("```python\nimport os, subprocess, time\n"
            f"for _ in range(400):\n    if os.path.exists(os.path.expanduser('~/{name}')): break\n"
            f"    time.sleep(0.1)\n{then}\n```")


def _typed(browser, api) -> str | None:
    """Type a line into the focused xterm through the page (once), then read what it wrote."""
    if not getattr(browser, "typed", False):
        ActionChains(browser).send_keys("typed by a person\n").perform()  # to the canvas, clicked last
        browser.typed = True
    return desktops.run(api, "cat ~/typed 2>/dev/null", shell=True).get("output", "").strip()


def _x11vncs() -> list[int]:
    return [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "x11vnc"]


PIXEL = """const c = document.querySelector('#screen canvas');
if (!c || !c.width) return null;
const p = c.getContext('2d').getImageData(arguments[0], arguments[1], 1, 1).data;
return p[3] ? Array.from(p.slice(0, 3)) : null;"""
BACKGROUND = (1500, 900)  # a pixel of the bare root window: the xterm sits in the top left corner
# The person's window: what they type in it, once they hold the desktop, lands in ~/typed.
XTERM = ("subprocess.Popen(['xterm', '-geometry', '60x5+0+0', '-e', 'sh', '-c', 'read l; echo \"$l\" > ~/typed'], "
         "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
         "subprocess.run(['xsetroot', '-solid', 'red'])")


def test_a_running_episode_is_watched_live_in_chromium(tmp_path):
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian's chromium and chromium-driver are not installed (scripts/setup_env.sh installs them)")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({TASK: [_until_flag("go1", XTERM), _until_flag("go2"), _until_flag("go3"),
                                         "DONE"]}))
    cfg = tmp_path / "watched.yaml"
    cfg.write_text(f"""
run: {{name: watched, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/evaluation_examples/test_all.json,
                                  examples_dir: {DATA}/evaluation_examples/examples, ids: [{TASK}]}}}}
env: {{kind: osworld, url: local, local: {{max_envs: 1}}, osworld: {{session: openbox, pause_s: 0.1,
                                                                   files_dir: {DATA}/cache}}}}
model: {{provider: script, script: {script}}}
agent: {{kind: osworld}}
runner: {{num_envs: 1, max_steps: 5, step_timeout_s: 90, episode_timeout_s: 300}}
""")
    rollout = start_cua("rollout", str(cfg))
    watch = browser = None
    try:
        wait_for(lambda: list((tmp_path / "results").glob("watched-*/screens.sock")), 180, "the rollout's relay")
        (run,) = (tmp_path / "results").iterdir()
        wait_for(lambda: (run / "leases.jsonl").exists(), 180, "the desktop's lease")
        api = json.loads((run / "leases.jsonl").read_text().splitlines()[0])["api"]

        watch = start_cua("watch", str(run), TASK, "--no-browser")
        lines = []
        threading.Thread(target=lambda: lines.append(watch.stdout.readline()), daemon=True).start()
        wait_for(lambda: lines, 60, "cua watch's URL")
        url = lines[0].split(": ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:") and "/e/" in url, lines
        assert _x11vncs() == []  # nobody watches yet: no VNC server runs

        browser = selenium_browser(tmp_path / "chrome", "1200,800")
        browser.get(url)
        status = lambda: browser.find_element("id", "status").text  # noqa: E731
        wait_for(lambda: status() == "live, view only", 60, "the page's screen to connect")
        wait_for(lambda: browser.execute_script(PIXEL, *BACKGROUND) is not None, 60, "the screen's first frame")
        assert len(_x11vncs()) == 1
        assert browser.execute_script(PIXEL, *BACKGROUND) != [255, 0, 0]
        assert browser.find_element("id", "instruction").text  # the task's instruction, from its claim

        desktops.run(api, "touch ~/go1", shell=True)  # the agent's action turns the desktop red
        wait_for(lambda: browser.execute_script(PIXEL, *BACKGROUND) == [255, 0, 0], 60, "the red screen on the page")
        _, _, png = desktops.request(api + "/screenshot")
        assert Image.open(io.BytesIO(png)).convert("RGB").getpixel(BACKGROUND) == (255, 0, 0)  # as the desktop has it
        wait_for(lambda: browser.find_element("id", "steps").text == "1", 60, "the first step on the page")

        # A person takes over while the agent's second action runs: the agent lets go after it.
        browser.find_element("id", "hold").click()
        wait_for(lambda: status() == "taking over: waiting for the agent to end its step", 60, "the hold to wait")
        desktops.run(api, "touch ~/go2", shell=True)
        wait_for(lambda: status().startswith("yours"), 60, "the desktop's keys on the page")
        canvas = browser.find_element("css selector", "#screen canvas")
        ActionChains(browser).move_to_element_with_offset(canvas, -canvas.size["width"] // 2 + 30,
                                                          -canvas.size["height"] // 2 + 25).click().perform()
        wait_for(lambda: _typed(browser, api) == "typed by a person", 60, "the person's keys in the desktop")
        traj = run / "trajectories" / TASK / "0_0" / "traj.jsonl"
        assert len(traj.read_text().splitlines()) == 2  # the model was not asked while the person held it
        browser.find_element("id", "return").click()
        wait_for(lambda: status() == "live, view only", 60, "the page to give the desktop back")

        # The agent plays on; taken over again, the episode is abandoned: unscored, and not tried again.
        wait_for(lambda: len(traj.read_text().splitlines()) == 3, 60, "the human step's line")
        browser.find_element("id", "hold").click()
        desktops.run(api, "touch ~/go3", shell=True)
        wait_for(lambda: status().startswith("yours"), 60, "the desktop's keys on the page again")
        browser.find_element("id", "abandon").click()
        out, err = finish(rollout, 300)
        assert rollout.returncode == 0, err[-3000:]
        steps = [json.loads(line) for line in traj.read_text().splitlines()]
        assert [st["actor"] for st in steps] == ["agent", "agent", "human", "agent", "human"]
        held = [st["action"] for st in steps if st["actor"] == "human"]
        assert [(a["type"], a["ended"]) for (a,) in held] == [("takeover", "return"), ("takeover", "abandon")]
        assert steps[2]["screenshot"] and steps[2]["response"] is None and "go3" in steps[3]["response"]
        (episode,) = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
        assert episode["stop_reason"] == "abandoned" and episode["outcome"] == "error"
        assert episode["human_steps"] == 2 and episode["held_s"] > 0
        assert len(list((run / "queue" / "failed").iterdir())) == 1  # given up on, not queued again
        wait_for(lambda: status() == "the episode has ended", 60, "the page to say the episode ended")
        assert not (run / "screens.sock").exists()
        browser.quit()
        browser = None
        wait_for(lambda: _x11vncs() == [], 60, "x11vnc to end with the desktop")
        signal_group(watch, signal.SIGINT)
        _, err = finish(watch, 60)
        assert watch.returncode == 0 and "Traceback" not in err, err
    finally:
        if browser is not None:
            browser.quit()
        for p in (watch, rollout):
            if p is not None:
                kill_group(p)
