"""The part of WebSocket (RFC 6455) a VNC stream needs, on the server's side: the upgrade's checks and
accept value, frames read from a client, frames written to it. noVNC speaks RFB in binary frames.

No extension is ever accepted (no compression), so frames are plain; a client's frames must be
masked and at most MAX_PAYLOAD long (a viewer's RFB messages are a few bytes), else the stream ends
with a protocol error.
"""

import base64
import binascii
import hashlib
import struct

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_PAYLOAD = 1 << 20
PROTOCOL_ERROR, TOO_BIG, UNSUPPORTED = 1002, 1009, 1003


class ProtocolError(Exception):
    """The client broke the protocol; `code` is the close code to answer with."""

    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code


def accept_value(key: str) -> str:
    """Sec-WebSocket-Accept for a request's Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


def upgrade_problem(headers) -> str | None:
    """Why these request headers are not a WebSocket upgrade cua takes (None: they are)."""
    if headers.get("Upgrade", "").strip().lower() != "websocket":
        return "not a WebSocket upgrade (Upgrade: websocket)"
    if "upgrade" not in {t.strip().lower() for t in headers.get("Connection", "").split(",")}:
        return "not a WebSocket upgrade (Connection: Upgrade)"
    if headers.get("Sec-WebSocket-Version", "").strip() != "13":
        return "WebSocket version 13 only"
    key = headers.get("Sec-WebSocket-Key", "").strip()
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError
    except (ValueError, binascii.Error):
        return "a Sec-WebSocket-Key of 16 bytes in base64"
    return None


def chosen_protocol(headers, ours: str = "binary") -> str | None:
    """`ours` when the client offers it among its subprotocols (noVNC may ask for "binary")."""
    offered = {p.strip() for p in headers.get("Sec-WebSocket-Protocol", "").split(",")}
    return ours if ours in offered else None


def handshake_reply(headers) -> bytes:
    """The 101 answer to an upgrade request that `upgrade_problem` passed."""
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {accept_value(headers['Sec-WebSocket-Key'].strip())}"]
    if protocol := chosen_protocol(headers):
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def frame(opcode: int, payload: bytes = b"") -> bytes:
    """A final, unmasked frame, as a server sends them."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def close_frame(code: int, reason: str = "") -> bytes:
    return frame(CLOSE, struct.pack("!H", code) + reason.encode()[:120])


def _exactly(read, n: int) -> bytes:
    data = read(n)
    if len(data) != n:
        raise EOFError("the client closed the stream mid-frame")
    return data


def read_frame(read) -> tuple[int, bytes]:
    """(opcode, unmasked payload) of the client's next frame; `read(n)` reads from its stream.
    EOFError when the stream ends, ProtocolError for a frame a client may not send."""
    b0, b1 = _exactly(read, 2)
    if b0 & 0x70:
        raise ProtocolError(PROTOCOL_ERROR, "reserved bits set: no extension was agreed")
    opcode, n = b0 & 0x0F, b1 & 0x7F
    if opcode not in (CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG):
        raise ProtocolError(PROTOCOL_ERROR, f"unknown opcode {opcode}")
    if not b1 & 0x80:
        raise ProtocolError(PROTOCOL_ERROR, "a client's frames are masked")
    if opcode >= CLOSE and (n > 125 or not b0 & 0x80):
        raise ProtocolError(PROTOCOL_ERROR, "a control frame is short and whole")
    if n == 126:
        (n,) = struct.unpack("!H", _exactly(read, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", _exactly(read, 8))
    if n > MAX_PAYLOAD:
        raise ProtocolError(TOO_BIG, f"a frame of {n} bytes: at most {MAX_PAYLOAD}")
    mask = _exactly(read, 4)
    data = _exactly(read, n)
    return opcode, unmask(data, mask)


def unmask(data: bytes, mask: bytes) -> bytes:
    if not data:
        return data
    key = int.from_bytes((mask * (len(data) // 4 + 1))[:len(data)], "big")
    return (int.from_bytes(data, "big") ^ key).to_bytes(len(data), "big")
