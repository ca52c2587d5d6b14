"""A desktop's in-VM API: OSWorld's routes and bodies, served outside the sandbox on the desktop's
own port and carried to its executor. Like OSWorld's server it has no authentication: bind it to
127.0.0.1 or a private network only.

GET  /screenshot  /accessibility  /terminal  /platform  /cursor_position
POST /execute  /setup/execute  /setup/launch  /setup/open_file  /setup/activate_window
     /setup/close_window  /setup/change_wallpaper  /setup/upload (multipart file_path, file_data)
     /file (form file_path)  /list_directory  /screen_size  /window_size (form app_class_name)
     /desktop_path  /wallpaper  /setup/download_file (refused: the desktop has no network)

cua's own routes, outside OSWorld's protocol, record a person's input for `cua demo`:
POST /cua/input/start, /cua/input/read (after: the last event seq the caller has; answers the newer
events, the kept frames' times and the desktop's clock), /cua/input/frame (id: a frame as PNG),
/cua/input/stop.

cua's own answer, outside OSWorld's protocol: once the desktop has hit a limit of its host (memory,
processes, disk) every request is answered 503 {"status": "error", "desktop_limit": KIND, "message"}.
"""

from cua_cli.envserver.desktop.client import ExecutorGone
from cua_cli.envserver.desktop.httpbase import APIHandler, HTTPReply

# route -> (method, executor op, fields it takes)
ROUTES = {
    "/screenshot": ("GET", "screenshot", ()),
    "/accessibility": ("GET", "accessibility", ()),
    "/terminal": ("GET", "terminal", ()),
    "/platform": ("GET", "platform", ()),
    "/cursor_position": ("GET", "cursor_position", ()),
    "/execute": ("POST", "execute", ("command", "shell")),
    "/setup/execute": ("POST", "execute", ("command", "shell")),
    "/setup/launch": ("POST", "launch", ("command", "shell")),
    "/setup/open_file": ("POST", "open_file", ("path",)),
    "/setup/activate_window": ("POST", "activate_window", ("window_name", "strict", "by_class")),
    "/setup/close_window": ("POST", "close_window", ("window_name", "strict", "by_class")),
    "/setup/change_wallpaper": ("POST", "change_wallpaper", ("path",)),
    "/file": ("POST", "read_file", ("file_path",)),
    "/list_directory": ("POST", "list_directory", ("path",)),
    "/screen_size": ("POST", "screen_size", ()),
    "/window_size": ("POST", "window_size", ("app_class_name",)),
    "/desktop_path": ("POST", "desktop_path", ()),
    "/wallpaper": ("POST", "wallpaper", ()),
    "/start_recording": ("POST", "start_recording", ()),
    "/end_recording": ("POST", "end_recording", ()),
    "/cua/input/start": ("POST", "input_start", ()),
    "/cua/input/read": ("POST", "input_read", ("after",)),
    "/cua/input/frame": ("POST", "input_frame", ("id",)),
    "/cua/input/stop": ("POST", "input_stop", ()),
}


class DesktopHandler(APIHandler):
    def route(self, method: str, path: str, fields: dict, files: dict) -> None:
        desktop = self.server.desktop
        self._refuse_at_limit(known_only=True)
        if path == "/setup/upload":
            if "file_path" not in fields or "file_data" not in files:
                self.send_bytes(400, b"No file path or file data provided", "text/plain")
                return
            self._forward("upload", {"file_path": fields["file_path"]}, files["file_data"])
            return
        if path == "/setup/download_file":
            raise HTTPReply(500, {"status": "error", "message": "this desktop has no network: fetch the file on the "
                              "client and send it with /setup/upload"})
        if path not in ROUTES:
            raise HTTPReply(404, {"status": "error", "message": f"no such route {path}"})
        allowed, op, names = ROUTES[path]
        if method != allowed and not (allowed == "GET" and path == "/screenshot" and method == "POST"):
            raise HTTPReply(405, {"status": "error", "message": f"use {allowed}"})
        args = {k: fields[k] for k in names if k in fields}
        desktop.touch()
        self._forward(op, args, b"")

    def _refuse_at_limit(self, known_only: bool = False) -> None:
        """503 once the desktop has hit a limit. Its counters are read after a request ran (and twice a
        second by the pool's watcher), so before one only what is already known is looked at."""
        desktop = self.server.desktop
        hit = desktop.stopped_at_limit if known_only else desktop.check_limits()
        if hit:
            kind, _, what = hit.partition(": ")
            raise HTTPReply(503, {"status": "error", "desktop_limit": kind,
                                  "message": f"the desktop was stopped: {what}"})

    def _forward(self, op: str, args: dict, body: bytes) -> None:
        try:
            header, payload = self.server.desktop.executor.call(op, args, body)
        except ExecutorGone as e:
            self._refuse_at_limit()
            raise HTTPReply(503, {"status": "error", "message": str(e)}) from None
        self._refuse_at_limit()  # what the request ran may have taken the desktop over a limit
        status = int(header.get("http", 500))
        if "json" in header:
            self.send_json(status, header["json"])
        elif "text_json" in header:
            self.send_bytes(status, str(header["text_json"]).encode(), "application/json")
        elif "text" in header:
            self.send_bytes(status, str(header["text"]).encode(), "text/html; charset=utf-8")
        else:
            self.send_bytes(status, payload, str(header.get("type", "application/octet-stream")))
