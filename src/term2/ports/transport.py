"""Transport port: a duplex stream of newline-delimited messages.

The JSON-RPC layer above it never touches file descriptors, so the same
connection logic runs over real stdio and over an in-memory pipe in tests.
"""

from __future__ import annotations

from typing import Protocol


class LineTooLong(Exception):
    """An incoming line exceeded the size limit; it has been discarded up to its newline."""


class Transport(Protocol):
    async def receive(self) -> bytes | None:
        """Return the next line without its newline, or None once the peer has closed."""
        ...

    async def send(self, line: bytes) -> None:
        """Queue one line (without newline) for the peer, preserving order."""
        ...

    async def aclose(self) -> None:
        """Flush what was queued and release the stream."""
        ...
