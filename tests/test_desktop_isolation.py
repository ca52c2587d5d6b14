"""A desktop holds like a VM: proved with code sent through OSWorld's /execute, as a task's code would run.

Two desktops cannot see or signal each other's processes, files or APIs; the host's files are
read-only (also to desktop-root through sudo); the server's environment does not leak in; every
process of a desktop runs as one of its own host uids, never as the host's root."""

import os
from pathlib import Path

import pytest
from helpers.desktops import needs_desktops, request, run

from cua_cli.envserver.desktop.desktop import LocalDesktop

pytestmark = [needs_desktops, pytest.mark.slow]
SECRET = "cua-secret-" + os.urandom(6).hex()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    os.environ["CUA_TEST_SERVER_SECRET"] = SECRET  # in the server's environment, as a token would be
    workdir = tmp_path_factory.mktemp("isolation")
    workdir.chmod(0o711)
    desktops = []
    try:
        for _ in range(2):
            desktops.append(LocalDesktop(workdir, "127.0.0.1", (1024, 768)))
        yield desktops
    finally:
        del os.environ["CUA_TEST_SERVER_SECRET"]
        for d in desktops:
            d.close()
            assert d.sandbox.processes() == []


def url(d):
    return f"http://127.0.0.1:{d.port}"


def sh(d, script):
    return run(url(d), script, shell=True)


def test_processes_of_another_desktop_are_invisible_and_untouchable(pair):
    a, b = pair
    sh(b, "sleep 4242 >/dev/null 2>&1 &")
    assert "sleep 4242" in sh(b, "ps -ef")["output"]
    assert "sleep 4242" not in sh(a, "ps -ef")["output"]
    assert sh(a, "pkill -f 'slee[p] 4242'")["returncode"] == 1  # nothing matched
    victim = next(p for p in b.sandbox.processes() if b"sleep\x004242" in Path(f"/proc/{p}/cmdline").read_bytes())
    assert sh(a, f"echo password | sudo -S kill -9 {victim}")["returncode"] != 0  # host pid: not in a's namespace
    assert "sleep 4242" in sh(b, "ps -ef")["output"]
    assert sh(a, "ps -e --no-headers | wc -l")["output"].strip() == sh(a, "ls /proc | grep -c '^[0-9]'")["output"].strip()


def test_files_of_another_desktop_are_out_of_reach(pair):
    a, b = pair
    assert sh(a, "echo mine > ~/Desktop/private.txt; cat ~/Desktop/private.txt")["output"] == "mine\n"
    assert sh(b, "cat ~/Desktop/private.txt")["returncode"] != 0
    assert sh(b, f"ls {a.sandbox.dir}")["returncode"] != 0  # the host path of a's home does not exist in b
    assert sh(a, "echo a > /tmp/a-only")["returncode"] == 0
    listing = sh(b, "echo t > /tmp/t && ls /tmp")["output"].split()
    assert "t" in listing and "a-only" not in listing  # a private /tmp (a checkout under /tmp shows its path too)


def test_no_api_of_the_host_is_reachable(pair):
    a, b = pair
    code = ("import socket,sys\ns=socket.socket()\ns.settimeout(3)\n"
            "print(s.connect_ex(('127.0.0.1', int(sys.argv[1]))))")
    for port in (b.port, a.port):
        out = run(url(a), ["python3", "-c", code, str(port)])
        assert out["output"].strip() == "111", out  # ECONNREFUSED: only this desktop's own loopback
    interfaces = run(url(a), ["python3", "-c", "import socket; print([n for _, n in socket.if_nameindex()])"])
    assert interfaces["output"] == "['lo']\n"
    assert sh(a, "ls /sys/class/net")["output"].split() == ["lo"]


def test_the_hosts_files_are_read_only_even_to_sudo(pair):
    a, _ = pair
    target = os.path.join(REPO, "cua-desktop-wrote-this")
    for script in (f"touch {target}", "touch /root/x", "echo x >> /etc/hostname", "touch /usr/bin/x",
                   f"echo password | sudo -S touch {target}",
                   "echo password | sudo -S sh -c 'echo x >> /usr/bin/x'",
                   "echo password | sudo -S mount -o remount,rw /usr",
                   "echo password | sudo -S umount -l /usr"):
        assert sh(a, script)["returncode"] != 0, script
    assert sh(a, "echo password | sudo -S touch /root/x")["returncode"] == 0  # desktop-root's own /root
    assert not os.path.exists(target) and not os.path.exists("/root/x") and not os.path.exists("/usr/bin/x")
    shown = sh(a, f"ls -A {REPO}")["output"].split()  # at most the path to the venv, not the repo or its runs
    assert not {"cua_cli", "tests", "results", "README.md"} & set(shown)


def test_sudo_works_as_osworlds_tasks_expect(pair):
    a, _ = pair
    out = sh(a, "echo password | sudo -S id -u")
    assert out["output"] == "0\n" and out["returncode"] == 0
    assert sh(a, "echo password | sudo -S sh -c 'echo made > /root/f; cat /root/f'")["output"] == "made\n"
    assert sh(a, "echo nope | sudo -S true")["returncode"] == 1
    assert sh(a, "sudo true")["returncode"] == 1  # no terminal, no -S: refused
    assert sh(a, "printf 'password\\nrest\\n' | sudo -S cat")["output"] == "rest\n"  # stdin after the password
    assert sh(a, "echo password | sudo -S -u user id -un")["output"] == "user\n"


def test_sudo_remembers_the_password_as_ubuntus_does(pair):
    """For 15 minutes, per terminal or (no terminal) per parent process, until `sudo -k`: the pattern
    `echo password | sudo -S a && sudo b` of OSWorld's task configs."""
    a, _ = pair
    out = sh(a, "echo password | sudo -S mkdir /root/d; sudo -n touch /root/d/two && sudo ls /root/d")
    assert out["returncode"] == 0 and out["output"] == "two\n", out
    # Another shell (another parent) has given no password; -k forgets it, as sudo does.
    assert sh(a, "(sudo -n true) && echo yes || echo no")["output"] == "no\n"
    assert sh(a, "echo password | sudo -S true; sudo -k; sudo -n true")["returncode"] == 1
    # On a terminal: the password once, then none on that terminal.
    script = ("import os, pty, sys\n"
              "pid, fd = pty.fork()\n"
              "if pid == 0:\n"
              "    os.execvp('sh', ['sh', '-c', 'sudo true && sudo -n id -u'])\n"
              "out = b''\n"
              "while True:\n"
              "    try:\n"
              "        chunk = os.read(fd, 1024)\n"
              "    except OSError:\n"
              "        break\n"
              "    if not chunk:\n"
              "        break\n"
              "    out += chunk\n"
              "    if b'password for' in chunk:\n"
              "        os.write(fd, b'password\\n')\n"
              "sys.stdout.write(out.decode())\n")
    out = run(url(a), ["python3", "-c", script])
    assert out["output"].count("password for user") == 1 and out["output"].rstrip().endswith("0"), out


def test_the_servers_environment_does_not_leak_in(pair):
    a, _ = pair
    assert SECRET not in sh(a, "env")["output"]
    # Every process's environment, read as desktop-root; the secret travels in a file, not in argv.
    scan = b"for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done | grep -cF -f /tmp/pattern\n"
    for name, data in (("scan.sh", scan), ("pattern", SECRET.encode())):
        request(url(a) + "/setup/upload", "POST", form={"file_path": f"/tmp/{name}"}, files={"file_data": (name, data)})
    assert sh(a, "echo password | sudo -S sh /tmp/scan.sh")["output"] == "0\n"
    request(url(a) + "/setup/upload", "POST", form={"file_path": "/tmp/pattern"}, files={"file_data": ("p", b"DISPLAY=:0")})
    assert int(sh(a, "echo password | sudo -S sh /tmp/scan.sh")["output"]) > 3  # the scan does see environments
    # PID 1 itself came from the host's root: not even desktop-root may read it
    assert "Permission denied" in sh(a, "echo password | sudo -S cat /proc/1/environ")["error"]


def test_every_desktop_process_runs_as_its_own_host_uids(pair):
    for d in pair:
        ns = d.sandbox.pid_namespace()
        inside = [p for p in os.listdir("/proc") if p.isdigit() and _ns(p) == ns]
        assert inside and all(os.stat(f"/proc/{p}").st_uid >= d.sandbox.uid_base for p in inside)
    assert pair[0].sandbox.uid_base != pair[1].sandbox.uid_base


def _ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None
