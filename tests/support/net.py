"""Network helpers for tests that need an address nothing answers on."""

from __future__ import annotations

import socket


def closed_port() -> int:
    """A local TCP port that was free a moment ago: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
