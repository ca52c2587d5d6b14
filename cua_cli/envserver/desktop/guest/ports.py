"""Inside a desktop: the ports its apps listen on (Chrome's debugging port, VLC's web interface) made
reachable from the host, which cannot enter the desktop's network namespace. Each port has a unix
socket in /run/cua (a host folder bound into the desktop); a connection to it is joined to a TCP
connection to that port on the desktop's own loopback. OSWorld's VMs publish the same two ports."""

import os
import socket
import threading

PUBLISHED = {"chromium": 1337, "vlc": 8080}  # the ports OSWorld's image starts Chrome and VLC on
FOLDER = "/run/cua"


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


def publish() -> None:
    for name, port in PUBLISHED.items():
        path = os.path.join(FOLDER, f"{name}.sock")
        if os.path.exists(path):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(64)
        threading.Thread(target=_relay, args=(listener, port), daemon=True).start()
