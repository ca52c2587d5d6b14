"""One desktop's sandbox, seen from the env server: start it, learn when it is ready, kill it whole.

The launcher (guest/launcher.py) runs as root, builds the desktop's file system and forks the
desktop's PID 1 inside new user/PID/mount/IPC/network/UTS namespaces. Here we write the user
namespace's maps: desktop uids 0-65535 are host uids uid_base.. uid_base+65535, a range no host
account uses and distinct per desktop, so host uid 0 is never mapped and desktop-root is nobody on
the host. Killing PID 1 makes the kernel kill every process of the namespace, so teardown is one
signal, then a wait on a pidfd for PID 1's exit (which comes after its namespace is empty).

What a desktop may take of the host (limits.py) is set here too: the launcher joins the desktop's
cgroup before it forks anything, and builds the desktop's disk before it builds the rest.
"""

import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cua_cli.envserver.desktop.limits import DISK_FULL_BYTES, Cgroups, DesktopQuota, describe_bytes

GUEST = Path(__file__).resolve().parent / "guest"
UID_SPAN = 65536
LAUNCHER_REAP_S = 2.0  # how long the launcher gets to reap a killed PID 1 and exit by itself
_slots = itertools.count()
_slot_lock = threading.Lock()
_base_slot = 16 + os.getpid() % 4096  # two servers on one host rarely share a uid range


class SandboxError(RuntimeError):
    """The desktop did not start (its log's tail says why)."""


def _python_dirs() -> list[str]:
    """The venv (pyautogui, mss, Xlib for the executor) and the interpreter it was made from."""
    dirs = {sys.prefix, os.path.realpath(sys.base_prefix)}
    return sorted(d for d in dirs if d not in ("/usr", "/usr/local"))


class Sandbox:
    def __init__(self, workdir: Path, screen: tuple[int, int], session: str = "gnome", ready_timeout: float = 180.0,
                 limits: DesktopQuota = DesktopQuota(enforce=False), cgroups: Cgroups | None = None,
                 web: bool = False):
        with _slot_lock:
            slot = _base_slot + next(_slots) % 60000
        self.uid_base = slot * UID_SPAN
        self.dir = workdir
        self.screen = screen
        self.session = session
        self.web = web  # its apps are pointed at its proxy (web.py serves it on the host)
        self.limits = limits if cgroups is not None else DesktopQuota(enforce=False)
        self._cgroups = cgroups
        self.cgroup = None
        self.launcher: subprocess.Popen | None = None
        self.init_pid: int | None = None
        self._pidfd: int | None = None
        self.executor_pid: int | None = None  # in the desktop's PID namespace
        self._kill_lock = threading.Lock()  # the pool's limit watcher and a release may kill at once
        self._start(ready_timeout)

    @property
    def socket_path(self) -> str:
        return str(self.dir / "sock" / "exec.sock")

    def _start(self, ready_timeout: float) -> None:
        d, base = self.dir, self.uid_base
        folders = [("root", 0, 0o755), ("sock", base + 1000, 0o700), ("etc", 0, 0o755)]
        if not self.limits.enforce:  # else home is on the desktop's own disk (the launcher makes it)
            folders.append(("home", base + 1000, 0o700))
        for sub, owner, mode in folders:
            (d / sub).mkdir(parents=True)
            os.chown(d / sub, owner, owner)
            os.chmod(d / sub, mode)
        config = {"root": str(d / "root"), "home": str(d / "home"), "sock": str(d / "sock"), "etc": str(d / "etc"),
                  "uid_base": base, "screen": list(self.screen), "guest_dir": str(GUEST),
                  "python_dirs": _python_dirs(), "venv": sys.prefix, "hostname": "desktop",
                  "session": self.session, "web": self.web}
        if self.limits.enforce:
            config.update(disk_bytes=self.limits.disk, disk_image=str(d / "disk.img"), disk_dir=str(d / "disk"))
        ready_r, ready_w = os.pipe()
        config["ready_fd"] = ready_w
        log = open(d / "launcher.log", "wb")  # noqa: SIM115 - closed once the launcher holds it
        try:
            # The launcher's env is empty: no secret of ours goes in.
            self.launcher = subprocess.Popen(
                [sys.executable, "-s", str(GUEST / "launcher.py")],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env={}, start_new_session=True,
                pass_fds=(ready_w,))
            if self._cgroups is not None:  # before the config: the launcher forks nothing until it has it
                self.cgroup = self._cgroups.create(d.name, self.limits)
                self.cgroup.add(self.launcher.pid)
            self.launcher.stdin.write(json.dumps(config).encode() + b"\n")
            self.launcher.stdin.flush()
        except BaseException:
            self.kill()
            raise
        finally:
            os.close(ready_w)
            log.close()
        try:
            self._handshake(ready_r, ready_timeout)
        except BaseException:
            self.kill()
            raise
        finally:
            os.close(ready_r)

    def _readline(self, deadline: float) -> str:
        out = self.launcher.stdout
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([out], [], [], left)[0]:
            raise SandboxError(f"desktop start timed out{self._log_tail()}")
        line = out.readline().decode().strip()
        if not line:
            raise SandboxError(f"desktop launcher exited{self._log_tail()}")
        return line

    def _handshake(self, ready_r: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if self._readline(deadline) != "unshared":
            raise SandboxError(f"unexpected launcher output{self._log_tail()}")
        pid, base = self.launcher.pid, self.uid_base
        Path(f"/proc/{pid}/uid_map").write_text(f"0 {base} {UID_SPAN}\n")
        Path(f"/proc/{pid}/gid_map").write_text(f"0 {base} {UID_SPAN}\n")
        self.launcher.stdin.write(b"go\n")
        self.launcher.stdin.flush()  # stdin stays open: it is the desktop's lifeline
        line = self._readline(deadline)
        if not line.startswith("init "):
            raise SandboxError(f"unexpected launcher output {line!r}{self._log_tail()}")
        self.init_pid = int(line.split()[1])
        self._pidfd = os.pidfd_open(self.init_pid)
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([ready_r], [], [], left)[0]:
            raise SandboxError(f"desktop session did not become ready{self._log_tail()}")
        ready = os.read(ready_r, 100).decode()
        if not ready.startswith("ready "):
            raise SandboxError(f"desktop session failed{self._log_tail()}")
        self.executor_pid = int(ready.split()[1])

    def _log_tail(self) -> str:
        try:
            tail = (self.dir / "launcher.log").read_text(errors="replace").strip()[-1500:]
        except OSError:
            return ""
        return f": {tail}" if tail else ""

    def alive(self) -> bool:
        return self._pidfd is not None and not select.select([self._pidfd], [], [], 0)[0]

    def pid_namespace(self) -> str | None:
        try:
            return os.readlink(f"/proc/{self.init_pid}/ns/pid") if self.init_pid else None
        except OSError:
            return None

    def limit_hit(self) -> str | None:
        """The limit this desktop has hit ("kind: what happened"), or None."""
        if self.cgroup is not None and (hit := self.cgroup.hit()):
            return hit
        if self.limits.enforce and self.init_pid is not None:
            try:
                st = os.statvfs(f"/proc/{self.init_pid}/root/home/user")
            except OSError:
                return None  # gone, or being torn down
            if st.f_bavail * st.f_frsize < DISK_FULL_BYTES:
                return f"disk: home and /tmp are full at the desktop's disk limit of {describe_bytes(self.limits.disk)}"
        return None

    def kill(self, timeout: float = 10.0) -> None:
        """Kill every process of the desktop and wait until they are gone; then remove its files."""
        with self._kill_lock:
            self._kill(timeout)

    def _kill(self, timeout: float) -> None:
        init_gone = False
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            init_gone = bool(select.select([self._pidfd], [], [], timeout)[0])
            os.close(self._pidfd)
            self._pidfd = None
        if self.launcher is not None:
            # The launcher reaps PID 1 and exits by itself: killed first, it would leave PID 1's zombie to
            # the host's init, which may reap it seconds later (and _wait_uids_gone waits for that).
            if init_gone:
                try:
                    self.launcher.wait(LAUNCHER_REAP_S)
                except subprocess.TimeoutExpired:
                    pass
            if self.launcher.poll() is None:
                self.launcher.kill()
            self.launcher.wait(timeout)
            for f in (self.launcher.stdin, self.launcher.stdout):
                try:
                    f.close()
                except OSError:
                    pass
        self._wait_uids_gone(timeout)
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def processes(self) -> list[int]:
        """Host pids of processes running as one of this desktop's uids (none once it is killed)."""
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    uid = entry.stat().st_uid
                except OSError:
                    continue
                if self.uid_base <= uid < self.uid_base + UID_SPAN:
                    found.append(int(entry.name))
        return found

    def _wait_uids_gone(self, timeout: float) -> None:
        # PID 1's exit already waited for the namespace to empty; this only double-checks.
        deadline = time.monotonic() + timeout
        while self.processes():
            if time.monotonic() > deadline:
                raise SandboxError(f"processes of desktop {self.dir.name} outlived its teardown")
            time.sleep(0.01)

