"""Inside a desktop, PID 1's two jobs besides starting the session: reap every orphan, and run
commands as desktop-root for the sudo shim (sudo.py) when it brings the password `password`, as on
OSWorld's image. Desktop-root is root only inside the desktop's user namespace."""

import array
import json
import os
import socket
import struct
import threading
import time

SOCKET = "/run/sudo.sock"
PASSWORD = "password"
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USERS = {"root": (0, "/root"), "0": (0, "/root"), "user": (1000, "/home/user"), "1000": (1000, "/home/user")}
STAMP_S = 15 * 60  # Ubuntu's sudo: timestamp_timeout 15, timestamp_type tty


class Stamps:
    """When the password was last given, per terminal (its device and session) or, for a caller with
    no terminal, per parent process (its pid and start time, so a reused pid starts afresh): sudo's
    own keying, so that `echo password | sudo -S a && sudo b` works as on Ubuntu."""

    def __init__(self):
        self._lock = threading.Lock()
        self._given: dict[tuple, float] = {}

    @staticmethod
    def key(conn: socket.socket) -> tuple | None:
        pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        me = _stat(pid)
        if me is None:
            return None
        ppid, session, tty = int(me[1]), int(me[3]), int(me[4])
        if tty:
            return ("tty", tty, session)
        parent = _stat(ppid)
        return ("ppid", ppid, parent[19]) if parent else None

    def fresh(self, key) -> bool:
        with self._lock:
            return key is not None and time.monotonic() - self._given.get(key, -STAMP_S) < STAMP_S

    def give(self, key) -> None:
        if key is not None:
            with self._lock:
                self._given[key] = time.monotonic()

    def reset(self, key) -> None:
        with self._lock:
            self._given.pop(key, None)


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state, ppid, pgrp, session, tty_nr, ...)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


class Reaper:
    """PID 1 must wait() for every process that ends in the namespace; the sudo server learns its own
    children's statuses from here (a second waiter would steal them)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._exited: dict[int, int] = {}
        self._waiting: dict[int, threading.Event] = {}

    def run(self) -> None:
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                threading.Event().wait(0.5)  # nothing to reap yet: sudo may fork later
                continue
            with self._lock:
                self._exited[pid] = status
                event = self._waiting.pop(pid, None)
            if event:
                event.set()

    def wait(self, pid: int) -> int:
        with self._lock:
            if pid not in self._exited:
                event = self._waiting[pid] = threading.Event()
            else:
                event = None
        if event:
            event.wait()
        with self._lock:
            return os.waitstatus_to_exitcode(self._exited.pop(pid))


def _run(request: dict, fds: list[int], session_env: dict, reaper: Reaper) -> int:
    uid, home = USERS.get(str(request.get("user", "root")), (None, None))
    argv = request.get("argv")
    if uid is None or not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        os.write(fds[2], b"sudo: unknown user or empty command\n")
        return 1
    caller = request.get("env") if isinstance(request.get("env"), dict) else {}
    if request.get("preserve_env"):
        env = {str(k): str(v) for k, v in caller.items()}
    else:
        env = {k: v for k, v in session_env.items() if k in ("DISPLAY", "LANG", "XDG_SESSION_TYPE")}
        env.update({k: str(caller[k]) for k in ("TERM", "COLORTERM") if k in caller})
        env.update(PATH=SECURE_PATH, SHELL="/bin/bash")
    name = "root" if uid == 0 else "user"
    env.update(HOME=home, USER=name, LOGNAME=name, SUDO_USER="user", SUDO_UID="1000", SUDO_GID="1000",
               SUDO_COMMAND=" ".join(argv))
    pid = os.fork()
    if pid == 0:  # only async-signal-safe-ish work until exec
        try:
            for i, fd in enumerate(fds[:3]):
                os.dup2(fd, i)
            os.closerange(3, 1 << 16)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                os.chdir(str(request.get("cwd") or home))
            except OSError:
                os.chdir("/")
            os.execvpe(argv[0], argv, env)
        except FileNotFoundError:
            os.write(2, f"sudo: {argv[0]}: command not found\n".encode())
        except BaseException as e:  # noqa: BLE001 - the forked child must reach _exit
            os.write(2, f"sudo: {e}\n".encode())
        os._exit(1)
    return reaper.wait(pid)


def _serve_one(conn: socket.socket, reaper: Reaper, session_env: dict, stamps: Stamps) -> None:
    fds: list[int] = []
    try:
        with conn:
            msg, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * 4))
            for level, kind, data in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += array.array("i", data[: len(data) - len(data) % 4]).tolist()
            request = json.loads(msg)
            key = stamps.key(conn)
            if request.get("reset"):
                stamps.reset(key)
                conn.sendall(b'{"status": "reset"}')
                return
            if request.get("password") is None and not stamps.fresh(key):
                conn.sendall(b'{"status": "need_password"}')
                return
            if request.get("password") is not None:
                if request["password"] != PASSWORD:
                    conn.sendall(b'{"status": "bad_password"}')
                    return
                stamps.give(key)
            if len(fds) != 3:
                conn.sendall(b'{"status": "error", "message": "three file descriptors expected"}')
                return
            code = _run(request, fds, session_env, reaper)
            conn.sendall(json.dumps({"status": "exit", "code": code}).encode())
    except (OSError, ValueError, AttributeError):
        pass
    finally:
        for fd in fds:
            os.close(fd)


def serve(reaper: Reaper, session_env: dict) -> None:
    stamps = Stamps()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(SOCKET)
    os.chmod(SOCKET, 0o666)
    server.listen(16)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve_one, args=(conn, reaper, session_env, stamps), daemon=True).start()
