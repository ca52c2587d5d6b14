"""The env server's side of a desktop's executor: one request per connection at a time, connections
kept for reuse, so a long /execute never holds up a /screenshot."""

import os
import socket
import threading

from cua_cli.envserver.desktop.guest import wire
from cua_cli.envserver.desktop.sockets import SocketFolder


class ExecutorGone(ConnectionError):
    """The desktop's executor does not answer (killed, or the desktop is being torn down)."""


class ExecutorClient:
    def __init__(self, path: str, timeout: float = 180.0):
        directory, name = os.path.split(path)
        self._folder = SocketFolder(directory)
        self.path = self._folder.path(name)
        self.timeout = timeout  # above /execute's own 120 s
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self.closed = False

    def call(self, op: str, args: dict | None = None, body: bytes = b"") -> tuple[dict, bytes]:
        sock = self._take()
        try:
            wire.send(sock, {"op": op, "args": args or {}}, body)
            header, payload = wire.recv(sock)
        except (OSError, wire.WireError) as e:
            sock.close()
            raise ExecutorGone(f"desktop executor: {e}") from None
        with self._lock:
            if self.closed:
                sock.close()
            else:
                self._idle.append(sock)
        return header, payload

    def _take(self) -> socket.socket:
        with self._lock:
            if self.closed:
                raise ExecutorGone("desktop released")
            if self._idle:
                return self._idle.pop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            raise ExecutorGone(f"desktop executor: {e}") from None
        return sock

    def close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()
        self._folder.close()
