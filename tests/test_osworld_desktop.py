"""The OSWorld client (cua_cli/osworld/): the in-VM API, setup steps and the evaluator, against a stand-in
of OSWorld's in-VM server (tests/helpers/osworld_standin.py: OSWorld's server lives in a QEMU VM, which
cannot run here; cua's own desktop server will replace the stand-in in end-to-end tests).

The os-domain task files of tests/data/osworld score 0 when nothing is done, 1 once the stand-in's
desktop is in the state the agent's actions leave, and the infeasible rule both ways."""

import json
import socket
import time
import uuid
from pathlib import Path

import pytest
from helpers.osworld_standin import StandIn, Web

from cua_cli._util.budget import Budget
from cua_cli.errors import BadTask, EnvError, EvalError
from cua_cli.osworld import evaluator as evaluator_module
from cua_cli.osworld.desktop_api import PYAUTOGUI_PREFIX, ApiSettings, DesktopAPI
from cua_cli.osworld.evaluator import evaluate
from cua_cli.osworld.local_files import Downloads, cache_key, episode_folder, safe_name
from cua_cli.osworld.setup import SetupContext, run_steps
from cua_cli.osworld.task_files import read_tasks

DATA = Path(__file__).parent / "data" / "osworld"
TASKS = {t["task_id"]: t for t in read_tasks(DATA / "evaluation_examples" / "test_all.json")}


@pytest.fixture
def vm(tmp_path):
    s = StandIn(tmp_path / "vm")
    yield s
    s.close()


@pytest.fixture
def api(vm):
    return DesktopAPI(ApiSettings(vm.url, timeout_s=5, retries=1))


def budget(seconds: float = 30) -> Budget:
    return Budget(step_timeout=5, deadline=time.monotonic() + seconds)


@pytest.fixture
def ctx(api, tmp_path):
    return SetupContext(api, Downloads(tmp_path / "downloads", offline_dir=DATA / "cache"),
                        episode_folder(tmp_path / "work", "task", "0_0"), upload_root=tmp_path / "uploads")


def score(task_id: str, ctx: SetupContext, last_action="DONE") -> float:
    return evaluate(TASKS[task_id]["evaluator"], last_action, ctx, budget(), file_tries=2, file_retry_s=0.05)


def set_up(task_id: str, ctx: SetupContext) -> None:
    run_steps(TASKS[task_id]["config"]["config"], ctx, budget())


# -- the API

def test_api_bodies_and_answers(api, vm, tmp_path):
    b = budget()
    assert api.screenshot(b).startswith(b"\x89PNG")
    assert api.run_pyautogui("pyautogui.click(10, 20)", b) == {"status": "success", "output": "", "error": "",
                                                                "returncode": 0}
    assert vm.desktop.executed[-1] == {"command": ["python", "-c", PYAUTOGUI_PREFIX + "pyautogui.click(10, 20)"],
                                       "shell": False}
    assert PYAUTOGUI_PREFIX == "import pyautogui; import time; pyautogui.FAILSAFE = False; "
    assert api.execute("frobnicate --now", b)["returncode"] == 127
    assert api.platform(b) == "Linux"
    assert api.screen_size(b) == {"width": 1920, "height": 1080}
    assert api.window_size("Gnome-Terminal-Server", b) == {"width": 1200, "height": 800}
    assert api.window_size("vlc", b) is None  # OSWorld's server answers 500 for a class no window has
    assert api.desktop_path(b) is None
    data = bytes(range(256)) * 40 + b"\r\n--boundary--\r\n"
    api.upload("~/Desktop/blob ü.bin", data, b)
    assert (vm.desktop.home / "Desktop" / "blob ü.bin").read_bytes() == data
    assert api.file("~/Desktop/blob ü.bin", b) == data
    assert api.file("~/Desktop/none", b) is None
    assert api.desktop_path(b) == str(vm.desktop.home / "Desktop")
    assert api.list_directory("~/Desktop", b) == {"type": "directory", "name": "Desktop",
                                                  "children": [{"type": "file", "name": "blob ü.bin"}]}
    assert api.list_directory("~/Desktop/blob ü.bin", b) is None
    assert api.terminal(b) is None
    vm.desktop.terminal = "$ ls\nDesktop\n$"
    assert api.terminal(b) == "$ ls\nDesktop\n$"
    assert api.accessibility(b).startswith("<desktop-frame")


def test_desktop_failures_are_env_errors(api, vm):
    vm.desktop.fail["/screenshot"] = 1
    assert api.screenshot(budget()).startswith(b"\x89PNG")  # retried: a screenshot is safe to repeat
    vm.desktop.fail["/screenshot"] = 5
    with pytest.raises(EnvError, match="screenshot: HTTP 500"):
        api.screenshot(budget())
    calls = len(vm.desktop.calls)
    with pytest.raises(EnvError, match=r"execute 'cua-test-crash': HTTP 500: .*No such file"):
        api.execute(["cua-test-crash"], budget())
    assert len(vm.desktop.calls) == calls + 1  # a command that may have run is never sent twice


def test_unreachable_desktop_is_an_env_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = DesktopAPI(ApiSettings(f"http://127.0.0.1:{port}", timeout_s=2, retries=1))
    with pytest.raises(EnvError, match="connection failed"):
        api.screenshot(budget())


# -- the os tasks: 0 untouched, 1 once the desktop is as the agent leaves it

def test_move_notes(ctx, vm):
    set_up("cua-os-move-notes", ctx)
    home = vm.desktop.home
    assert (home / "Desktop" / "notes.txt").read_text() == "buy milk\n"  # from the offline cache
    assert score("cua-os-move-notes", ctx) == 0
    (home / "Desktop" / "notes.txt").rename(home / "Documents" / "notes.txt")
    assert score("cua-os-move-notes", ctx) == 1
    assert (ctx.folder / "notes.txt").read_text() == "buy milk\n"  # vm_file pulled it into the episode folder
    assert score("cua-os-move-notes", ctx, last_action="FAIL") == 0  # FAIL last scores 0 on a feasible task


def test_idle_delay(ctx, vm):
    set_up("cua-os-idle-delay", ctx)
    assert vm.desktop.gsettings == {("org.gnome.desktop.session", "idle-delay"): "300"}
    assert score("cua-os-idle-delay", ctx) == 0
    vm.desktop.gsettings[("org.gnome.desktop.session", "idle-delay")] = "0"
    assert score("cua-os-idle-delay", ctx) == 1


def test_kill_sleeper(ctx, vm):
    set_up("cua-os-kill-sleeper", ctx)
    assert vm.desktop.processes == [["sleep", "31337"]]
    assert score("cua-os-kill-sleeper", ctx) == 0
    vm.desktop.processes.clear()
    assert score("cua-os-kill-sleeper", ctx) == 1


def test_terminal_product(ctx, vm):
    set_up("cua-os-terminal-product", ctx)
    assert vm.desktop.processes == [["gnome-terminal"]]
    assert score("cua-os-terminal-product", ctx) == 0  # no focused terminal: None
    vm.desktop.terminal = "user@vm:~$ echo $((6*7))"
    assert score("cua-os-terminal-product", ctx) == 0  # typed, not run
    vm.desktop.terminal = "user@vm:~$ echo $((6*7))\n42\nuser@vm:~$"
    assert score("cua-os-terminal-product", ctx) == 1


@pytest.mark.parametrize("last, expected", [("FAIL", 1), ("DONE", 0), (None, 0), ("pyautogui.click()", 0)])
def test_infeasible_rule(ctx, last, expected):
    set_up("cua-os-infeasible-firmware", ctx)
    assert score("cua-os-infeasible-firmware", ctx, last_action=last) == expected


def test_oracle_answers_cover_every_task():
    oracle = json.loads((DATA / "oracle.json").read_text())
    assert set(oracle) == set(TASKS)
    for task_id, answers in oracle.items():
        assert answers[-1] in (("FAIL",) if TASKS[task_id]["evaluator"]["func"] == "infeasible" else ("DONE",))
        assert all(a in ("WAIT", "DONE", "FAIL") or a.startswith("```python\n") and a.endswith("\n```")
                   for a in answers)


# -- setup steps

def test_download_fetches_follows_redirects_and_caches(tmp_path, api, vm):
    web = Web({"/a": (302, {"Location": "/b/real.txt"}, b""), "/b/real.txt": (200, {}, b"payload")})
    try:
        ctx = SetupContext(api, Downloads(tmp_path / "dl"), tmp_path)
        step = {"type": "download", "parameters": {"files": [{"url": f"{web.url}/a", "path": "~/got.txt"}]}}
        run_steps([step], ctx, budget())
        run_steps([step], ctx, budget())
        assert (vm.desktop.home / "got.txt").read_bytes() == b"payload"
        assert web.hits == ["/a", "/b/real.txt"]  # the second time from the cache
        assert (tmp_path / "dl" / cache_key(f"{web.url}/a", "~/got.txt")).read_bytes() == b"payload"
        assert cache_key("http://x/y", "/home/user/a.txt") == f"{uuid.uuid5(uuid.NAMESPACE_URL, 'http://x/y')}_a.txt"
        bad = {"type": "download", "parameters": {"files": [{"url": f"{web.url}/missing", "path": "~/m"}]}}
        with pytest.raises(EnvError, match=rf"config\[1\] \(download\): download {web.url}/missing: HTTP 404"):
            run_steps([{"type": "sleep", "parameters": {"seconds": 0}}, bad], ctx, budget())
        with pytest.raises(BadTask, match=r"config\[0\] \(download\): download: 'file:///etc/passwd' is not an"):
            run_steps([{"type": "download", "parameters": {"files": [{"url": "file:///etc/passwd", "path": "~/p"}]}}],
                      ctx, budget())
    finally:
        web.close()


def test_a_failing_step_names_index_and_type(ctx, vm):
    with pytest.raises(EnvError, match=r"config\[1\] \(open\): open '~/nothing.txt': HTTP 404"):
        run_steps([{"type": "sleep", "parameters": {"seconds": 0.01}},
                   {"type": "open", "parameters": {"path": "~/nothing.txt"}}], ctx, budget())
    vm.desktop.fail["/setup/launch"] = 3
    with pytest.raises(EnvError, match=r"config\[0\] \(launch\): launch 'xterm': HTTP 500"):
        run_steps([{"type": "launch", "parameters": {"command": "xterm"}}], ctx, budget())
    with pytest.raises(BadTask, match=r"config\[0\] \(execute\): parameter 'command' is missing"):
        run_steps([{"type": "execute", "parameters": {}}], ctx, budget())
    with pytest.raises(BadTask, match=r"config\[0\] \(googledrive\): cua does not implement"):
        run_steps([{"type": "googledrive", "parameters": {}}], ctx, budget())


def test_until_reruns_within_a_limit(ctx, vm):
    ctx.until_limit_s = 1.0
    step = {"type": "execute", "parameters": {
        "command": "pgrep -a -x sleep | grep -q ' 31337$' && echo running || echo stopped", "shell": True,
        "until": {"stdout": "running"}}}
    start = time.monotonic()
    with pytest.raises(EnvError, match=r"config\[0\] \(execute\): `until` .* not met after [3-9] runs"):
        run_steps([step], ctx, budget())
    assert time.monotonic() - start < 3
    vm.desktop.processes.append(["sleep", "31337"])
    run_steps([step], ctx, budget())


def test_steps_fill_placeholders_and_capture_output(ctx, vm):
    ctx.placeholders = {"CLIENT_PASSWORD": "password", "SCREEN_WIDTH": 1920}
    run_steps([{"type": "execute", "parameters": {"command": "echo {CLIENT_PASSWORD} {SCREEN_WIDTH}", "shell": True,
                                                  "stdout": "out/../x.txt", "stderr": "err.txt"}}], ctx, budget())
    assert vm.desktop.executed[-1]["command"] == "echo password 1920"
    assert (ctx.folder / "err.txt").read_text() == "sh: 1: echo: not found\n"
    assert (ctx.folder / safe_name("out/../x.txt")).exists() and "/" not in safe_name("out/../x.txt")
    ev = {"func": "check_list", "result": {"type": "cache_file", "path": "err.txt"},
          "expected": {"type": "rule", "rules": {"expect": ["not found"]}}}
    assert evaluate(ev, "DONE", ctx, budget()) == 1


def test_upload_file_reads_only_inside_its_folder(ctx, vm, tmp_path):
    (tmp_path / "uploads").mkdir()
    (tmp_path / "uploads" / "in.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    run_steps([{"type": "upload_file", "parameters": {"files": [{"local_path": "in.txt", "path": "~/in.txt"}]}}],
              ctx, budget())
    assert (vm.desktop.home / "in.txt").read_text() == "inside"
    for path in ("../secret.txt", str(tmp_path / "secret.txt")):
        with pytest.raises(BadTask, match="outside the upload folder"):
            run_steps([{"type": "upload_file", "parameters": {"files": [{"local_path": path, "path": "~/s"}]}}],
                      ctx, budget())


def test_window_steps_and_wallpaper(ctx, vm):
    run_steps([{"type": "activate_window", "parameters": {"window_name": "Terminal", "strict": True}},
               {"type": "close_window", "parameters": {"window_name": "vlc", "by_class": True}},
               {"type": "change_wallpaper", "parameters": {"path": "~/w.png"}}], ctx, budget())
    assert vm.desktop.calls[-3:] == ["/setup/activate_window", "/setup/close_window", "/setup/change_wallpaper"]
    # A window that is not there (OSWorld's server: 404) is no setup error: OSWorld's client logs it and goes on
    run_steps([{"type": "activate_window", "parameters": {"window_name": "No such window"}},
               {"type": "change_wallpaper", "parameters": {"path": "~/w.png"}}], ctx, budget())
    assert vm.desktop.calls[-2:] == ["/setup/activate_window", "/setup/change_wallpaper"]


# -- the evaluator

def rule(value):
    return {"type": "rule", "rules": {"expected": value}}


def test_conj_and_or(ctx):
    one = {"type": "vm_command_line", "command": "frobnicate"}  # output "" -> exact_match with "" is 1
    ev = {"func": ["exact_match", "exact_match"], "result": [one, one], "expected": [rule(""), rule("x")]}
    assert evaluate(ev, "DONE", ctx, budget()) == 0
    assert evaluate({**ev, "conj": "or"}, "DONE", ctx, budget()) == 1
    ev = {"func": ["exact_match", "fuzzy_match"], "result": [one, one], "expected": [rule(""), rule("")]}
    assert evaluate(ev, "DONE", ctx, budget()) == 1


def test_vm_file_missing_is_retried_then_none(ctx, vm):
    ev = {"func": "compare_text_file", "result": {"type": "vm_file", "path": "~/gone.txt", "dest": "gone.txt"},
          "expected": {"type": "vm_file", "path": "~/gone.txt", "dest": "gone.txt"}}
    assert evaluate(ev, "DONE", ctx, budget(), file_tries=3, file_retry_s=0.01) == 0
    assert vm.desktop.calls.count("/file") == 6


def test_window_and_screen_sizes(ctx, vm):
    ev = {"func": "is_vlc_fullscreen", "result": {"type": "vm_screen_size"},
          "expected": {"type": "vm_window_size", "app_class_name": "vlc"}}
    assert evaluate(ev, "DONE", ctx, budget()) == 0  # no VLC window: the metric gets no expected value
    vm.desktop.windows["vlc"] = (1920, 1080)
    assert evaluate(ev, "DONE", ctx, budget()) == 1


def test_a_metric_that_raises_is_an_eval_error(ctx):
    ev = {"func": "exact_match", "result": {"type": "vm_command_line", "command": "x"},
          "expected": {"type": "rule", "rules": {"wrong_key": 1}}}
    with pytest.raises(EvalError, match="metric exact_match: KeyError: 'expected'"):
        evaluate(ev, "DONE", ctx, budget())


def test_a_metric_out_of_range_is_an_eval_error(ctx, monkeypatch):
    monkeypatch.setitem(evaluator_module.METRICS, "exact_match", lambda result, expected: 2)
    ev = {"func": "exact_match", "result": {"type": "vm_command_line", "command": "x"}, "expected": rule("")}
    with pytest.raises(EvalError, match=r"metric exact_match returned 2, not a number in \[0, 1\]"):
        evaluate(ev, "DONE", ctx, budget())


def test_a_failing_desktop_while_scoring_is_an_eval_error(ctx, vm):
    vm.desktop.fail["/execute"] = 1
    ev = {"func": "exact_match", "result": {"type": "vm_command_line", "command": "x"}, "expected": rule("")}
    with pytest.raises(EvalError, match="result getter vm_command_line: execute 'x': HTTP 500"):
        evaluate(ev, "DONE", ctx, budget())
    vm.desktop.fail["/setup/open_file"] = 3
    with pytest.raises(EvalError, match=r"evaluator\.postconfig\[0\] \(open\)"):
        evaluate({**ev, "postconfig": [{"type": "open", "parameters": {"path": "~"}}]}, "DONE", ctx, budget())


def test_an_unsupported_getter_is_refused(ctx):
    ev = {"func": "exact_match", "result": {"type": "googledrive_file"}, "expected": rule("")}
    with pytest.raises(BadTask, match="uses getter 'googledrive_file'"):
        evaluate(ev, "DONE", ctx, budget())
