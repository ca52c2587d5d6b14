"""cua's own desktops (cua_cli/envserver/desktop): OSWorld's in-VM API against a real sandboxed X
session (Xvfb, GNOME, D-Bus, AT-SPI), reached over HTTP on the desktop's own port."""

import json
import time

import pytest
from helpers.desktops import PREFIX, keyboard_switches, needs_desktops, png_size, request, run

from cua_cli.envserver.desktop.desktop import LocalDesktop

pytestmark = [needs_desktops, pytest.mark.slow]


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("desktops")
    workdir.chmod(0o711)
    d = LocalDesktop(workdir, "127.0.0.1", (1920, 1080))
    yield d
    d.close()
    assert d.sandbox.processes() == []


@pytest.fixture(scope="module")
def url(desktop):
    return f"http://127.0.0.1:{desktop.port}"


def wait_for(check, timeout=30.0):
    """Poll a condition on the desktop (a window mapping is an event we can only observe)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_screenshot_is_a_full_screen_png_that_changes_after_an_xdotool_action(url):
    status, kind, first = request(url + "/screenshot")
    assert status == 200 and kind == "image/png"
    assert png_size(first) == (1920, 1080)
    assert run(url, ["xdotool", "mousemove", "700", "500"])["returncode"] == 0
    _, _, second = request(url + "/screenshot")
    assert png_size(second) == (1920, 1080) and second != first  # the cursor drawn in moved


def test_a_file_written_by_execute_reads_back_with_file(url):
    out = run(url, "echo hello desktop > ~/Desktop/note.txt && echo ok", shell=True)
    assert out == {"status": "success", "output": "ok\n", "error": "", "returncode": 0}
    status, _, data = request(url + "/file", "POST", form={"file_path": "~/Desktop/note.txt"})
    assert status == 200 and data == b"hello desktop\n"
    assert request(url + "/file", "POST", form={"file_path": "/nonexistent"})[0] == 404


def test_execute_expands_tilde_and_splits_strings_as_osworld_does(url):
    assert run(url, ["ls", "-d", "~/Desktop"])["output"] == "/home/user/Desktop\n"
    assert run(url, "echo 'two words'")["output"] == "two words\n"
    failed = run(url, ["sh", "-c", "echo oops >&2; exit 3"])
    assert failed["returncode"] == 3 and failed["error"] == "oops\n"
    status, _, raw = request(url + "/execute", "POST", {"command": ["/no/such/program"]})
    assert status == 500 and json.loads(raw)["status"] == "error"


def test_pyautogui_code_gives_the_same_results_as_a_new_python(url):
    """The pre-imported fast path and a plain `python -c` agree on output, errors and exit codes."""
    cases = ["pyautogui.moveTo(321, 123); print(pyautogui.position()); print(__name__, __import__('sys').argv)",
             "import sys; print('out'); print('err', file=sys.stderr); sys.exit(4)",
             "raise ValueError('boom')",
             # away from GNOME's top-left corner, where the pointer would open the overview
             "pyautogui.click(400, 300); pyautogui.write('ab', interval=0.01); print(pyautogui.size())"]
    for code in cases:
        fast = run(url, ["python", "-c", PREFIX + code])
        slow = run(url, ["python", "-c", "pass; " + PREFIX + code])  # not the exact prefix: a new Python
        assert fast == slow, code
    assert run(url, ["python3", "-c", PREFIX + "print(pyautogui.position())"])["output"] == "Point(x=400, y=300)\n"


def test_the_info_routes(url):
    assert request(url + "/platform")[2] == b"Linux"
    assert json.loads(request(url + "/screen_size", "POST")[2]) == {"width": 1920, "height": 1080}
    assert json.loads(request(url + "/desktop_path", "POST")[2]) == {"desktop_path": "/home/user/Desktop"}


def test_upload_then_list_directory(url):
    status, _, raw = request(url + "/setup/upload", "POST", form={"file_path": "~/Desktop/up.bin"},
                             files={"file_data": ("up.bin", b"\x00\x01binary")})
    assert status == 200 and raw == b"File Uploaded"
    assert request(url + "/file", "POST", form={"file_path": "/home/user/Desktop/up.bin"})[2] == b"\x00\x01binary"
    status, _, raw = request(url + "/list_directory", "POST", {"path": "~/Desktop"})
    tree = json.loads(raw)["directory_tree"]
    assert status == 200 and tree["type"] == "directory" and tree["name"] == "Desktop"
    assert {"type": "file", "name": "up.bin"} in tree["children"]
    # as OSWorld's server: 400 for a path that is no directory, missing or a file
    assert request(url + "/list_directory", "POST", {"path": "~/nowhere"})[0] == 400
    assert request(url + "/list_directory", "POST", {"path": "~/Desktop/up.bin"})[0] == 400


def test_a_launched_window_is_found_activated_and_closed(url):
    status, _, raw = request(url + "/setup/launch", "POST",
                             {"command": ["xterm", "-class", "CuaTerm", "-geometry", "80x24"], "shell": False})
    assert status == 200 and b"launched successfully" in raw

    def size():
        status, _, raw = request(url + "/window_size", "POST", form={"app_class_name": "CuaTerm"})
        return json.loads(raw) if status == 200 else None
    found = wait_for(size)
    assert found and found["width"] > 100 and found["height"] > 100
    assert "CuaTerm" in run(url, ["wmctrl", "-lx"])["output"]
    assert request(url + "/setup/activate_window", "POST", {"window_name": "CuaTerm", "by_class": True})[0] == 200
    assert request(url + "/setup/close_window", "POST", {"window_name": "CuaTerm", "by_class": True})[0] == 200
    assert wait_for(lambda: "CuaTerm" not in run(url, ["wmctrl", "-lx"])["output"])
    assert request(url + "/setup/activate_window", "POST", {"window_name": "CuaTerm", "by_class": True})[0] == 404


def test_accessibility_tree_is_xml_from_at_spi(url):
    status, _, raw = request(url + "/accessibility")
    assert status == 200
    assert json.loads(raw)["AT"].startswith("<desktop-frame")


def test_gnome_terminal_is_read_through_at_spi(url):
    assert request(url + "/setup/launch", "POST", {"command": ["gnome-terminal"], "shell": False})[0] == 200
    assert wait_for(lambda: "gnome-terminal-server" in run(url, ["wmctrl", "-lx"])["output"])
    assert request(url + "/setup/activate_window", "POST", {"window_name": "gnome-terminal-server",
                                                             "by_class": True})[0] == 200
    run(url, ["python", "-c", PREFIX + "pyautogui.write('echo cua-$((6*7))\\n')"])

    def terminal_text():
        status, _, raw = request(url + "/terminal")
        return status == 200 and "cua-42" in (json.loads(raw)["output"] or "")
    assert wait_for(terminal_text, timeout=120)  # AT-SPI answers slowly on a loaded host
    assert "gnome-terminal-server" in json.loads(request(url + "/accessibility")[2])["AT"]


def test_pid_1_shows_no_host_path(desktop, url):
    """Not the desktops' folder on the host (the interpreter's own path may be anywhere, /tmp too)."""
    shown = run(url, ["cat", "/proc/1/cmdline"])["output"]
    assert str(desktop.sandbox.dir.parent) not in shown and "cua-desktops" not in shown


def test_pyautogui_still_runs_after_the_code_killed_its_forker(url):
    run(url, "pkill -f zygote[.]py", shell=True)
    out = run(url, ["python", "-c", PREFIX + "print(pyautogui.size())"])
    assert out["output"] == "Size(width=1920, height=1080)\n"


def test_an_openbox_desktops_first_key_switches_no_keyboard(tmp_path):
    """As on GNOME (test_desktop_gnome.py), X's core keyboard is on XTest's device before the window
    manager starts, whichever the session: no grab of its is at stake on a first key."""
    tmp_path.chmod(0o711)
    d = LocalDesktop(tmp_path, "127.0.0.1", (1280, 720), session="openbox")
    try:
        assert keyboard_switches(f"http://127.0.0.1:{d.port}") == 0
    finally:
        d.close()
