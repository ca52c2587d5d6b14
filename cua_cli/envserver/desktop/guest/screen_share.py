"""Inside a desktop: its screen over VNC for a person watching (`cua watch`), only while one does.

Each connection to /run/cua/vnc.sock (the host's env server makes it for a viewer) gets an x11vnc
of its own in inetd mode: it speaks RFB over that connection and exits when the viewer leaves. No
port is opened, and nothing runs while nobody watches. It is view-only: x11vnc ignores the
viewer's pointer and keys. vnc-control.sock is the same with the viewer's pointer and keys: the
host hands it out only to a person who took the episode over. The clipboard is never shared.
"""

import os
import socket
import subprocess
import threading

FOLDER = "/run/cua"
VIEW_SOCKET = "vnc.sock"
CONTROL_SOCKET = "vnc-control.sock"


def _x11vnc_args(display: str, control: bool) -> list[str]:
    # -repeat: x11vnc would turn the desktop's key autorepeat off while a viewer is connected, and
    # watching must not change the desktop. -defer 30: a screen every 30 ms at most, little CPU.
    return ["x11vnc", "-inetd", "-display", display, *([] if control else ["-viewonly"]), "-nosel", "-nopw",
            "-quiet", "-noxrecord", "-repeat", "-wait", "30", "-defer", "30"]


def _serve(listener: socket.socket, display: str, control: bool) -> None:
    while True:
        conn, _ = listener.accept()
        try:
            proc = subprocess.Popen(_x11vnc_args(display, control), stdin=conn, stdout=conn,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:  # no x11vnc here: the viewer sees a closed connection
            conn.close()
            continue
        conn.close()  # x11vnc holds it now
        threading.Thread(target=proc.wait, daemon=True).start()  # reaped when the viewer leaves


def serve() -> None:
    """Listen on the view and control sockets in threads of the executor."""
    for name, control in ((VIEW_SOCKET, False), (CONTROL_SOCKET, True)):
        path = os.path.join(FOLDER, name)
        if os.path.exists(path):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(16)
        threading.Thread(target=_serve, args=(listener, os.environ["DISPLAY"], control), daemon=True,
                         name=name).start()
