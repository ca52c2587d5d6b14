"""OSWorld task files of the os domain, set up and scored by cua's OSWorld client (cua_cli/osworld)
against a real cua desktop: 0 before acting, 1 after the oracle's actions, which reach the desktop
as an agent's would (pyautogui code and shell commands through /execute)."""

import time

import openpyxl
import pytest
from helpers.desktops import needs_desktops
from test_osworld_desktop import DATA, TASKS

from cua_cli._util.budget import Budget
from cua_cli.envserver.desktop.desktop import LocalDesktop
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.evaluator import evaluate
from cua_cli.osworld.local_files import Downloads, cache_key, episode_folder
from cua_cli.osworld.setup import SetupContext, run_steps
from cua_cli.osworld.task_files import read_tasks

pytestmark = [needs_desktops, pytest.mark.slow]
assert read_tasks  # the same task files as the stand-in's tests


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("osworld-desktops")
    workdir.chmod(0o711)
    d = LocalDesktop(workdir, "127.0.0.1", (1920, 1080))
    yield d
    d.close()


@pytest.fixture
def ctx(desktop, tmp_path):
    api = DesktopAPI(ApiSettings(f"http://127.0.0.1:{desktop.port}", timeout_s=30, retries=1))
    return SetupContext(api, Downloads(tmp_path / "downloads", offline_dir=DATA / "cache"),
                        episode_folder(tmp_path / "work", "task", "0_0"), upload_root=tmp_path / "uploads")


def budget(seconds: float = 60) -> Budget:
    return Budget(step_timeout=30, deadline=time.monotonic() + seconds)


def score(task_id, ctx, last_action="DONE"):
    return evaluate(TASKS[task_id]["evaluator"], last_action, ctx, budget(), file_tries=2, file_retry_s=0.05)


def set_up(task_id, ctx):
    run_steps(TASKS[task_id]["config"]["config"], ctx, budget())


def act(ctx, code):
    assert ctx.desktop.run_pyautogui(code, budget())["returncode"] == 0


def eventually_one(task_id, ctx, timeout=30):
    """An app reacts to input when it gets to it: score until 1 (or give up)."""
    deadline = time.monotonic() + timeout
    while (s := score(task_id, ctx)) != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    return s


def test_move_notes(ctx):
    set_up("cua-os-move-notes", ctx)
    assert score("cua-os-move-notes", ctx) == 0
    act(ctx, "import subprocess, os; subprocess.run(['mv', os.path.expanduser('~/Desktop/notes.txt'), "
             "os.path.expanduser('~/Documents/')], check=True)")
    assert score("cua-os-move-notes", ctx) == 1
    assert score("cua-os-move-notes", ctx, last_action="FAIL") == 0


def test_idle_delay(ctx):
    set_up("cua-os-idle-delay", ctx)
    assert score("cua-os-idle-delay", ctx) == 0
    assert ctx.desktop.execute(["gsettings", "set", "org.gnome.desktop.session", "idle-delay", "0"], budget())["returncode"] == 0
    assert score("cua-os-idle-delay", ctx) == 1


def test_kill_sleeper(ctx):
    set_up("cua-os-kill-sleeper", ctx)
    assert score("cua-os-kill-sleeper", ctx) == 0
    assert ctx.desktop.execute("pkill -x -f 'sleep 31337'", budget(), shell=True)["returncode"] == 0
    assert eventually_one("cua-os-kill-sleeper", ctx) == 1


def test_terminal_product(ctx):
    set_up("cua-os-terminal-product", ctx)
    assert score("cua-os-terminal-product", ctx) == 0
    act(ctx, "pyautogui.write('echo $((6*7))'); pyautogui.press('enter')")
    assert eventually_one("cua-os-terminal-product", ctx) == 1


@pytest.mark.parametrize("last, expected", [("FAIL", 1), ("DONE", 0)])
def test_infeasible_rule(ctx, last, expected):
    set_up("cua-os-infeasible-firmware", ctx)
    assert score("cua-os-infeasible-firmware", ctx, last_action=last) == expected


# -- a spreadsheet task in LibreOffice Calc (installed on the desktops by scripts/setup_env.sh)

CALC = read_tasks(DATA / "calc" / "cua-calc-row-totals.json")[0]
SALES = [["item", "q1", "q2"], ["pens", 3, 4], ["ink", 10, 5]]


def write_book(path, rows):
    wb = openpyxl.Workbook()
    wb.active.title = "Sheet1"
    for row in rows:
        wb.active.append(row)
    wb.save(path)


def test_a_spreadsheet_task_is_set_up_in_calc_and_scored_from_the_saved_book(desktop, tmp_path):
    # The task's two files, where an offline run finds its downloads (OSWorld's cache names).
    offline = tmp_path / "files"
    offline.mkdir()
    [download] = CALC["config"]["config"][0]["parameters"]["files"]
    write_book(offline / cache_key(download["url"], download["path"]), SALES)
    gold = CALC["evaluator"]["expected"]
    write_book(offline / cache_key(gold["path"], gold["dest"]), [SALES[0] + ["Total"], SALES[1] + [7], SALES[2] + [15]])
    api = DesktopAPI(ApiSettings(f"http://127.0.0.1:{desktop.port}", timeout_s=30, retries=1))
    ctx = SetupContext(api, Downloads(tmp_path / "downloads", offline_dir=offline),
                       episode_folder(tmp_path / "work", "calc", "0_0"), upload_root=tmp_path / "uploads")

    def calc_score():
        return evaluate(CALC["evaluator"], "DONE", ctx, budget(), file_tries=2, file_retry_s=0.05)

    run_steps(CALC["config"]["config"], ctx, budget())
    deadline = time.monotonic() + 120  # LibreOffice's first start, on a loaded machine
    while "sales.xlsx - LibreOffice Calc" not in api.execute(["wmctrl", "-l"], budget())["output"]:
        assert time.monotonic() < deadline, "LibreOffice Calc never showed sales.xlsx"
        time.sleep(0.2)
    assert calc_score() == 0  # saved as it was: no totals
    act(ctx, "pyautogui.hotkey('ctrl', 'home'); pyautogui.press('right', presses=3, interval=0.3); "
             "pyautogui.write('Total'); pyautogui.press('enter'); pyautogui.write('=B2+C2'); pyautogui.press('enter'); "
             "pyautogui.write('=B3+C3'); pyautogui.press('enter')")
    assert eventually_one_of(calc_score) == 1


def eventually_one_of(score_now, timeout=60):
    deadline = time.monotonic() + timeout
    while (s := score_now()) != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    return s


def test_the_apps_start_as_on_osworlds_image_with_no_first_run_dialog(desktop):
    api = DesktopAPI(ApiSettings(f"http://127.0.0.1:{desktop.port}", timeout_s=30, retries=1))
    for command, title in (["gimp"], "GNU Image Manipulation Program"), (["vlc"], "VLC media player"):
        api.launch(command, budget())
        deadline = time.monotonic() + 120
        while title not in (windows := api.execute(["wmctrl", "-l"], budget())["output"]):
            assert time.monotonic() < deadline, f"{command[0]} never showed its window"
            time.sleep(0.2)
    # VLC asks about network access before its player shows, unless told (as OSWorld's image tells it) not to.
    assert "Privacy and Network Access Policy" not in windows
    assert b"qt-privacy-ask=0" in api.file("~/.config/vlc/vlcrc", budget())
