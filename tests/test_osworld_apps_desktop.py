"""The VLC, GIMP, VS Code and general getters that act on the desktop, and
check_python_file_by_test_suite, against a real cua desktop (cua_cli/envserver/desktop): cua's
getters beside OSWorld's own (desktop-env 1.0.2's getters, with OSWorld's own PythonController as
their client of the same desktop), and the test suite run on the desktop scoring as OSWorld's metric
scores the same files in its own process (here: the test's own files, never an agent's)."""

import importlib
import io
import os
import sys
import time
import types
import uuid

import openpyxl
import pytest
from helpers.desktops import needs_desktops
from helpers.osworld_reference import reference_apart

from cua_cli._util.budget import Budget
from cua_cli.envserver.desktop.desktop import LocalDesktop
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.evaluator import evaluate
from cua_cli.osworld.getters import GETTERS, EvalContext
from cua_cli.osworld.getters.vlc import VIDEO_TYPES
from cua_cli.osworld.local_files import Downloads, cache_key, episode_folder
from cua_cli.osworld.metrics.vscode import check_python_file_by_test_suite
from cua_cli.osworld.setup import SetupContext

pytestmark = [needs_desktops, pytest.mark.slow]


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("osworld-apps-desktop")
    workdir.chmod(0o711)
    d = LocalDesktop(workdir, "127.0.0.1", (1280, 800))
    yield d
    d.close()


def budget(seconds: float = 120) -> Budget:
    return Budget(step_timeout=60, deadline=time.monotonic() + seconds)


@pytest.fixture
def both(desktop, tmp_path):
    """(cua's EvalContext, OSWorld's env) over the desktop."""
    reference_apart("getters.vlc")  # the desktop_env package's stand-in, then its client
    controllers = importlib.import_module("desktop_env.controllers.python")
    api = DesktopAPI(ApiSettings(f"http://127.0.0.1:{desktop.port}", timeout_s=60, retries=1))
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    ctx = EvalContext(api, Downloads(tmp_path / "downloads"), tmp_path / "ours", budget(), file_tries=1)
    controller = controllers.PythonController("127.0.0.1", desktop.port)
    controller.retry_times, controller.retry_interval = 1, 0.1
    env = types.SimpleNamespace(vm_platform="Linux", controller=controller, cache_dir=str(tmp_path / "theirs"),
                                vm_ip="127.0.0.1", server_port=desktop.port)
    return ctx, env


def read(path):
    return None if path is None else open(path, "rb").read()


def test_settings_files_are_fetched_as_osworld_fetches_them(both):
    ctx, env = both
    vlc, gimp = reference_apart("getters.vlc"), reference_apart("getters.gimp")
    settings = b"[qt]\nqt-bgcone=0\n#qt-max-volume=125\n"
    ctx.desktop.execute(["mkdir", "-p", "/home/user/.config/vlc", "/home/user/.config/GIMP/2.10"], ctx.budget)
    ctx.desktop.upload("~/.config/vlc/vlcrc", settings, ctx.budget)
    ctx.desktop.upload("~/.config/GIMP/2.10/gimprc", b'(theme "Light")\n', ctx.budget)
    ours = GETTERS["vlc_config"](ctx, {"dest": "vlcrc"})
    assert read(ours) == read(vlc.get_vlc_config(env, {"dest": "vlcrc"})) == settings
    config = {"file_name": "gimprc", "dest": "gimprc"}
    assert read(GETTERS["gimp_config_file"](ctx, config)) == read(gimp.get_gimp_config_file(env, config)) \
        == b'(theme "Light")\n'
    missing = {"file_name": "sessionrc-" + uuid.uuid4().hex, "dest": "sessionrc"}
    assert GETTERS["gimp_config_file"](ctx, missing) is None is gimp.get_gimp_config_file(env, missing)


def test_the_default_video_player_is_osworlds(both):
    """Half the video types opened by another player: the most common answer (OSWorld asks about each
    type twice but one) is the same by cua's one query as by OSWorld's 86."""
    ctx, env = both
    vlc = reference_apart("getters.vlc")
    before = GETTERS["default_video_player"](ctx, {})
    ctx.desktop.execute(["mkdir", "-p", "/home/user/.local/share/applications"], ctx.budget)
    ctx.desktop.upload("/home/user/.local/share/applications/cua-test-player.desktop",
                       b"[Desktop Entry]\nType=Application\nName=Player\nExec=true %f\nMimeType=video/mp4;\n",
                       ctx.budget)
    half = [f"video/{kind}" for kind in VIDEO_TYPES[::2]]
    set_default = ctx.desktop.execute(["xdg-mime", "default", "cua-test-player.desktop"] + half, ctx.budget)
    assert set_default["returncode"] == 0, set_default
    assert ctx.desktop.execute(["xdg-mime", "query", "default", half[0]], ctx.budget)["output"] \
        == "cua-test-player.desktop\n"
    after = GETTERS["default_video_player"](ctx, {})
    assert after == vlc.get_default_video_player(env, {})
    assert before == "vlc.desktop\n" and after.endswith(".desktop\n")


def test_the_wallpaper_is_osworlds(both):
    ctx, env = both
    info = reference_apart("getters.info")
    ours = GETTERS["vm_wallpaper"](ctx, {"dest": "wallpaper.png"})
    assert read(ours) == read(info.get_vm_wallpaper(env, {"dest": "wallpaper.png"}))


def book(rows) -> bytes:
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def test_a_spreadsheets_last_row_is_osworlds(both):
    ctx, env = both
    files = reference_apart("getters.file")
    path = f"/tmp/researchers-{uuid.uuid4().hex}.xlsx"
    config = {"path": path, "file_type": "xlsx", "file_content": "last_row"}
    ctx.desktop.upload(path, book([["Name", "Citations", "h", "Title"], ["Yann LeCun", 345074, 147.5, None]]),
                       ctx.budget)
    ours = GETTERS["content_from_vm_file"](ctx, config)
    assert ours == files.get_content_from_vm_file(env, config) == ["Yann LeCun", "345074", "147.5", "nan"]
    ctx.desktop.upload(path, b"PK\x03\x04 not a book", ctx.budget)  # the agent broke it: OSWorld crashes
    assert GETTERS["content_from_vm_file"](ctx, config) is None
    with pytest.raises(Exception):
        files.get_content_from_vm_file(env, config)


AGENT = {  # the agent's files, as it left them
    "settings.py": "SPEED = 3\n",
    "snake.py": "from settings import SPEED\n\ndef eats(head, food):\n    return head == food\n",
}
SUITES = {  # test suites (OSWorld's are downloaded; these are the test's own)
    "passes": "from snake import eats\n\ndef test():\n    return eats((1, 2), (1, 2))\n",
    "fails": "from snake import eats\n\ndef test():\n    return eats((1, 2), (3, 2))\n",
    "half": "def test():\n    return 0.5\n",
    "big": "def test():\n    return 7\n",
    "truthy": "def test():\n    return [0]\n",
    "raises": "import snake\n\ndef test():\n    raise RuntimeError('no')\n",
    "no_function": "x = 1\n",
    "not_callable": "test = 3\n",
    "named": "def check():\n    return True\n",
    "reads_cwd": "import os\n\ndef test():\n    return os.path.exists('settings.py')\n",
    "noisy": ("import sys\n\ndef test():\n    print('x' * 2_000_000)\n    sys.stderr.write('y' * 2_000_000)\n"
              "    return 1\n"),
}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_the_test_suite_scores_on_the_desktop_as_osworlds_in_its_process(both, tmp_path, suite):
    ctx, _ = both
    vscode = reference_apart("metrics.vscode", ("PyPDF2",))
    options = {"test_function_name": "check"} if suite == "named" else {}
    # cua: the agent's files where vm_file puts them, the suite where cloud_file does
    for name, text in AGENT.items():
        (ctx.folder / name).write_text(text)
    (ctx.folder / "expected").mkdir()
    (ctx.folder / "expected" / "test_suite.py").write_text(SUITES[suite])
    ours = check_python_file_by_test_suite(str(ctx.folder / "settings.py"), str(ctx.folder / "expected/test_suite.py"),
                                           desktop_ctx=ctx, **options)
    # OSWorld: all of them in its one cache folder, imported in this process
    cache = tmp_path / "cache"
    cache.mkdir()
    for name, text in AGENT.items():
        (cache / name).write_text(text)
    (cache / "test_suite.py").write_text(SUITES[suite])
    modules = set(sys.modules)
    try:
        theirs = vscode.check_python_file_by_test_suite(str(cache / "settings.py"), str(cache / "test_suite.py"),
                                                        **options)
    finally:
        for name in set(sys.modules) - modules:
            del sys.modules[name]
    assert ours == theirs, suite


def test_the_agents_code_runs_on_the_desktop_not_here(both):
    ctx, _ = both
    mark = f"/tmp/cua-ran-{uuid.uuid4().hex}"
    (ctx.folder / "snake.py").write_text(f"import os\nopen({mark!r}, 'w').write(str(os.getpid()))\n")
    (ctx.folder / "expected").mkdir()
    (ctx.folder / "expected" / "test_suite.py").write_text("import snake\n\ndef test():\n    return True\n")
    modules = set(sys.modules)
    score = check_python_file_by_test_suite(str(ctx.folder / "snake.py"), str(ctx.folder / "expected/test_suite.py"),
                                            desktop_ctx=ctx)
    assert score == 1.0
    assert ctx.desktop.file(mark, ctx.budget) is not None  # it ran there ...
    assert not os.path.exists(mark) or open(mark).read() != str(os.getpid())  # ... not in this process
    assert set(sys.modules) == modules
    listing = ctx.desktop.execute(["sh", "-c", "ls -d /tmp/cua-test-suite-* 2>/dev/null | wc -l"], ctx.budget)
    assert listing["output"].strip() == "0"  # and its folder there is gone


def test_an_agent_code_that_hangs_or_exits_scores_0(both, monkeypatch):
    ctx, _ = both
    from cua_cli.osworld.metrics import vscode

    monkeypatch.setattr(vscode, "TEST_LIMIT_S", 3)
    (ctx.folder / "expected").mkdir()
    suite = ctx.folder / "expected" / "test_suite.py"
    for body in ("import time\n\ndef test():\n    time.sleep(60)\n    return True\n",
                 "import sys\n\ndef test():\n    sys.exit(0)\n",
                 "import os\n\ndef test():\n    print('forged 1.0')\n    os._exit(0)\n"):
        suite.write_text(body)
        assert check_python_file_by_test_suite(None, str(suite), desktop_ctx=ctx) == 0.0, body


def test_the_vscode_getter_replays_osworlds_keys_then_fetches_the_file(both):
    ctx, env = both
    vscode = reference_apart("getters.vscode")
    path = f"/tmp/OpenProject-{uuid.uuid4().hex}.txt"
    ctx.desktop.upload(path, b"project", ctx.budget)
    config = {"vscode_extension_command": "OpenProject", "path": path, "dest": "OpenProject.txt"}
    assert read(GETTERS["vscode_config"](ctx, config)) == read(vscode.get_vscode_config(env, config)) == b"project"


SNAKE_URL = "https://drive.usercontent.google.com/download?id=1rLhp5cAS93uwCdZlikQse656Tf1Ut0Xc&export=download"
SNAKE_FILES = ["food.py", "main.py", "settings.py", "snake.py"]
# the evaluator of OSWorld's multi_apps/26150609-0da3-4a7d-8868-0faf9c5f01bb (Apache-2.0), its URL shortened
SNAKE_EVALUATOR = {
    "postconfig": [], "func": "check_python_file_by_test_suite",
    "result": {"type": "vm_file", "path": [f"/home/user/Desktop/snake/{f}" for f in SNAKE_FILES],
               "dest": SNAKE_FILES, "multi": True},
    "expected": {"type": "cloud_file", "path": SNAKE_URL, "dest": "test_suite.py"}}
SNAKE_SUITE = ("from food import Food\nfrom snake import Snake\n\n"
               "def test():\n    s, f = Snake(), Food()\n    return s.eats(f)\n")


def test_the_snake_task_is_scored_by_the_evaluator_with_its_suite_run_on_the_desktop(desktop, tmp_path):
    api = DesktopAPI(ApiSettings(f"http://127.0.0.1:{desktop.port}", timeout_s=60, retries=1))
    offline = tmp_path / "offline"
    offline.mkdir()
    (offline / cache_key(SNAKE_URL, "test_suite.py")).write_text(SNAKE_SUITE)
    setup = SetupContext(api, Downloads(tmp_path / "downloads", offline_dir=offline),
                         episode_folder(tmp_path / "work", "snake", "0"))
    api.execute(["mkdir", "-p", "/home/user/Desktop/snake"], budget())

    def leave(eats: str) -> float:
        files = {"food.py": "class Food:\n    position = (3, 4)\n", "main.py": "import snake\n",
                 "settings.py": "SIZE = 20\n",
                 "snake.py": f"class Snake:\n    head = (3, 4)\n\n    def eats(self, food):\n        return {eats}\n"}
        for name, text in files.items():
            api.upload(f"/home/user/Desktop/snake/{name}", text.encode(), budget())
        return evaluate(SNAKE_EVALUATOR, "DONE", setup, budget(), file_tries=1)

    assert leave("self.head == food.position") == 1.0  # the agent's fix
    assert leave("self.head == food.positon") == 0.0  # still broken: the test raises
    assert evaluate(SNAKE_EVALUATOR, "FAIL", setup, budget()) == 0.0
