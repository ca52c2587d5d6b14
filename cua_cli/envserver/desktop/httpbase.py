"""What the desktop API and the allocation API share: a keep-alive handler, bodies (JSON, form or
multipart) read with a size bound, and replies."""

import json
import logging
import select
import socket
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

log = logging.getLogger(__name__)


class HTTPReply(Exception):
    """Answer now with this status and JSON body."""

    def __init__(self, status: int, payload: Any):
        super().__init__(str(payload))
        self.status, self.payload = status, payload


class APIServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class APIHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300
    disable_nagle_algorithm = True
    max_body = 1 << 30  # uploads of task files

    def log_message(self, format, *args):
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        try:
            try:
                fields, files = self.read_body()
                self.route(method, self.path.partition("?")[0], fields, files)
            except HTTPReply as r:
                self.send_json(r.status, r.payload)
            except (BrokenPipeError, ConnectionResetError):
                raise
            except Exception as e:
                log.exception("%s %s failed", method, self.path)
                self.send_json(500, {"status": "error", "message": f"{type(e).__name__}: {e}"})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def route(self, method: str, path: str, fields: dict, files: dict) -> None:
        raise NotImplementedError

    def client_gone(self) -> bool:
        """Whether the client has hung up (it gave up waiting): its end of the connection is closed."""
        try:
            if not select.select([self.connection], [], [], 0)[0]:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def query(self) -> dict:
        return dict(parse_qsl(self.path.partition("?")[2]))

    def read_body(self) -> tuple[dict, dict]:
        """JSON object, urlencoded form or multipart form: (fields, files as name -> bytes)."""
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > self.max_body:
            self.close_connection = True
            raise HTTPReply(413 if length.isdigit() else 400, {"status": "error", "message": "bad Content-Length"})
        raw = self.rfile.read(int(length)) if int(length) else b""
        kind = self.headers.get("Content-Type", "").lower()
        if not raw.strip():
            return {}, {}
        if kind.startswith("multipart/form-data"):
            msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + self.headers["Content-Type"].encode()
                                                      + b"\r\n\r\n" + raw)
            fields, files = {}, {}
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if part.get_filename() is not None:
                    files[name] = part.get_payload(decode=True) or b""
                else:
                    fields[name] = (part.get_payload(decode=True) or b"").decode("utf-8", "replace")
            return fields, files
        if kind.startswith("application/x-www-form-urlencoded"):
            return dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)), {}
        try:
            body = json.loads(raw)
        except ValueError:
            raise HTTPReply(400, {"status": "error", "message": "body is not valid JSON"}) from None
        return (body if isinstance(body, dict) else {"_": body}), {}

    def send_json(self, status: int, payload: Any) -> None:
        self.send_bytes(status, json.dumps(payload).encode(), "application/json")

    def send_bytes(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
