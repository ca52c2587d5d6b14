"""On the host: a viewer's WebSocket joined to a desktop's screen (guest/screen_share.py), for the
allocation route GET /emulators/{id}/vnc. The desktop end is plain RFB on the desktop's vnc.sock;
the viewer end is RFB in WebSocket binary frames, as noVNC speaks it.

The stream ends when either end does: the viewer closing, or the desktop going (a release kills its
x11vnc, whose end of the socket then closes, and the viewer's connection is shut down with it).
"""

import socket
import threading
from pathlib import Path

from cua_cli._util import websocket as ws
from cua_cli.envserver.desktop.guest.screen_share import CONTROL_SOCKET, VIEW_SOCKET
from cua_cli.envserver.desktop.sockets import SocketFolder


def open_screen(sockets: Path, control: bool = False) -> socket.socket:
    """A connection to the desktop's screen, view-only or with the viewer's pointer and keys (`control`);
    OSError when the desktop does not take it."""
    folder = SocketFolder(sockets)
    inside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        inside.connect(folder.path(CONTROL_SOCKET if control else VIEW_SOCKET))
    except OSError:
        inside.close()
        raise
    finally:
        folder.close()
    return inside


def bridge(read, client: socket.socket, inside: socket.socket) -> None:
    """Carry RFB between a viewer (its frames come through `read`, its connection is `client`) and the
    desktop (`inside`) until one of them ends; then close `inside` and shut `client` down."""
    send_lock = threading.Lock()

    def send(data: bytes) -> None:
        with send_lock:
            client.sendall(data)

    def screen_to_viewer() -> None:
        try:
            while data := inside.recv(1 << 16):
                send(ws.frame(ws.BINARY, data))
            send(ws.close_frame(1001, "the desktop's screen closed"))
        except OSError:
            pass
        finally:
            _shut(client)

    out = threading.Thread(target=screen_to_viewer, daemon=True, name="vnc-out")
    out.start()
    try:
        while True:
            opcode, payload = ws.read_frame(read)
            if opcode in (ws.BINARY, ws.CONTINUATION):
                inside.sendall(payload)
            elif opcode == ws.PING:
                send(ws.frame(ws.PONG, payload))
            elif opcode == ws.CLOSE:
                send(ws.close_frame(1000))
                break
            elif opcode == ws.TEXT:
                raise ws.ProtocolError(ws.UNSUPPORTED, "RFB goes in binary frames")
    except ws.ProtocolError as e:
        try:
            send(ws.close_frame(e.code, str(e)))
        except OSError:
            pass
    except (EOFError, OSError, ValueError):  # the viewer went, or its connection was shut down
        pass
    finally:
        _shut(inside)
        inside.close()
        out.join(10)
        _shut(client)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
