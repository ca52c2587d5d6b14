"""A desktop server on a host short of a tool every desktop's session starts names the tool and its
Debian package, exits 2 and starts nothing, rather than failing each desktop's start later."""

import pytest
from helpers.cli import run_cua


@pytest.mark.parametrize("missing", ["xdotool", "Xvfb"])
def test_a_desktop_server_short_of_a_session_tool_names_it_and_starts_nothing(tmp_path, missing):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in {"gnome-shell", "Xvfb", "dbus-daemon", "xdotool"} - {missing}:
        (tools / name).write_text("#!/bin/sh\nexit 1\n")
        (tools / name).chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    r = run_cua("env-server", "--backend", "desktop", "--port", "0",
                env={"PATH": str(tools), "TMPDIR": str(scratch), "CUA_ENV_TOKEN": "t"}, timeout=60)
    package = {"xdotool": "xdotool", "Xvfb": "xvfb"}[missing]
    assert r.returncode == 2, r.stderr
    assert f"desktops need {missing} (Debian's package {package})" in r.stderr
    assert "Traceback" not in r.stderr
    assert list(scratch.iterdir()) == []  # no desktop folder, no desktop
