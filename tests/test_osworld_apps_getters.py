"""The VS Code and wallpaper getters beside OSWorld's own over the stand-in of OSWorld's in-VM server
(helpers/osworld_standin.py), OSWorld's getters with OSWorld's own PythonController as their client:
the same requests reach the desktop (the command palette's keys, as pyautogui code) and the same
files come back."""

import importlib
import types

import pytest
from helpers.osworld_reference import reference_apart
from helpers.osworld_standin import StandIn

from cua_cli._util.budget import Budget
from cua_cli.osworld.desktop_api import ApiSettings, DesktopAPI
from cua_cli.osworld.getters import GETTERS, EvalContext
from cua_cli.osworld.local_files import Downloads


@pytest.fixture
def both(tmp_path):
    """(cua's EvalContext, OSWorld's env, the stand-in's simulated desktop)."""
    reference_apart("getters.vlc")  # the desktop_env package's stand-in, then OSWorld's client
    controllers = importlib.import_module("desktop_env.controllers.python")
    s = StandIn(tmp_path / "vm")
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    api = DesktopAPI(ApiSettings(s.url, timeout_s=10, retries=0))
    ctx = EvalContext(api, Downloads(tmp_path / "downloads"), tmp_path / "ours", Budget(30), file_tries=1)
    host, _, port = s.url.removeprefix("http://").partition(":")
    controller = controllers.PythonController(host, int(port))
    controller.retry_times, controller.retry_interval = 1, 0.0
    env = types.SimpleNamespace(vm_platform="Linux", controller=controller, cache_dir=str(tmp_path / "theirs"),
                                vm_ip=host, server_port=int(port))
    yield ctx, env, s.desktop
    s.close()


def read(path):
    return None if path is None else open(path, "rb").read()


@pytest.mark.slow  # four waits of a second, OSWorld's and cua's
def test_vscode_config_sends_osworlds_keys_and_fetches_the_file(both):
    ctx, env, desktop = both
    vscode = reference_apart("getters.vscode")
    (desktop.home / "OpenProject.txt").write_text("project")
    config = {"vscode_extension_command": "OpenProject", "path": "/home/user/OpenProject.txt",
              "dest": "OpenProject.txt"}
    ours = GETTERS["vscode_config"](ctx, config)
    sent = list(desktop.executed)
    desktop.executed.clear()
    theirs = vscode.get_vscode_config(env, config)
    assert read(ours) == read(theirs) == b"project"
    assert len(sent) == 3 and sent == desktop.executed  # hotkey, typewrite, press: the same three commands
    assert "pyautogui.typewrite('OpenProject')" in sent[1]["command"][-1]

    config["path"] = "/home/user/none.txt"  # the command wrote nothing
    assert GETTERS["vscode_config"](ctx, config) is None is vscode.get_vscode_config(env, config)


def test_a_desktop_without_a_wallpaper_gives_an_empty_file_as_osworld(both):
    ctx, env, _ = both
    info = reference_apart("getters.info")
    ours = GETTERS["vm_wallpaper"](ctx, {"dest": "wallpaper.png"})
    theirs = info.get_vm_wallpaper(env, {"dest": "wallpaper.png"})
    assert read(ours) == read(theirs) == b""
