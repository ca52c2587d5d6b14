"""`cua view`, checked the way a person sees it: rendered in real headless Chromium."""

import html
import json
import os
import pathlib
import random
import re

import pytest
from helpers.cli import run_cua
from helpers.servers import ModelStandIn, completion
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from cua_cli.envserver.miniwob_backend import _chrome_paths
from cua_cli.runfolder.jsonl import read_lines


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary, driver = _chrome_paths()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1300,1000",
                f"--user-data-dir={tmp_path_factory.mktemp('profile')}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(driver), options=opts)
    yield d
    d.quit()


def open_page(browser, path):
    browser.get(pathlib.Path(path).as_uri())
    problems = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert problems == [], problems  # no JavaScript errors, no missing files


class LoadedModel(ModelStandIn):
    """A model server answering random clicks, whose /metrics (vLLM's names) say how many requests it is
    serving (running), a queue that grows with the answers given (waiting) and a KV cache filling up."""

    def __init__(self):
        super().__init__()
        self.rng, self.running, self.served = random.Random(5), 0, 0

    def serve(self, handler, method, body):
        if handler.path == "/metrics":
            with self._lock:
                text = (f"vllm:num_requests_running{{model_name=\"m\"}} {self.running}\n"
                        f"vllm:num_requests_waiting{{model_name=\"m\"}} {self.served % 4}\n"
                        f"vllm:kv_cache_usage_perc{{model_name=\"m\"}} {min(1.0, self.served / 40)}\n")
            return self.reply(handler, 200, "text/plain; version=0.0.4", text.encode())
        if handler.path.endswith("/models"):
            return super().serve(handler, method, body)
        with self._lock:
            self.running += 1
            x, y = self.rng.randint(0, 250), self.rng.randint(0, 330)
        try:
            self._stop.wait(0.05)  # a model takes its time: samples see requests running
            self.reply(handler, 200, "application/json",
                       completion(f"Thought: a try.\nAction: click(start_box='({x},{y})')"))
        finally:
            with self._lock:
                self.running -= 1
                self.served += 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A real MiniWoB rollout whose model server is sampled (metrics.jsonl)."""
    work = tmp_path_factory.mktemp("view")
    with LoadedModel() as model:
        (work / "c.yaml").write_text(f"""
run: {{name: viewed, results_dir: results}}
tasks: {{kind: miniwob, miniwob: {{names: [click-test, click-button, focus-text], seeds: [0, 1]}}}}
env: {{url: local, local: {{max_envs: 2}}}}
model: {{provider: openai, endpoints: ["{model.url}/v1"], name: m, image_uuids: false}}
runner: {{num_envs: 2, max_steps: 4, sample_s: 0.1}}
""")
        r = run_cua("rollout", str(work / "c.yaml"))
        assert r.returncode == 0, r.stderr
    (run_dir,) = (work / "results").iterdir()
    return run_dir


def finals(run_dir):
    out = {}
    for rec in map(json.loads, (run_dir / "episodes.jsonl").read_text().splitlines()):
        out[(rec["task_id"], rec["sample"])] = rec
    return out


@pytest.mark.slow  # headless Chromium (selenium) and a real rollout
def test_index_lists_every_pair_filters_and_sorts(browser, run):
    r = run_cua("view", str(run))
    assert r.returncode == 0
    index = pathlib.Path(r.stdout.strip())
    assert index == run / "view" / "index.html"
    open_page(browser, index)
    rows = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
    shown = [row.find_element(By.TAG_NAME, "a").text for row in rows]
    assert sorted(shown) == sorted(t for t, _ in finals(run))
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart rect")) == 2 * 3  # one bar per domain
    Select(browser.find_element(By.ID, "f-outcome")).select_by_value("success")
    outcomes = {row.find_elements(By.TAG_NAME, "td")[3].text
                for row in browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")}
    wins = sum(rec["outcome"] == "success" for rec in finals(run).values())
    assert outcomes <= {"success"} and len(browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")) == wins
    Select(browser.find_element(By.ID, "f-outcome")).select_by_value("")
    browser.find_element(By.CSS_SELECTOR, 'th[data-key="steps"]').click()
    steps = [int(row.find_elements(By.TAG_NAME, "td")[5].text)
             for row in browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")]
    assert steps == sorted(steps)


@pytest.mark.slow  # headless Chromium (selenium) and a real rollout
def test_episode_page_shows_each_step_with_a_marker_where_the_agent_clicked(browser, run):
    open_page(browser, run / "view" / "index.html")
    link = browser.find_element(By.CSS_SELECTOR, "#episodes tbody a")
    task = link.text
    link.click()
    problems = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert problems == []
    rec = finals(run)[(task, 0)]
    steps = [json.loads(line) for line in (run / rec["traj"] / "traj.jsonl").read_text().splitlines()]
    imgs = browser.find_elements(By.CSS_SELECTOR, ".step .shot img")
    assert len(imgs) == rec["steps"] == len(steps)
    assert all(browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i)
               for i in imgs), "every screenshot loads"
    assert rec["instruction"] in browser.find_element(By.TAG_NAME, "main").text
    for img, st in zip(imgs, steps):
        point = [a for a in st["action"] if "x" in a]
        marks = img.find_elements(By.XPATH, "../*[name()='svg']/*[name()='circle' and contains(@class, 'mark')]")
        assert len(marks) == len(point)
        for mark, a in zip(marks, point):
            box, shot = mark.rect, img.rect
            scale = shot["width"] / st["width"]
            cx, cy = box["x"] + box["width"] / 2 - shot["x"], box["y"] + box["height"] / 2 - shot["y"]
            assert abs(cx - a["x"] * scale) < 3 and abs(cy - a["y"] * scale) < 3, "marker sits on the click"
    assert browser.find_element(By.LINK_TEXT, "all episodes")


@pytest.mark.slow  # headless Chromium (selenium) and a real rollout
def test_compare_page_links_into_both_runs(browser, run, tmp_path):
    other = tmp_path / "other"
    # A second run of the same pairs where every result is flipped: all tasks differ.
    other.mkdir()
    (other / "scheduled.jsonl").write_text((run / "scheduled.jsonl").read_text())
    lines = []
    for rec in finals(run).values():
        flipped = 1.0 - rec["score"]
        lines.append(json.dumps(dict(rec, score=flipped, outcome="success" if flipped == 1 else "failure",
                                     traj=None)))
    (other / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    r = run_cua("view", str(run), str(other), "--out", str(tmp_path / "cmp"))
    assert r.returncode == 0, r.stderr
    page = pathlib.Path(r.stdout.strip())
    open_page(browser, page)
    rows = browser.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == len({t for t, _ in finals(run)})
    for a in browser.find_elements(By.CSS_SELECTOR, "tbody a")[:4]:
        href = a.get_attribute("href")
        assert pathlib.Path(browser.execute_script("return decodeURIComponent(arguments[0])", href[7:])).exists()
    # outside the run folder the screenshots were linked in, so the report stands alone
    assert list((tmp_path / "cmp" / "run-0" / "shots").rglob("step_0000.png"))


@pytest.mark.slow  # headless Chromium (selenium) and a real rollout
def test_large_run_in_progress(browser, tmp_path):
    big = tmp_path / "big"
    big.mkdir()
    rng = random.Random(0)
    (big / "scheduled.jsonl").write_text("".join(
        json.dumps({"task_id": f"task-{i:05d}", "domain": f"d{i % 7}", "sample": 0}) + "\n" for i in range(10000)))
    wins = [rng.random() < 0.3 for _ in range(9000)]
    (big / "episodes.jsonl").write_text("".join(
        json.dumps({"task_id": f"task-{i:05d}", "domain": f"d{i % 7}", "sample": 0, "attempt": 0,
                    "outcome": "success" if wins[i] else "failure", "score": float(wins[i]), "reward": None,
                    "steps": rng.randint(1, 15), "stop_reason": "finished", "duration_s": 3.0, "error": None,
                    "traj": None}) + "\n" for i in range(9000)))  # 1,000 pairs still running
    r = run_cua("view", str(big))
    assert r.returncode == 0, r.stderr
    open_page(browser, big / "view" / "index.html")
    assert "10000 of 10000 episodes" in browser.find_element(By.ID, "shown").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")) == 500  # paged
    Select(browser.find_element(By.ID, "f-outcome")).select_by_value("missing")
    assert browser.find_element(By.ID, "shown").text.startswith("1000 of 10000")


@pytest.mark.slow  # headless Chromium (selenium) and a real rollout
def test_timeline_draws_each_attempt_in_its_lane_over_the_model_server_load(browser, run):
    assert run_cua("view", str(run)).returncode == 0
    open_page(browser, run / "view" / "index.html")
    browser.find_element(By.LINK_TEXT, "Timeline").click()
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    lines = read_lines(run / "episodes.jsonl")
    lanes = sorted({r["lane"] for r in lines})
    assert len(lanes) == 2  # runner.num_envs
    shown = browser.find_elements(By.CSS_SELECTOR, "svg.tl-plot g.lane")
    assert sorted(g.get_attribute("data-lane") for g in shown) == lanes
    labels = {t.text: t.rect for t in browser.find_elements(By.CSS_SELECTOR, ".lane-label")}
    assert sorted(labels) == lanes
    plot = browser.find_element(By.CSS_SELECTOR, "svg.tl-plot").rect
    t0 = min(r["started_at"] - r["claim_wait_s"] for r in lines)
    span = max(r["started_at"] + r["duration_s"] for r in lines) - t0
    px = plot["width"] / span
    legend = {k.text: k.find_element(By.TAG_NAME, "rect") for k in browser.find_elements(By.CSS_SELECTOR, ".key")
              if k.find_elements(By.TAG_NAME, "rect")}
    fill = "return getComputedStyle(arguments[0]).fill"
    by_title = {}
    for g in browser.find_elements(By.CSS_SELECTOR, "g.attempt"):
        title = g.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        by_title[title.splitlines()[0]] = (g, title)
    assert len(by_title) == len(lines)
    for r in lines:
        g, title = by_title[f"{r['task_id']} · sample {r['sample']} · attempt {r['attempt']}"]
        assert all(f"{p.removesuffix('_s')} {v:.3f} s" in title for p, v in r["phases"].items())
        bar = g.find_element(By.CSS_SELECTOR, "rect.bar").rect
        assert abs(bar["x"] - plot["x"] - (r["started_at"] - t0) * px) < 1.5, "the bar starts when the attempt did"
        assert abs(bar["width"] - r["duration_s"] * px) < 1.5
        assert g.find_element(By.XPATH, "..").get_attribute("data-lane") == r["lane"]
        label = labels[r["lane"]]  # level with its lane's name
        assert abs(bar["y"] + bar["height"] / 2 - label["y"] - label["height"] / 2) < 3
        (alloc,) = g.find_elements(By.CSS_SELECTOR, "rect.p-allocate")
        assert abs(alloc.rect["x"] - bar["x"]) < 1 and abs(alloc.rect["width"] - r["phases"]["allocate_s"] * px) < 1
        steps = read_lines(run / r["traj"] / "traj.jsonl")
        assert len(g.find_elements(By.CSS_SELECTOR, "rect.p-observe")) == len(steps) == r["steps"]  # in order
        for cls in ("p-allocate", "p-observe", "p-act", "p-evaluate"):
            seg = g.find_element(By.CSS_SELECTOR, f"rect.{cls}")
            assert browser.execute_script(fill, seg) == browser.execute_script(fill, legend[cls[2:]])
    colours = {browser.execute_script(fill, legend[k]) for k in ("allocate", "observe", "model", "act", "evaluate")}
    assert len(colours) == 5
    # Under the lanes, the model server's curves from metrics.jsonl.
    samples = [m for m in read_lines(run / "metrics.jsonl") if m.get("up")]
    assert samples
    (server,) = browser.find_elements(By.CSS_SELECTOR, "g.curves.server")
    assert server.get_attribute("data-server") == samples[0]["server"]
    title = server.find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert f"running: max {max(m['running'] for m in samples):g}" in title
    for cls in ("c-running", "c-waiting", "c-kv"):
        assert server.find_element(By.CSS_SELECTOR, f"path.{cls}").get_attribute("d").count("L") > 1
    assert server.rect["y"] > max(g.rect["y"] + g.rect["height"] for g in shown)
    # Zooming stretches the time axis, and the ticks follow.
    ticks = len(browser.find_elements(By.CSS_SELECTOR, ".tick"))
    Select(browser.find_element(By.ID, "tl-zoom")).select_by_value("4")
    assert abs(browser.find_element(By.CSS_SELECTOR, "svg.tl-plot").rect["width"] - 4 * plot["width"]) < 2
    assert len(browser.find_elements(By.CSS_SELECTOR, ".tick")) > ticks


def files_under(root):
    """Every path under `root`, links listed but not followed."""
    return {pathlib.Path(d, name) for d, dirs, files in os.walk(root) for name in dirs + files}


def test_a_crafted_run_cannot_make_the_report_read_or_write_outside(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "traj.jsonl").write_text(json.dumps({"step": 0, "screenshot": "../secret.txt"}) + "\n")
    run = tmp_path / "runs" / "crafted"
    steps = run / "trajectories" / "t" / "0_0"
    steps.mkdir(parents=True)
    (steps / "ok.png").write_bytes(b"\x89PNG not really")
    (steps / "link.png").symlink_to(secret)
    (run / "trajectories" / "t" / "1_0").symlink_to(outside, target_is_directory=True)
    shots = ["../../secret.txt", "../../../../secret.txt", str(secret), "link.png", ".", None, "ok.png"]
    (steps / "traj.jsonl").write_text("".join(
        json.dumps({"step": i, "screenshot": s, "action": [{"type": "click", "x": 1, "y": 2}], "width": 10,
                    "height": 10}) + "\n" for i, s in enumerate(shots)))
    trajs = {"t": "trajectories/t/0_0", "u": "trajectories/t/1_0", "v": str(outside), "w": "../../outside"}
    (run / "scheduled.jsonl").write_text("".join(
        json.dumps({"task_id": t, "domain": "d", "sample": 0}) + "\n" for t in trajs))
    (run / "episodes.jsonl").write_text("".join(json.dumps(
        {"task_id": t, "domain": "d", "sample": 0, "attempt": 0, "outcome": "failure", "score": 0.0, "reward": 0,
         "steps": 1, "stop_reason": "finished", "duration_s": 1.0, "error": None, "traj": traj}) + "\n"
        for t, traj in trajs.items()))
    out = tmp_path / "report"
    before = files_under(tmp_path)
    r = run_cua("view", str(run), "--out", str(out))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert files_under(tmp_path) - files_under(out) - {out} == before, "nothing written outside the report folder"
    for p in files_under(out):
        assert not p.is_symlink()
        if p.is_file():
            assert not p.samefile(secret) and b"TOP SECRET" not in p.read_bytes()
    shown = []
    for page in (out / "episodes").glob("*.html"):
        for src in re.findall(r'<img src="([^"]+)"', page.read_text()):
            shown.append((page.parent / html.unescape(src)).resolve())
    assert shown == [(out / "shots" / "trajectories" / "t" / "0_0" / "ok.png").resolve()]
    assert f"{steps / 'traj.jsonl'}:1: " in r.stderr and f"{steps / 'traj.jsonl'}:4: " in r.stderr
    # The default report folder is inside the run: a link there must not lead the report out.
    (run / "view").symlink_to(outside, target_is_directory=True)
    before = files_under(tmp_path)
    r = run_cua("view", str(run))
    assert r.returncode == 2 and "Traceback" not in r.stderr and files_under(tmp_path) == before


def test_a_step_a_person_held_or_took_says_so(tmp_path):
    from test_export import RunFolder, step_line

    r = RunFolder(tmp_path, "run")
    held = {"step": 1, "actor": "human", "time": 1.0, "screenshot": "step_0001.png", "response": None,
            "thought": None, "action": [{"type": "takeover", "held_s": 4.2, "ended": "return"}], "commands": [],
            "timings": {"env_s": 0.1}, "width": 41, "height": 30}
    acted = {**held, "step": 3, "response": "Action: click(start_box='(3,4)')", "action": [{"type": "click", "x": 3,
                                                                                           "y": 4}]}  # cua demo's
    r.attempt("helped", 0, "success", steps=4, lines=[json.dumps(step_line(0, actor="agent")), json.dumps(held),
                                                      json.dumps(step_line(2, actor="agent")), json.dumps(acted)])
    run_dir = r.write()
    (run_dir / "scheduled.jsonl").write_text(json.dumps({"task_id": "helped", "domain": "web", "sample": 0}) + "\n")
    result = run_cua("view", str(run_dir), "--out", str(tmp_path / "report"), timeout=120)
    assert result.returncode == 0 and "wrong type" not in result.stderr, result.stderr
    (page,) = (tmp_path / "report" / "episodes").glob("*.html")
    steps = re.findall(r"<h2>Step (\d+)([^<]*)</h2>", page.read_text())
    assert steps == [("0", ""), ("1", " · a person held the desktop"), ("2", ""), ("3", " · a person's action")]
    assert "takeover" in page.read_text()
