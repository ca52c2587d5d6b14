"""On the host: a desktop's way to the web, when the server is told to give one (`--network allow`).

A desktop has no network of its own (its network namespace has loopback only). Its apps use an
HTTP proxy at 127.0.0.1:3128 inside it (guest/ports.py relays that port to a unix socket in the
folder bound into the desktop); here, on the host, that socket is served by a proxy that lets
through only the hosts of the allow-list: `CONNECT host:port` (HTTPS) and plain `GET http://...`.
Nothing else of the host is reachable: a name that resolves to a loopback, private or link-local
address is refused unless the allow-list names that address itself (a test's "web" on 127.0.0.1),
so that an allowed name cannot lead a desktop to the env server's own API.
"""

import ipaddress
import os
import socket
import threading
from pathlib import Path

from cua_cli._util.allowlist import HostAllowList
from cua_cli.envserver.desktop.guest.ports import WEB_SOCKET, splice
from cua_cli.envserver.desktop.sockets import SocketFolder

HEAD_MAX = 64 << 10
CONNECT_TIMEOUT_S = 15.0


class WebProxy:
    """The proxy of one desktop, on `<sockets>/web.sock`; a thread per connection."""

    def __init__(self, sockets: Path, access: HostAllowList):
        self.access = access
        folder = SocketFolder(sockets)
        try:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(folder.path(WEB_SOCKET))
        finally:
            folder.close()
        os.chmod(sockets / WEB_SOCKET, 0o666)  # for the desktop's user; its folder keeps everyone else out
        self.listener.listen(64)
        threading.Thread(target=self._serve, daemon=True, name="desktop-web").start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the desktop is gone
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(CONNECT_TIMEOUT_S)
            head = _read_head(conn)
            method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            if method == "CONNECT":
                host, port = _split_host_port(target, 443)
                upstream = self._open(host, port)
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                rest = head.split(b"\r\n\r\n", 1)[1]
            else:
                if not target.startswith("http://"):
                    raise _Refused(400, "only CONNECT and absolute http:// requests")
                authority, _, path = target[len("http://"):].partition("/")
                host, port = _split_host_port(authority, 80)
                upstream = self._open(host, port)
                rest = _origin_form(head, method, "/" + path, version)
        except _Refused as e:
            _answer(conn, e.status, e.reason)
            return
        except (OSError, ValueError, UnicodeDecodeError):
            conn.close()
            return
        conn.settimeout(None)
        if rest:
            upstream.sendall(rest)
        splice(conn, upstream)

    def _open(self, host: str, port: int) -> socket.socket:
        if not self.access.allows(host, port):
            raise _Refused(403, f"{host}:{port} is not on this desktop's allow-list (env.osworld.network)")
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise _Refused(502, f"{host}: {e}") from None
        for family, kind, proto, _, address in infos:
            ip = ipaddress.ip_address(address[0].split("%")[0])
            if not ip.is_global and not self.access.names_address(str(ip)):
                raise _Refused(403, f"{host} is {ip}, an address of this host's networks (not on the allow-list)")
        family, kind, proto, _, address = infos[0]
        upstream = socket.socket(family, kind, proto)
        upstream.settimeout(CONNECT_TIMEOUT_S)
        try:
            upstream.connect(address)
        except OSError as e:
            upstream.close()
            raise _Refused(502, f"{host}:{port}: {e}") from None
        upstream.settimeout(None)
        return upstream

    def close(self) -> None:
        self.listener.close()


class _Refused(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            raise ValueError("closed before the request's head")
        data += chunk
        if len(data) > HEAD_MAX:
            raise _Refused(431, "request head too large")
    return data


def _split_host_port(authority: str, default: int) -> tuple[str, int]:
    if authority.startswith("["):
        host, _, port = authority[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = authority.partition(":")
    if not host or (port and not port.isdigit()) or not 0 < int(port or default) < 65536:
        raise _Refused(400, f"bad host in {authority!r}")
    return host, int(port or default)


def _origin_form(head: bytes, method: str, path: str, version: str) -> bytes:
    """The request as the origin server expects it: its path alone, no proxy headers, one request."""
    lines = head.split(b"\r\n\r\n", 1)
    header_lines = [line for line in lines[0].split(b"\r\n")[1:]
                    if not line.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))]
    first = f"{method} {path} {version}".encode("latin-1")
    return b"\r\n".join([first, *header_lines, b"Connection: close"]) + b"\r\n\r\n" + lines[1]


def _answer(conn: socket.socket, status: int, reason: str) -> None:
    body = f"cua: {reason}\n".encode()
    try:
        conn.sendall(f"HTTP/1.1 {status} {'Forbidden' if status == 403 else 'Error'}\r\nContent-Type: text/plain\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    except OSError:
        pass
    conn.close()
