"""Framing between the env server and a desktop's executor: a JSON header and a binary body.

Each message is 8 bytes (header length, body length, big-endian), the header (UTF-8 JSON object),
then the body. Both sides bound what they accept: the executor is the sandbox's, so the server
treats its answers as untrusted input.
"""

import json
import socket
import struct

PREFIX = struct.Struct(">II")
MAX_HEADER = 16 << 20  # list_directory trees and command output travel in the header
MAX_BODY = 1 << 30


class WireError(ConnectionError):
    """The other side closed the connection or broke the framing."""


def send(sock: socket.socket, header: dict, body: bytes = b"") -> None:
    raw = json.dumps(header).encode()
    sock.sendall(PREFIX.pack(len(raw), len(body)) + raw)
    if body:
        sock.sendall(body)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise WireError("connection closed")
        got += k
    return bytes(buf)


def recv(sock: socket.socket, max_body: int = MAX_BODY) -> tuple[dict, bytes]:
    hlen, blen = PREFIX.unpack(_read_exact(sock, PREFIX.size))
    if hlen > MAX_HEADER or blen > max_body:
        raise WireError(f"message too large ({hlen} + {blen} bytes)")
    try:
        header = json.loads(_read_exact(sock, hlen))
    except ValueError:
        raise WireError("header is not JSON") from None
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    return header, _read_exact(sock, blen) if blen else b""
