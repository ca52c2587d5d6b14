"""OSWorld-format tasks of the `os` domain (tests/data/osworld: a file moved, a gsettings key, a
process killed, a terminal read, an infeasible task) played by `cua rollout` on real desktops
(`env.url: local`: cua's own desktop server, Xvfb sessions in their own namespaces), scored by
OSWorld's evaluator rules on the client. The subject is the rollout on real desktops, not GNOME: they run
the lighter openbox session, which starts in a fraction of GNOME's time on this 2-core host (GNOME's own
behaviours: test_desktop_gnome.py, test_desktop_osworld_os.py)."""

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from helpers import desktops
from helpers.cli import ROOT, finish, kill_group, run_cua, start_cua
from helpers.faultproxy import FaultProxy
from helpers.net import free_port
from helpers.waiting import wait_for

from cua_cli._util.httpclient import Client

pytestmark = pytest.mark.slow

DATA = ROOT / "tests/data/osworld"
TASKS = sorted(json.loads((DATA / "evaluation_examples/test_all.json").read_text())["os"])


def _config(tmp_path: Path, script: Path, name: str, max_envs: int = 2, timeout_s: int = 120,
            record: bool = False) -> Path:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(f"""
run: {{name: {name}, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/evaluation_examples/test_all.json,
                                  examples_dir: {DATA}/evaluation_examples/examples}}}}
env: {{kind: osworld, url: local, local: {{max_envs: {max_envs}}},
      osworld: {{session: openbox, pause_s: 0.3, files_dir: {DATA}/cache, record: {str(record).lower()}}}}}
model: {{provider: script, script: {script}}}
agent: {{kind: osworld}}
runner: {{num_envs: {max_envs}, max_steps: 4, step_timeout_s: 60, episode_timeout_s: {timeout_s}}}
""")
    return cfg


def _finals(run: Path) -> dict:
    lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    return {r["task_id"]: r for r in lines}


def _xvfbs() -> set:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "Xvfb"}


def test_oracle_scores_every_task_and_doing_nothing_scores_none(tmp_path):
    before = _xvfbs()
    oracle = run_cua("rollout", str(_config(tmp_path, DATA / "oracle.json", "oracle", record=True)), timeout=600)
    assert oracle.returncode == 0, oracle.stderr[-3000:]
    run = next((tmp_path / "results").glob("oracle-*"))
    finals = _finals(run)
    assert set(finals) == set(TASKS)
    assert {t: r["outcome"] for t, r in finals.items()} == {t: "success" for t in TASKS}
    assert finals["cua-os-infeasible-firmware"]["stop_reason"] == "fail"  # FAIL is what an infeasible task wants
    # the run says whose evaluator code its scores follow: the version the reference tests check against
    assert json.loads((run / "run.json").read_text())["scored_as"] == "OSWorld desktop-env 1.0.2"
    held = run_cua("envs", "list", str(run))
    assert held.returncode == 0 and "no env is held" in held.stdout
    # env.osworld.record: each episode's video is in its folder, and cua view plays it on the episode's page
    for r in finals.values():
        assert desktops.video_seconds(run / r["traj"] / "episode.mp4") > 0
    view = run_cua("view", str(run), "--out", str(tmp_path / "report"))
    assert view.returncode == 0, view.stderr
    page = next((tmp_path / "report" / "episodes").glob("cua-os-move-notes*.html")).read_text()
    (src,) = re.findall(r'<video class="episode" controls preload="metadata" src="([^"]+)"', page)
    assert (tmp_path / "report" / "episodes" / src).resolve().read_bytes()[4:8] == b"ftyp"  # copied beside it

    # DONE at once: nothing was done, so nothing scores (the infeasible task wanted FAIL, not DONE).
    noop = tmp_path / "noop.json"
    noop.write_text(json.dumps({t: ["```DONE```"] for t in TASKS}))
    result = run_cua("rollout", str(_config(tmp_path, noop, "noop")), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    finals = _finals(next((tmp_path / "results").glob("noop-*")))
    assert {t: (r["outcome"], r["score"]) for t, r in finals.items()} == {t: ("failure", 0.0) for t in TASKS}
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="every desktop of the two runs is gone")


def test_kill_9_mid_episode_then_gc_and_resume_plays_each_pair_once(tmp_path):
    before = _xvfbs()
    slow = tmp_path / "slow.json"  # each task waits a while before its oracle answers: the kill lands mid-episode
    oracle = json.loads((DATA / "oracle.json").read_text())
    slow.write_text(json.dumps({t: ["```python\ntime.sleep(3)\n```"] * 2 + oracle[t] for t in TASKS}))
    cfg = _config(tmp_path, slow, "killed", max_envs=1)
    p = start_cua("rollout", str(cfg), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        leases = lambda: list((tmp_path / "results").glob("killed-*/leases.jsonl"))  # noqa: E731
        wait_for(lambda: leases() and '"held"' in leases()[0].read_text(), timeout=120, what="a desktop is held")
        os.kill(p.pid, signal.SIGKILL)  # the rollout alone: its env server sees its parent go
        p.wait()
    finally:
        kill_group(p)
    run = leases()[0].parent
    gc = run_cua("envs", "gc", str(run))
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert "no env is held" in run_cua("envs", "list", str(run)).stdout
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="the killed run's desktops are gone")

    resumed = run_cua("rollout", str(_config(tmp_path, DATA / "oracle.json", "killed", max_envs=2)),
                      "--resume", str(run), timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    finals = {}
    for r in lines:
        # the killed run's episode ends interrupted, or as an env error once its desktop went with the run
        assert r["outcome"] != "error" or r["stop_reason"] in ("interrupted", "env_error"), r
        finals[r["task_id"]] = r
    assert {t: finals[t]["outcome"] for t in TASKS} == {t: "success" for t in TASKS}
    attempts = [(r["task_id"], r["sample"], r["attempt"]) for r in lines]
    assert len(attempts) == len(set(attempts))  # no attempt played twice
    assert "no env is held" in run_cua("envs", "list", str(run)).stdout
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="every desktop is gone")


def test_a_fixed_list_of_running_desktops_is_served_one_episode_at_a_time(tmp_path):
    """env.osworld.desktops: desktops someone else started (here one of cua's own, allocated by hand),
    each reset by the list's command before every episode."""
    token = "list-test-token"
    server = start_cua("env-server", "--backend", "desktop", "--port", "0", "--max-envs", "1",
                       "--session", "openbox",
                       env={"CUA_ENV_TOKEN": token}, cwd=ROOT)
    try:
        url = server.stdout.readline().split()[-1]  # "cua env-server (desktops) listening on URL"
        started = Client(token).post(f"{url}/start_emulator", 60, json={}).json()["data"]
        desktop = f"http://127.0.0.1:{started['server_port']}"
        cfg = _config(tmp_path, DATA / "oracle.json", "listed")
        text = cfg.read_text().replace("env: {kind: osworld, url: local, local: {max_envs: 2},",
                                       "env: {kind: osworld,")
        listed = text.replace("osworld: {session: openbox, pause_s: 0.3,",  # the server chose the session
                              f'osworld: {{desktops: ["{desktop}"], reset: [bash, -c, "rm -f ~/Documents/notes.txt"],'
                              " pause_s: 0.3,")
        assert listed != text
        cfg.write_text(listed)
        result = run_cua("rollout", str(cfg), timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        finals = _finals(next((tmp_path / "results").glob("listed-*")))
        assert {t: r["outcome"] for t, r in finals.items()} == {t: "success" for t in TASKS}
    finally:
        kill_group(server, signal.SIGTERM)
        server.wait(60)


def _task_file(folder: Path, task_id: str, config: list, evaluator: dict) -> None:
    """One OSWorld-format task file, in the `os` domain's folder."""
    (folder / "os").mkdir(parents=True, exist_ok=True)
    (folder / "os" / f"{task_id}.json").write_text(json.dumps({
        "id": task_id, "snapshot": "os", "instruction": f"Task {task_id}.", "source": "cua tests", "config": config,
        "related_apps": ["os"], "evaluator": evaluator}))


def _steps(run: Path) -> list[dict]:
    (line,) = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    return [json.loads(x) for x in (run / line["traj"] / "traj.jsonl").read_text().splitlines()]


def test_tree_observations_carry_a_real_apps_tree_and_the_screenshot_default_fetches_none(tmp_path):
    """agent.observation a11y_tree: each step's tree (gnome-terminal's, read through AT-SPI) is in the run
    folder beside its screenshot and in the prompt as OSWorld's table; the default never asks for one.
    A proxy in front of the desktop sees every request."""
    tasks = tmp_path / "tasks"
    launch = ["gnome-terminal", "--", "bash", "-c", "echo cua-a11y-$((6*7)); exec bash"]
    _task_file(tasks, "cua-a11y-terminal", [{"type": "launch", "parameters": {"command": launch}},
                                            {"type": "sleep", "parameters": {"seconds": 2}}],
               {"func": "infeasible"})
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"cua-a11y-terminal": ["```WAIT```", "```DONE```"]}))
    token = "observation-test-token"
    server = start_cua("env-server", "--backend", "desktop", "--port", "0", "--max-envs", "1",
                       "--session", "openbox",
                       env={"CUA_ENV_TOKEN": token}, cwd=ROOT)
    try:
        url = server.stdout.readline().split()[-1]  # "cua env-server (desktops) listening on URL"
        started = Client(token).post(f"{url}/start_emulator", 60, json={}).json()["data"]
        paths = []
        with FaultProxy(f"http://127.0.0.1:{started['server_port']}",
                        lambda method, path, body: paths.append(path) or "pass") as proxy:
            for observation in ("screenshot", "a11y_tree"):
                paths.clear()
                cfg = tmp_path / f"{observation}.yaml"
                cfg.write_text(f"""
run: {{name: {observation}, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {tasks}}}}}
env: {{kind: osworld, osworld: {{desktops: ["{proxy.url}"], pause_s: 0.3}}}}
model: {{provider: script, script: {answers}, record_prompt: true}}
agent: {{kind: osworld, observation: {observation}}}
runner: {{num_envs: 1, max_steps: 4, step_timeout_s: 60, episode_timeout_s: 120}}
""")
                result = run_cua("rollout", str(cfg), timeout=300)
                assert result.returncode == 0, result.stderr[-3000:]
                run = next((tmp_path / "results").glob(f"{observation}-*"))
                steps = _steps(run)
                assert len(steps) == 2 and paths.count("/screenshot") >= 2
                folder = run / "trajectories" / "cua-a11y-terminal" / "0_0"
                if observation == "screenshot":
                    assert "/accessibility" not in paths and not any("a11y_tree" in s for s in steps)
                    assert not list(folder.glob("*.xml"))
                    continue
                assert paths.count("/accessibility") == 2
                for n, s in enumerate(steps):
                    assert s["a11y_tree"] == f"step_{n:04d}_a11y.xml" and s["screenshot"] == f"step_{n:04d}.png"
                    assert "cua-a11y-42" in (folder / s["a11y_tree"]).read_text()  # the real terminal's text
                    shown = s["prompt"][-1]["content"]
                    assert [p["type"] for p in shown] == ["text"]  # the table, and no screenshot
                    assert 'terminal\tTerminal\t"cua-a11y-42\n' in shown[0]["text"]
    finally:
        kill_group(server, signal.SIGTERM)
        server.wait(60)


def _freeze(api: str) -> int:
    """Stop every process of the desktop behind `api` (SIGSTOP: a VM that hangs), found by the host uids its
    user namespace maps (the desktop tells them itself); how many were stopped."""
    base = int(desktops.run(api, ["cat", "/proc/self/uid_map"])["output"].split()[1])
    stopped = set()
    while True:  # a process forked while we stop the others is caught on the next pass
        found = {p for p in psutil.process_iter(["uids", "status"])
                 if base <= p.info["uids"].real < base + 65536 and p.info["status"] != psutil.STATUS_STOPPED}
        if not found:
            return len(stopped)
        for p in found:
            try:
                p.suspend()
                stopped.add(p.pid)
            except psutil.NoSuchProcess:
                pass


def test_infrastructure_failures_end_their_pairs_as_errors_never_as_agent_failures(tmp_path):
    """In one rollout on real desktops: a desktop that stops answering mid-episode, an evaluator that
    raises, a getter cua lacks and a download whose URL fails. Each ends its attempts as an error of the
    infrastructure with its own stop reason, retried, never an agent failure; the unsupported task is
    refused at the start and counted apart; no claim and no desktop is left held."""
    before = _xvfbs()
    tasks = tmp_path / "tasks"
    ready = [{"type": "execute", "parameters": {"command": "echo ready > ~/ready.txt", "shell": True}}]
    is_ready = {"func": "exact_match", "result": {"type": "vm_command_line", "command": "cat ~/ready.txt",
                                                  "shell": True},
                "expected": {"type": "rule", "rules": {"expected": "ready\n"}}}
    _task_file(tasks, "err-frozen", ready, is_ready)
    _task_file(tasks, "err-eval-raises", ready, {**is_ready, "expected": {"type": "rule", "rules": {"wrong_key": 1}}})
    _task_file(tasks, "err-unsupported-getter", ready, {**is_ready, "result": {"type": "googledrive_file"}})
    gone = f"http://127.0.0.1:{free_port()}/notes.txt"  # nothing listens there
    _task_file(tasks, "err-download", [{"type": "download", "parameters": {
        "files": [{"url": gone, "path": "~/Desktop/notes.txt"}]}}], is_ready)
    answers = tmp_path / "answers.json"  # err-frozen waits long enough to be frozen mid-episode, then is done
    answers.write_text(json.dumps({"err-frozen": ["```python\ntime.sleep(2)\n```"] * 5 + ["```DONE```"],
                                   "err-eval-raises": ["```DONE```"], "err-download": ["```DONE```"]}))
    cfg = tmp_path / "errors.yaml"
    cfg.write_text(f"""
run: {{name: errors, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {tasks}}}}}
env: {{kind: osworld, url: local, retries: 1, local: {{max_envs: 2}}, osworld: {{session: openbox, pause_s: 0.3}}}}
model: {{provider: script, script: {answers}}}
agent: {{kind: osworld}}
runner: {{num_envs: 2, max_steps: 8, step_timeout_s: 10, episode_timeout_s: 120, max_attempts: 2}}
""")
    out, err = (open(tmp_path / name, "w") for name in ("stdout", "stderr"))  # noqa: SIM115 - closed below
    p = start_cua("rollout", str(cfg), cwd=ROOT, stdout=out, stderr=err)
    try:
        leases = lambda: [json.loads(x) for f in (tmp_path / "results").glob("errors-*/leases.jsonl")  # noqa: E731
                          for x in f.read_text().splitlines()]
        held = lambda: [r for r in leases() if r["state"] == "held" and r["task_id"] == "err-frozen"]  # noqa: E731
        wait_for(held, timeout=300, what="err-frozen's first desktop is held")  # GNOME's cold start on a busy host
        assert _freeze(held()[0]["api"]) > 0
        finish(p, 600)
    finally:
        kill_group(p)
        out.close()
        err.close()
    assert p.returncode == 0, (tmp_path / "stderr").read_text()[-3000:]
    run = next((tmp_path / "results").glob("errors-*"))
    lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    by_task = {t: sorted((r for r in lines if r["task_id"] == t), key=lambda r: r["attempt"])
               for t in {r["task_id"] for r in lines}}
    summary = {t: [(r["outcome"], r["stop_reason"]) for r in rs] for t, rs in by_task.items()}
    assert summary == {
        "err-frozen": [("error", "env_error"), ("success", "finished")],  # a fresh desktop the second time
        "err-eval-raises": [("error", "eval_error")] * 2,
        "err-download": [("error", "env_error")] * 2,
    }, summary
    assert "KeyError" in by_task["err-eval-raises"][0]["error"] and gone in by_task["err-download"][0]["error"]
    assert all(r["score"] is None for r in lines if r["outcome"] == "error")  # never a 0 for the agent

    # The unsupported task: refused at the start, never scheduled or scored, and counted apart.
    unsupported = [json.loads(x) for x in (run / "unsupported.jsonl").read_text().splitlines()]
    assert unsupported == [{"task_id": "err-unsupported-getter", "domain": "os",
                            "missing": ["getter 'googledrive_file' (needs credentials: a Google account)"]}]
    assert "err-unsupported-getter" not in (run / "scheduled.jsonl").read_text()
    assert "1 of 4 tasks use what cua or these desktops lack" in (tmp_path / "stderr").read_text()
    stats = run_cua("stats", str(run), "--format", "json")
    assert stats.returncode == 0, stats.stderr
    (figures,) = json.loads(stats.stdout)["runs"]
    assert (figures["unsupported"], figures["scheduled"], figures["errors"]) == (1, 3, 2), figures
    assert figures["errors_by_stop_reason"] == {"env_error": 1, "eval_error": 1}
    assert figures["success_rate_finished"] == 1.0  # the one pair the agent played to the end: no failure

    # Nothing left claimed or held: the frozen desktop was torn down like the others.
    assert os.listdir(run / "queue" / "claimed") == [] and len(os.listdir(run / "queue" / "failed")) == 2
    states = {}
    for r in leases():
        states[r["lease"]] = r["state"]
    assert len(states) == 6 and set(states.values()) == {"released"}, states  # two attempts of three pairs
    assert "no env is held" in run_cua("envs", "list", str(run)).stdout
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="every desktop of the run is gone")


def test_a_spreadsheet_task_in_libreoffice_calc_is_played_and_scored_by_a_rollout(tmp_path):
    import openpyxl

    from cua_cli.osworld.local_files import cache_key

    task = json.loads((DATA / "calc/cua-calc-row-totals.json").read_text())
    sales = [["item", "q1", "q2"], ["pens", 3, 4], ["ink", 10, 5]]
    files = tmp_path / "files"  # the task's download and its gold book, where an offline run finds them
    files.mkdir()
    for name, url, rows in (("sales.xlsx", task["config"][0]["parameters"]["files"][0]["url"], sales),
                            ("sales_gold.xlsx", task["evaluator"]["expected"]["path"],
                             [sales[0] + ["Total"], sales[1] + [7], sales[2] + [15]])):
        wb = openpyxl.Workbook()
        wb.active.title = "Sheet1"
        for row in rows:
            wb.active.append(row)
        wb.save(files / cache_key(url, name))
    # The oracle waits for Calc to show the book (its start takes seconds), types the totals, says DONE.
    wait = ("```python\nimport subprocess\nfor _ in range(600):\n"
            "    if b'sales.xlsx - LibreOffice Calc' in subprocess.run(['wmctrl', '-l'], capture_output=True).stdout:\n"
            "        break\n    time.sleep(0.2)\n```")
    act = ("```python\npyautogui.hotkey('ctrl', 'home'); pyautogui.press('right', presses=3, interval=0.3); "
           "pyautogui.write('Total'); pyautogui.press('enter'); pyautogui.write('=B2+C2'); pyautogui.press('enter'); "
           "pyautogui.write('=B3+C3'); pyautogui.press('enter')\n```")
    script = tmp_path / "oracle.json"
    script.write_text(json.dumps({"cua-calc-row-totals": [wait, act, "```DONE```"]}))
    cfg = tmp_path / "calc.yaml"
    cfg.write_text(f"""
run: {{name: calc, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/calc/cua-calc-row-totals.json}}}}
env: {{kind: osworld, url: local, local: {{max_envs: 1}},
      osworld: {{session: openbox, pause_s: 0.3, files_dir: {files}}}}}
model: {{provider: script, script: {script}}}
agent: {{kind: osworld}}
runner: {{num_envs: 1, max_steps: 4, step_timeout_s: 150, episode_timeout_s: 400}}
""")
    result = run_cua("rollout", str(cfg), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    [final] = _finals(next((tmp_path / "results").glob("calc-*"))).values()
    assert (final["outcome"], final["score"], final["stop_reason"]) == ("success", 1.0, "finished"), final
