"""`serve` as the CLI runs it: it prints its URL, a stop signal tears every desktop down, and if the
server dies by SIGKILL its desktops die with it (their launcher's stdin is their lifeline)."""

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.desktops import needs_desktops, request
from helpers.processes import signal_group

pytestmark = [needs_desktops, pytest.mark.slow]
TOKEN = "serve-token"


def start_server(workdir, warm=0):
    code = ("from cua_cli.envserver.desktop import serve; "
            f"serve('127.0.0.1', 0, 'CUA_SERVE_TOKEN', max_desktops=2, screen=(800, 600), warm={warm}, "
            f"workdir='{workdir}')")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "CUA_SERVE_TOKEN": TOKEN}, start_new_session=True)
    line = proc.stdout.readline()
    assert "listening on http://" in line, line
    return proc, line.strip().rsplit(" ", 1)[1]


def children(pid):
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return found


def desktop_of(server_pid):
    """(launcher pidfd, the desktop's PID namespace) of the server's one desktop."""
    launcher = next(p for p in children(server_pid) if b"launcher.py" in Path(f"/proc/{p}/cmdline").read_bytes())
    init = children(launcher)[0]
    return os.pidfd_open(launcher), os.readlink(f"/proc/{init}/ns/pid")


def in_namespace(ns):
    found = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.readlink(f"/proc/{p}/ns/pid") == ns:
                found.append(p)
        except OSError:
            pass
    return found


def allocate(url):
    status, _, raw = request(url + "/start_emulator", "POST", {}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200, raw
    return json.loads(raw)["data"]


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_desktops_end_with_the_server(how, tmp_path):
    proc, url = start_server(tmp_path)
    try:
        allocate(url)
        pidfd, ns = desktop_of(proc.pid)
        assert in_namespace(ns)
        proc.send_signal(getattr(signal, how))
        assert proc.wait(60) in (0, -signal.SIGKILL)
        assert select.select([pidfd], [], [], 30)[0]  # the launcher exits: its init, and namespace, are gone
        os.close(pidfd)
        assert in_namespace(ns) == []
        if how == "SIGTERM":
            assert list(tmp_path.iterdir()) == []
        else:  # its files outlive it, until the next server starts there
            [orphan] = tmp_path.iterdir()
            proc, _ = start_server(tmp_path)
            assert not orphan.exists() and len(list(tmp_path.iterdir())) == 1
    finally:
        if proc.poll() is None:
            signal_group(proc, signal.SIGKILL)
            proc.wait()
