"""`cua demo` end to end: a scripted person in a real headless Chromium (Selenium's keys and clicks
on the page, which noVNC passes to the desktop as a person's would) solves OSWorld's own `os` task
e0df059f (rename a folder; tests/data/osworld_os, unchanged) on cua's GNOME desktop: Ctrl+Alt+T, a
click into the terminal, a command typed with a typo taken back, then "done" on the page. The run
folder holds the steps as the desktop saw them, each with the screen before it, in UI-TARS' calls
and in pyautogui code; the evaluator scored it 1; `cua export --format sft` and `cua view` read
it; and the recorded answers, replayed through `model.provider: script` on a fresh desktop, score
1 again."""

import json
import shutil
import threading

import pytest
from helpers import desktops
from helpers.chromium import selenium_browser
from helpers.cli import ROOT, finish, run_cua, start_cua
from helpers.processes import kill_group
from helpers.waiting import wait_for
from selenium.webdriver import ActionChains, Keys

pytestmark = [desktops.needs_desktops, pytest.mark.slow]

DATA = ROOT / "tests/data/osworld_os"
TASK = "e0df059f-28a6-4169-924f-b9623e7184cc"
PIXEL = "const c = document.querySelector('#screen canvas'); return !!(c && c.width);"


def _config(tmp_path, name: str, extra: str = "") -> str:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(f"""
run: {{name: {name}, results_dir: {tmp_path}/{name}}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/test_all.json, examples_dir: {DATA}/examples, ids: [{TASK}]}}}}
env: {{kind: osworld, url: local, local: {{max_envs: 1}}, osworld: {{session: gnome, pause_s: 3.0}}}}
agent: {{kind: uitars, coord_mode: qwen25vl}}
runner: {{num_envs: 1, max_steps: 8, step_timeout_s: 120, episode_timeout_s: 900}}
{extra}""")
    return str(cfg)


def _window(api, title: str):
    """(x, y, width, height) of the desktop's first window whose title has `title`, or None."""
    for line in desktops.run(api, ["wmctrl", "-lG"])["output"].splitlines():
        parts = line.split(None, 7)
        if len(parts) == 8 and title in parts[7]:
            return tuple(int(v) for v in parts[2:6])
    return None


def _recorded(run) -> list[str]:
    """The answers of the steps recorded so far."""
    return [json.loads(line)["response"] for t in run.glob("trajectories/*/*/traj.jsonl")
            for line in t.read_text().splitlines()]


def _click_at(browser, x: int, y: int) -> None:
    """Click the page's canvas where the desktop's (x, y) is shown (the canvas is scaled to fit)."""
    canvas = browser.find_element("css selector", "#screen canvas")
    sx, sy = canvas.size["width"] / 1920, canvas.size["height"] / 1080
    ActionChains(browser).move_to_element_with_offset(canvas, round((x - 960) * sx), round((y - 540) * sy)) \
        .click().perform()


def test_a_person_demonstrates_a_task_and_the_replay_scores_it_again(tmp_path):
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("Debian's chromium and chromium-driver are not installed (scripts/setup_env.sh installs them)")
    demo = start_cua("demo", _config(tmp_path, "demo"), "--task", TASK, "--no-browser")
    browser = None
    try:
        lines = []

        def read():
            for line in demo.stdout:
                lines.append(line)
        threading.Thread(target=read, daemon=True).start()
        wait_for(lambda: any("the desktop is yours: " in x for x in lines), 600, "the demonstration's page")
        url = next(x for x in lines if "the desktop is yours: " in x).split(": ", 1)[1].strip()
        (run,) = (tmp_path / "demo").iterdir()
        api = json.loads((run / "leases.jsonl").read_text().splitlines()[0])["api"]

        browser = selenium_browser(tmp_path / "chrome", "1400,900")
        browser.get(url)
        status = lambda: browser.find_element("id", "status").text  # noqa: E731
        wait_for(lambda: status().startswith("yours"), 120, "the desktop's keys on the page")
        wait_for(lambda: browser.execute_script(PIXEL), 60, "the screen's first frame")
        assert browser.find_element("id", "hold").is_displayed() is False  # nothing to take over or give back
        assert browser.find_element("id", "return").is_displayed() is False
        assert "todo_list_Jan_1" in browser.find_element("id", "instruction").text  # the task's, from its claim

        # The person: a terminal, a click into it, a command with a typo taken back, Enter.
        _click_at(browser, 1500, 900)  # the page has the keyboard now; GNOME's empty desktop
        ActionChains(browser).key_down(Keys.CONTROL).key_down(Keys.ALT).send_keys("t").key_up(Keys.ALT) \
            .key_up(Keys.CONTROL).perform()
        wait_for(lambda: "Action: hotkey(key='ctrl alt t')" in _recorded(run), 60, "the desktop to record Ctrl+Alt+T")
        wait_for(lambda: _window(api, "Terminal"), 120, "the terminal Ctrl+Alt+T opens")
        x, y, w, h = _window(api, "Terminal")
        _click_at(browser, x + w // 2, y + h // 2)
        ActionChains(browser).send_keys("mv ~/Desktop/todo_list_Jan_1x", Keys.BACKSPACE,
                                        " ~/Desktop/todo_list_Jan_2\n").perform()
        wait_for(lambda: desktops.run(api, "test -d ~/Desktop/todo_list_Jan_2", shell=True)["returncode"] == 0,
                 60, "the folder renamed")
        browser.find_element("id", "finished").click()
        out, err = finish(demo, 300)
        assert demo.returncode == 0, out + err[-3000:]
        assert "Traceback" not in err, err
        wait_for(lambda: status() == "the episode has ended", 60, "the page to say the demonstration ended")
    finally:
        if browser is not None:
            browser.quit()
        kill_group(demo)

    (episode,) = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    assert (episode["outcome"], episode["score"], episode["stop_reason"]) == ("success", 1.0, "human_finished")
    assert episode["demo"] is True and episode["human_steps"] == episode["steps"]
    traj = run / episode["traj"]
    steps = [json.loads(x) for x in (traj / "traj.jsonl").read_text().splitlines()]
    assert all(s["actor"] == "human" and (traj / s["screenshot"]).is_file() for s in steps)
    kinds = [(a["type"], a.get("keys") or a.get("text")) for s in steps for a in s["action"]]
    assert kinds == [("click", None), ("hotkey", ["ctrl", "alt", "t"]), ("click", None),
                     ("type", "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2\n"), ("finished", "")], kinds
    # the first click gave the page the keyboard: the desktop got it too, and it is recorded
    hotkey, click, typed = steps[1], steps[-3], steps[-2]
    assert hotkey["response"] == "Action: hotkey(key='ctrl alt t')"
    assert hotkey["commands"] == ["pyautogui.hotkey('ctrl', 'alt', 't')"]
    assert typed["commands"] == ["pyautogui.write('mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2')\n"
                                 "pyautogui.press('enter')"]
    assert abs(click["action"][0]["x"] - (x + w // 2)) <= 3 and abs(click["action"][0]["y"] - (y + h // 2)) <= 3
    assert click["screenshot"] != hotkey["screenshot"]  # the screen with the terminal, as the click found it
    assert steps[-1]["commands"] == ["DONE"]
    assert steps[-1]["prompt"][-1]["content"] == [{"type": "image_file", "file": steps[-1]["screenshot"]}]

    sft = tmp_path / "sft.jsonl"
    r = run_cua("export", str(run), "--format", "sft", "--out", str(sft))
    assert r.returncode == 0, r.stderr
    (conversation,) = [json.loads(x) for x in sft.read_text().splitlines()]
    answers = [m["content"] for m in conversation["messages"] if m["role"] == "assistant"]
    assert answers == [s["response"] for s in steps]
    r = run_cua("view", str(run), "--out", str(tmp_path / "view"))
    (page,) = (tmp_path / "view" / "episodes").glob("*.html")
    assert r.returncode == 0 and "ctrl alt t" in page.read_text() and "a person's action" in page.read_text()

    script = tmp_path / "script.json"
    script.write_text(json.dumps({TASK: [s["response"] for s in steps]}))
    r = run_cua("rollout", _config(tmp_path, "replay", f"model: {{provider: script, script: {script}}}"),
                timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    (replayed,) = [json.loads(x) for x in next((tmp_path / "replay").iterdir()).joinpath("episodes.jsonl")
                   .read_text().splitlines()]
    assert (replayed["score"], replayed["stop_reason"], replayed["steps"]) == (1.0, "finished", len(steps)), replayed
