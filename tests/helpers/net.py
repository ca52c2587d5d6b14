"""Loopback ports."""

import socket


def free_port() -> int:
    """A loopback port that was free a moment ago: nothing listens there once the socket is closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
