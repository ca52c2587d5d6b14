"""A stand-in for OSWorld's in-VM server (desktop_env/server/main.py, Flask on port 5000), on 127.0.0.1.

OSWorld's server runs inside a QEMU VM, which cannot run here. This stand-in answers
its HTTP API exactly as OSWorld's does (paths, JSON / form / multipart bodies, status
codes: /file 404 for a missing file, /list_directory 400 for a non-directory,
/window_size 500 when no window has the class, /execute 500 for a command that cannot
run), over a simulated desktop: a temporary folder as its file system, a gsettings
table, a process list, a terminal's text and window sizes. It never runs a command:
it knows the shell commands of tests/data/osworld's task files and answers them from
that state; any other command gets "command not found" (127), as a shell would.
cua's own desktop server (cua_cli/envserver/) replaces it in the end-to-end tests.
"""

import email.parser
import email.policy
import json
import os
import shlex
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs


def tiny_png(width: int = 4, height: int = 3) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\0" + b"\0\0\0" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


GSETTINGS_TYPES = {("org.gnome.desktop.session", "idle-delay"): "uint32"}


class Desktop:
    """The simulated desktop's state; tests change it to play the agent's part."""

    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home" / "user"
        self.home.mkdir(parents=True)
        self.gsettings: dict = {}
        self.processes: list[list[str]] = []
        self.terminal: str | None = None
        self.windows = {"gnome-terminal-server": (1200, 800)}
        self.screen = (1920, 1080)
        self.accessibility = '<desktop-frame name="main"><application name="gnome-terminal-server"/></desktop-frame>'
        self.executed: list = []     # every /execute and /setup/execute body, in order
        self.calls: list[str] = []   # every request path, in order
        self.fail: dict[str, int] = {}  # path -> how many of its next requests answer 500
        self.lock = threading.Lock()

    def path(self, p: str) -> Path:
        """A VM path in the stand-in's folder: ~ is the user's home, / is the folder."""
        p = os.path.expandvars(p)
        if p == "~" or p.startswith("~/"):
            return self.home / p[2:]
        return self.root / p.lstrip("/")

    def run(self, command, shell: bool) -> tuple[str, str, int]:
        """The answer a real desktop gives to the commands the test tasks use."""
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        text = command if isinstance(command, str) else shlex.join(command)
        if text == "mkdir -p ~/Desktop ~/Documents":
            for d in ("Desktop", "Documents"):
                (self.home / d).mkdir(exist_ok=True)
            return "", "", 0
        if text == "test -e ~/Desktop/notes.txt && echo present || echo absent":
            return ("present\n" if (self.home / "Desktop/notes.txt").exists() else "absent\n"), "", 0
        if text == "pgrep -a -x sleep | grep -q ' 31337$' && echo running || echo stopped":
            return ("running\n" if ["sleep", "31337"] in self.processes else "stopped\n"), "", 0
        if isinstance(command, list) and command[:1] == ["gsettings"] and len(command) in (4, 5):
            key = (command[2], command[3])
            if command[1] == "set" and len(command) == 5:
                self.gsettings[key] = command[4]
                return "", "", 0
            if command[1] == "get" and len(command) == 4:
                value = self.gsettings.get(key, "0")
                kind = GSETTINGS_TYPES.get(key)
                return (f"{kind} {value}\n" if kind else f"{value}\n"), "", 0
        if isinstance(command, list) and command[:2] == ["python", "-c"]:
            return "", "", 0  # pyautogui code: recorded in `executed`, never run
        name = text.split()[0] if text.split() else ""
        return "", f"sh: 1: {name}: not found\n", 127


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: with Nagle's algorithm the body waits for the client's
    # delayed ACK (40 ms) on every request of a kept-alive connection
    disable_nagle_algorithm = True
    desktop: Desktop

    def log_message(self, *args):
        pass

    def _send(self, status: int, body, content_type: str = "application/json"):
        if not isinstance(body, bytes):
            body = (json.dumps(body) if content_type == "application/json" else str(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _json(self) -> dict:
        if not self.headers.get("Content-Type", "").startswith("application/json"):
            return {}
        return json.loads(self._body() or b"{}")

    def _form(self) -> dict:
        body = self._body()
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("application/x-www-form-urlencoded"):
            return {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if ctype.startswith("multipart/form-data"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                f"Content-Type: {ctype}\r\n\r\n".encode() + body)
            out = {}
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True)
                out[name] = payload if part.get_filename() else payload.decode()
            return out
        return {}

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def _route(self, method: str):
        d = self.desktop
        path = self.path.split("?")[0]
        with d.lock:
            d.calls.append(path)
            failing = d.fail.get(path, 0)
            if failing:
                d.fail[path] = failing - 1
        if failing:
            self._body()
            return self._send(500, "<h1>Internal Server Error</h1>", "text/html")
        handler = getattr(self, "r_" + path.strip("/").replace("/", "_"), None)
        if handler is None:
            self._body()
            return self._send(404, "<h1>Not Found</h1>", "text/html")
        handler()

    # -- the API, as OSWorld's server answers it

    def r_screenshot(self):
        self._send(200, tiny_png(), "image/png")

    def r_execute(self):
        data = self._json()
        self.desktop.executed.append(data)
        command, shell = data.get("command", "" if data.get("shell") else []), data.get("shell", False)
        if command == ["cua-test-crash"]:
            return self._send(500, {"status": "error", "message": "[Errno 2] No such file or directory"})
        with self.desktop.lock:
            out, err, code = self.desktop.run(command, shell)
        self._send(200, {"status": "success", "output": out, "error": err, "returncode": code})

    r_setup_execute = r_execute

    def r_setup_launch(self):
        data = self._json()
        command = data.get("command")
        if isinstance(command, str) and not data.get("shell"):
            command = shlex.split(command)
        with self.desktop.lock:
            self.desktop.processes.append(command)
        self._send(200, f"{' '.join(command)} launched successfully", "text/html")

    def r_setup_open_file(self):
        path = self._json().get("path")
        if not path:
            return self._send(400, "Path not supplied!", "text/html")
        if not self.desktop.path(path).exists():
            return self._send(404, f"File not found: {path}", "text/html")
        self._send(200, "File opened successfully", "text/html")

    def r_setup_activate_window(self):
        name = self._json().get("window_name")
        if not name:
            return self._send(400, "window_name required", "text/html")
        if name == "No such window":
            return self._send(404, f"Window {name} not found (empty results)", "text/html")
        self._send(200, "Window activated successfully", "text/html")

    def r_setup_close_window(self):
        if "window_name" not in self._json():
            return self._send(400, "window_name required", "text/html")
        self._send(200, "Window closed successfully.", "text/html")

    def r_setup_change_wallpaper(self):
        self._json()
        self._send(200, "Wallpaper changed successfully", "text/html")

    def r_setup_upload(self):
        form = self._form()
        if "file_path" not in form or not isinstance(form.get("file_data"), bytes):
            return self._send(400, {"error": "file_path and file_data are required"})
        target = self.desktop.path(form["file_path"])
        target.parent.mkdir(parents=True, exist_ok=True)  # the stand-in's folders stand for the VM's
        target.write_bytes(form["file_data"])
        self._send(200, "File Uploaded", "text/html")

    def r_file(self):
        form = self._form()
        if "file_path" not in form:
            return self._send(400, {"error": "file_path is required"})
        target = self.desktop.path(form["file_path"])
        if not target.is_file():
            return self._send(404, {"error": "File not found"})
        self._send(200, target.read_bytes(), "application/octet-stream")

    def r_list_directory(self):
        data = self._json()
        if "path" not in data:
            return self._send(400, {"error": "Missing 'path' parameter"})
        start = self.desktop.path(data["path"])
        if not start.is_dir():
            return self._send(400, {"error": "The provided path is not a directory"})

        def tree(p: Path) -> dict:
            return {"type": "directory", "name": p.name, "children": [
                tree(c) if c.is_dir() else {"type": "file", "name": c.name} for c in sorted(p.iterdir())]}
        self._send(200, {"directory_tree": tree(start)})

    def r_accessibility(self):
        self._send(200, {"AT": self.desktop.accessibility})

    def r_terminal(self):
        self._send(200, {"output": self.desktop.terminal})

    def r_platform(self):
        self._send(200, "Linux", "text/html")

    def r_screen_size(self):
        self._body()
        w, h = self.desktop.screen
        self._send(200, {"width": w, "height": h})

    def r_window_size(self):
        form = self._form()
        if "app_class_name" not in form:
            return self._send(400, {"error": "app_class_name is required"})
        size = self.desktop.windows.get(form["app_class_name"].lower())
        if size is None:  # Flask: the view returned None
            return self._send(500, "<h1>Internal Server Error</h1>", "text/html")
        self._send(200, {"width": size[0], "height": size[1]})

    def r_desktop_path(self):
        self._body()
        desktop = self.desktop.home / "Desktop"
        if not desktop.is_dir():
            return self._send(404, {"error": "Unsupported operating system or desktop path not found"})
        self._send(200, {"desktop_path": str(desktop)})


class StandIn:
    """The stand-in server on a free port of 127.0.0.1, in a thread: `url`, `desktop`, `close()`."""

    def __init__(self, root: Path):
        self.desktop = Desktop(root)
        handler = type("Handler", (_Handler,), {"desktop": self.desktop})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Web:
    """A stand-in for the web a `download` fetches from: {path: (status, headers, body)} on 127.0.0.1."""

    def __init__(self, routes: dict):
        self.routes = routes
        self.hits: list[str] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # as _Handler's

            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.hits.append(self.path)
                status, headers, body = outer.routes.get(self.path, (404, {}, b"not here"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
