"""Inside a desktop: the ports its apps listen on (Chrome's debugging port, VLC's web interface) made
reachable from the host, which cannot enter the desktop's network namespace. Each port has a unix
socket in /run/cua (a host folder bound into the desktop); a connection to it is joined to a TCP
connection to that port on the desktop's own loopback. OSWorld's VMs publish the same two ports.

The other way round, the desktop's HTTP proxy port (127.0.0.1:3128) leads to the host's proxy of
the desktop (web.py), when the server gives the desktop the web; else nothing answers there."""

import os
import socket
import threading

PUBLISHED = {"chromium": 1337, "vlc": 8080}  # the ports OSWorld's image starts Chrome and VLC on
FOLDER = "/run/cua"
WEB_PORT = 3128  # the desktop's HTTP proxy (http_proxy, Chrome's --proxy-server)
WEB_SOCKET = "web.sock"


def splice(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes; then close both."""
    def pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


def _relay(listener: socket.socket, port: int) -> None:
    while True:
        conn, _ = listener.accept()
        try:
            inside = socket.create_connection(("127.0.0.1", port), timeout=10)
            inside.settimeout(None)
        except OSError:  # nothing listens there yet: the host's client sees a closed connection
            conn.close()
            continue
        threading.Thread(target=splice, args=(conn, inside), daemon=True).start()


def _to_web(listener: socket.socket) -> None:
    while True:
        conn, _ = listener.accept()
        host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            host.connect(os.path.join(FOLDER, WEB_SOCKET))
        except OSError:  # the desktop has no web: the app sees a closed connection
            conn.close()
            host.close()
            continue
        threading.Thread(target=splice, args=(conn, host), daemon=True).start()


def publish(web: bool) -> None:
    if web:
        listener = socket.create_server(("127.0.0.1", WEB_PORT))
        threading.Thread(target=_to_web, args=(listener,), daemon=True).start()
    for name, port in PUBLISHED.items():
        path = os.path.join(FOLDER, f"{name}.sock")
        if os.path.exists(path):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(64)
        threading.Thread(target=_relay, args=(listener, port), daemon=True).start()
