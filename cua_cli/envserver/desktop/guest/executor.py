"""A desktop's executor: runs inside the sandbox as the desktop's user and does what OSWorld's in-VM
server does, for the env server, which speaks HTTP outside (the desktop has no network).

It listens on /run/cua/exec.sock (a host directory bound into the sandbox); each connection carries
wire.py messages, one request and one answer at a time, so the server opens as many connections as
it has requests in flight. Each answer is {"http": status, ...} plus "json", "text", or a body,
because the route semantics (paths with ~/, 404s, messages) are OSWorld's and live here, next to
the files and windows they describe.
"""

import array
import os
import platform
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

import ports
import screen_share
import wire
from input_log import InputLog
from recording import Recorder

HOME = os.path.expanduser("~")
SOCKET = "/run/cua/exec.sock"
TIMEOUT = 120
PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "  # OSWorld's client
GUEST = os.path.dirname(os.path.abspath(__file__))
# OSWorld's tasks find Chrome's windows by the title suffix "Google Chrome"; here Chrome is Debian's
# Chromium, whose titles end in "Chromium".
BRAND, BRAND_HERE = "Google Chrome", "Chromium"


class Zygote:
    """The forker of zygote.py; restarted when it is gone (user code may kill it)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sock = None
        self.start()

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        subprocess.Popen([sys.executable, os.path.join(GUEST, "zygote.py"), str(theirs.fileno())],
                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, cwd=HOME)
        theirs.close()
        if ours.recv(16) != b"ready":
            raise RuntimeError("zygote did not start")
        self.sock = ours

    def spawn(self, code: str) -> tuple[int, int, int, int]:
        """Fork a child running code; returns its pid and the read ends (stdout, stderr, status).
        A zygote that died (user code may kill it) is replaced, and the command sent again: no "P"
        line means it never forked, so the code did not run."""
        for attempt in (0, 1):
            started = self._try_spawn(code)
            if started:
                return started
            with self.lock:
                self.sock.close()
                self.start()
        raise RuntimeError("the pyautogui forker does not start commands")

    def _try_spawn(self, code: str) -> tuple[int, int, int, int] | None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        st_r, st_w = os.pipe()
        try:
            with self.lock:
                self.sock.sendmsg([code.encode("utf-8", "surrogateescape")],
                                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [out_w, err_w, st_w]))])
        except OSError:
            for fd in (out_r, err_r, st_r):
                os.close(fd)
            return None
        finally:
            for fd in (out_w, err_w, st_w):
                os.close(fd)
        first = b""
        while not first.endswith(b"\n"):
            chunk = os.read(st_r, 1)
            if not chunk:
                for fd in (out_r, err_r, st_r):
                    os.close(fd)
                return None
            first += chunk
        return int(first[1:]), out_r, err_r, st_r


def _collect(pid: int, fds: dict, timeout: float, command) -> tuple[bytes, bytes, int]:
    """Read stdout, stderr and the exit status of a zygote child until all close, or kill it."""
    sel = selectors.DefaultSelector()
    chunks = {name: [] for name in fds}
    for name, fd in fds.items():
        sel.register(fd, selectors.EVENT_READ, name)
    end = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = end - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(command, timeout)
            for key, _ in sel.select(left):
                data = os.read(key.fd, 1 << 16)
                if data:
                    chunks[key.data].append(data)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        for fd in fds.values():
            os.close(fd)
    status = b"".join(chunks["status"]).strip()
    return b"".join(chunks["out"]), b"".join(chunks["err"]), int(status[1:]) if status.startswith(b"X") else -9


def _text(data: bytes) -> str:
    # subprocess.run(text=True): the locale's encoding, universal newlines
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _png(raw, width: int, height: int, x: int, y: int, level: int = 1) -> bytes:
    """A grabbed screen (a bytearray, left as it was) as PNG, with a cursor drawn in as OSWorld's server
    pastes one: an arrow with its tip at the pointer."""
    import numpy as np
    import png
    from PIL import Image, ImageDraw
    bgra = np.frombuffer(raw, np.uint8).reshape(height, width, 4)
    patch = bgra[y:y + 22, x:x + 14, :3]
    under = patch.copy()
    if patch.size:
        img = Image.fromarray(np.ascontiguousarray(patch))  # white and black: channel order is moot
        arrow = [(0, 0), (0, 17), (4, 13), (7, 20), (10, 19), (7, 12), (12, 12)]
        ImageDraw.Draw(img).polygon(arrow, fill="white", outline="black")
        patch[...] = np.asarray(img)
    try:
        return png.encode_bgra(bgra, level)
    finally:
        patch[...] = under  # a kept frame is drawn on again


class Executor:
    def __init__(self):
        self.zygote = Zygote()
        self.screen_lock = threading.Lock()
        self._mss = None
        self._xdisplay = None
        self.recorder = Recorder()
        self.inputs = InputLog(self._grab, os.environ["DISPLAY"])
        self.inputs_lock = threading.Lock()

    # -- /execute ---------------------------------------------------------------------------------
    def execute(self, req: dict, body: bytes) -> dict:
        shell = bool(req.get("shell", False))
        command = req.get("command", "" if shell else [])
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        if isinstance(command, list):  # OSWorld expands arguments that start with ~/
            command = [os.path.expanduser(a) if isinstance(a, str) and a.startswith("~/") else a for a in command]
        try:
            if (not shell and isinstance(command, list) and len(command) == 3 and command[0] in ("python", "python3")
                    and command[1] == "-c" and isinstance(command[2], str) and command[2].startswith(PYAUTOGUI_PREFIX)
                    and len(command[2]) < 100_000):
                pid, out_r, err_r, st_r = self.zygote.spawn(command[2])
                out, err, code = _collect(pid, {"out": out_r, "err": err_r, "status": st_r}, TIMEOUT, command)
                output, error = _text(out), _text(err)
            else:
                result = subprocess.run(command, capture_output=True, shell=shell, text=True, timeout=TIMEOUT,
                                        stdin=subprocess.DEVNULL, check=False)
                output, error, code = result.stdout, result.stderr, result.returncode
            return {"http": 200, "json": {"status": "success", "output": output, "error": error, "returncode": code}}
        except Exception as e:  # noqa: BLE001 - OSWorld's server answers any failure as this 500
            return {"http": 500, "json": {"status": "error", "message": str(e)}}

    def launch(self, req: dict, body: bytes) -> dict:
        shell = bool(req.get("shell", False))
        command = req.get("command", "" if shell else [])
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        if isinstance(command, list):
            command = [os.path.expanduser(a) if isinstance(a, str) and a.startswith("~/") else a for a in command]
        try:
            subprocess.Popen(command, shell=shell, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
            shown = command if shell else " ".join(command)
            return {"http": 200, "text": f"{shown} launched successfully"}
        except Exception as e:  # noqa: BLE001 - as OSWorld's server
            return {"http": 500, "text": f"Failed to launch application. Error: {e}"}

    # -- the screen ---------------------------------------------------------------------------------
    def screenshot(self, req: dict, body: bytes) -> dict:
        return {"http": 200, "type": "image/png", "body": _png(*self._grab(), int(req.get("level", 1)))}

    def _grab(self) -> tuple[bytearray, int, int, int, int]:
        """The screen as X's BGRA bytes, its size, and where the pointer is."""
        import mss
        with self.screen_lock:
            if self._mss is None:
                self._mss = getattr(mss, "MSS", mss.mss)()
            shot = self._mss.grab(self._mss.monitors[0])
            x, y = self._pointer()
        return shot.raw, shot.width, shot.height, x, y

    def _pointer(self) -> tuple[int, int]:
        from Xlib.display import Display
        if self._xdisplay is None:
            self._xdisplay = Display(os.environ["DISPLAY"])
        p = self._xdisplay.screen().root.query_pointer()
        return p.root_x, p.root_y

    def screen_size(self, req: dict, body: bytes) -> dict:
        from Xlib.display import Display
        with self.screen_lock:
            if self._xdisplay is None:
                self._xdisplay = Display(os.environ["DISPLAY"])
            s = self._xdisplay.screen()
            return {"http": 200, "json": {"width": s.width_in_pixels, "height": s.height_in_pixels}}

    def start_recording(self, req: dict, body: bytes) -> dict:
        size = self.screen_size({}, b"")["json"]
        return self.recorder.start(size["width"], size["height"])

    def end_recording(self, req: dict, body: bytes) -> dict:
        return self.recorder.stop()

    # -- a person's input, for a demonstration (cua's own routes) ---------------------------------------
    def input_start(self, req: dict, body: bytes) -> dict:
        with self.inputs_lock:
            if not self.inputs.running:  # a retried start finds it running: the same recording goes on
                self.inputs.start()
        return {"http": 200, "json": {"status": "success"}}

    def input_read(self, req: dict, body: bytes) -> dict:
        return {"http": 200, "json": self.inputs.read(int(req.get("after", 0)))}

    def input_frame(self, req: dict, body: bytes) -> dict:
        frame = self.inputs.frame(int(req.get("id", -1)))
        if frame is None:
            return {"http": 404, "json": {"status": "error", "message": "no such frame (any more)"}}
        return {"http": 200, "type": "image/png", "body": _png(*frame)}

    def input_stop(self, req: dict, body: bytes) -> dict:
        with self.inputs_lock:
            self.inputs.stop()
        return {"http": 200, "json": {"status": "success"}}

    def cursor_position(self, req: dict, body: bytes) -> dict:
        with self.screen_lock:
            return {"http": 200, "json": list(self._pointer())}

    def window_size(self, req: dict, body: bytes) -> dict:
        wanted = str(req.get("app_class_name", ""))
        out = subprocess.run(["wmctrl", "-lGx"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():  # id desktop x y w h class host title
            parts = line.split(None, 7)
            if len(parts) >= 7 and wanted and wanted.lower() in parts[6].lower():
                return {"http": 200, "json": {"width": int(parts[4]), "height": int(parts[5])}}
        return {"http": 500, "json": {"error": f"no window of class {wanted}"}}  # OSWorld's server: 500

    # -- files ----------------------------------------------------------------------------------------
    @staticmethod
    def _path(p) -> str:
        return os.path.expandvars(os.path.expanduser(str(p or "")))

    def read_file(self, req: dict, body: bytes) -> dict:
        try:
            with open(self._path(req.get("file_path")), "rb") as f:
                return {"http": 200, "type": "application/octet-stream", "body": f.read()}
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return {"http": 404, "text": "File not found"}
        except OSError as e:
            return {"http": 500, "text": f"Failed to read file: {e}"}

    def upload(self, req: dict, body: bytes) -> dict:
        path = self._path(req.get("file_path"))
        try:
            with open(path, "wb") as f:
                f.write(body)
            return {"http": 200, "text": "File Uploaded"}
        except OSError as e:
            return {"http": 500, "text": f"Failed to upload file: {e}"}

    def list_directory(self, req: dict, body: bytes) -> dict:
        start = self._path(req.get("path"))
        if not os.path.isdir(start):  # OSWorld's server: 400, for a missing path as for a file
            return {"http": 400, "json": {"error": "The provided path is not a directory"}}

        def tree(d):
            node = {"type": "directory", "name": os.path.basename(d), "children": []}
            for entry in os.listdir(d):
                full = os.path.join(d, entry)
                node["children"].append(tree(full) if os.path.isdir(full) and not os.path.islink(full)
                                        else {"type": "file", "name": entry})
            return node
        try:
            return {"http": 200, "json": {"directory_tree": tree(start)}}
        except OSError as e:
            return {"http": 500, "json": {"error": str(e)}}

    def desktop_path(self, req: dict, body: bytes) -> dict:
        return {"http": 200, "json": {"desktop_path": os.path.join(HOME, "Desktop")}}

    def platform(self, req: dict, body: bytes) -> dict:
        return {"http": 200, "text": platform.system()}

    # -- windows, apps ----------------------------------------------------------------------------------
    def open_file(self, req: dict, body: bytes) -> dict:
        path = self._path(req.get("path"))
        if not os.path.exists(path):
            return {"http": 404, "text": f"File not found: {path}"}
        subprocess.Popen(["xdg-open", path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        return {"http": 200, "text": "File opened successfully"}

    def _wmctrl(self, req: dict, action: str, done: str) -> dict:
        name = str(req.get("window_name", ""))
        argv = ["wmctrl"] + (["-x"] if req.get("by_class") else []) + (["-F"] if req.get("strict") else []) + [action]
        result = subprocess.run(argv + [name], capture_output=True, text=True, check=False)
        if result.returncode and not req.get("by_class") and BRAND in name:
            result = subprocess.run(argv + [name.replace(BRAND, BRAND_HERE)], capture_output=True, text=True,
                                    check=False)
        if result.returncode == 1:  # wmctrl: no window matched; OSWorld's server answers 404
            return {"http": 404, "text": f"Window {name} not found"}
        if result.returncode:
            return {"http": 500, "text": f"Failed to {action} window {name}: {result.stderr.strip()}"}
        return {"http": 200, "text": done}

    def activate_window(self, req: dict, body: bytes) -> dict:
        return self._wmctrl(req, "-a", "Window activated successfully")

    def close_window(self, req: dict, body: bytes) -> dict:
        return self._wmctrl(req, "-c", "Window closed successfully")

    def change_wallpaper(self, req: dict, body: bytes) -> dict:
        path = self._path(req.get("path"))
        if not os.path.exists(path):
            return {"http": 404, "text": f"File not found: {path}"}
        subprocess.run(["gsettings", "set", "org.gnome.desktop.background", "picture-uri", f"file://{path}"], check=False)
        return {"http": 200, "text": "Wallpaper changed successfully"}

    def wallpaper(self, req: dict, body: bytes) -> dict:
        uri = subprocess.run(["gsettings", "get", "org.gnome.desktop.background", "picture-uri"],
                             capture_output=True, text=True, check=False).stdout.strip().strip("'")
        return self.read_file({"file_path": uri.removeprefix("file://")}, b"")

    # -- accessibility (Debian's pyatspi, in the system Python) ----------------------------------------
    def _a11y(self, mode: str) -> dict:
        result = subprocess.run(["/usr/bin/python3", os.path.join(GUEST, "a11y.py"), mode],
                                capture_output=True, text=True, timeout=60, check=False)
        if result.returncode:
            return {"http": 500, "json": {"error": result.stderr.strip()[-2000:]}}
        return {"http": 200, "text_json": result.stdout}

    def accessibility(self, req: dict, body: bytes) -> dict:
        return self._a11y("tree")

    def terminal(self, req: dict, body: bytes) -> dict:
        return self._a11y("terminal")

    def ping(self, req: dict, body: bytes) -> dict:
        return {"http": 200, "json": {"pid": os.getpid()}}


OPS = {name for name in dir(Executor) if not name.startswith("_")}


def handle(executor: Executor, conn: socket.socket) -> None:
    with conn:
        while True:
            try:
                req, body = wire.recv(conn)
            except (wire.WireError, OSError):
                return
            op = req.get("op")
            try:
                if op not in OPS:
                    raise ValueError(f"unknown op {op!r}")
                answer = getattr(executor, op)(req.get("args") or {}, body)
            except Exception as e:  # noqa: BLE001 - every request gets an answer
                answer = {"http": 500, "json": {"status": "error", "message": f"{type(e).__name__}: {e}"}}
            payload = answer.pop("body", b"")
            try:
                wire.send(conn, answer, payload)
            except OSError:
                return


def _wait_for_window_manager(timeout: float = 10.0) -> None:
    import time

    from Xlib.display import Display
    display = Display(os.environ["DISPLAY"])
    atom = display.intern_atom("_NET_SUPPORTING_WM_CHECK")
    deadline = time.monotonic() + timeout
    while display.screen().root.get_full_property(atom, 0) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    display.close()


# LibreOffice's user settings as OSWorld's image has them: its tasks save a spreadsheet with one
# ctrl+s (no "keep this format?" question) and start with no tip-of-the-day dialog in the way.
LIBREOFFICE_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse">\
<value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="WarnAlienFormat" oor:op="fuse">\
<value>false</value></prop></item>
</oor:items>
"""


# VLC's, likewise: no first-run question about network access in front of the player, and its web
# interface on (port 8080, password "password", as OSWorld's setup guide has the image's VLC): a
# task's plain `vlc` launch serves the status.xml that vlc_playing_info reads.
VLC_SETTINGS = "[qt]\nqt-privacy-ask=0\n[core]\nextraintf=http\n[lua]\nhttp-password=password\n"


def seed_home() -> None:
    """The user's home as a fresh desktop of OSWorld's image starts it."""
    os.makedirs(os.path.join(HOME, "Desktop"), exist_ok=True)
    for folder, name, text in ((".config/libreoffice/4/user", "registrymodifications.xcu", LIBREOFFICE_PROFILE),
                               (".config/vlc", "vlcrc", VLC_SETTINGS)):
        os.makedirs(os.path.join(HOME, folder), exist_ok=True)
        path = os.path.join(HOME, folder, name)
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(text)


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    executor = Executor()
    seed_home()
    if os.path.exists(SOCKET):
        os.unlink(SOCKET)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(SOCKET)
    server.listen(64)
    ports.publish(web="http_proxy" in os.environ)
    screen_share.serve()
    _wait_for_window_manager()  # wmctrl-based routes need it
    executor.screenshot({}, b"")  # warm the grab and the encoder before saying ready
    ready_fd = int(os.environ.pop("CUA_READY_FD"))
    os.write(ready_fd, f"ready {os.getpid()}\n".encode())
    os.close(ready_fd)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(executor, conn), daemon=True).start()


if __name__ == "__main__":
    main()
