"""On the host: a desktop's published ports (guest/ports.py) on TCP ports of the host address, as
OSWorld's VMs publish Chrome's 9222 and VLC's 8080 and DART's allocation answers with them."""

import socket
import threading
from pathlib import Path

from cua_cli.envserver.desktop.guest.ports import PUBLISHED, splice
from cua_cli.envserver.desktop.sockets import SocketFolder


class PublishedPorts:
    def __init__(self, host: str, sockets: Path):
        self.ports: dict[str, int] = {}
        self._listeners = []
        self._folder = SocketFolder(sockets)
        for name in PUBLISHED:
            listener = socket.create_server((host, 0))
            self.ports[name] = listener.getsockname()[1]
            self._listeners.append(listener)
            threading.Thread(target=self._serve, args=(listener, self._folder.path(f"{name}.sock")), daemon=True,
                             name=f"port-{name}").start()

    def _serve(self, listener: socket.socket, path: str) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the desktop is gone
                return
            inside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                inside.connect(path)
            except OSError:
                conn.close()
                inside.close()
                continue
            threading.Thread(target=splice, args=(conn, inside), daemon=True).start()

    def close(self) -> None:
        for listener in self._listeners:
            listener.close()
        self._folder.close()
