"""In-memory transport: the alternate adapter of the transport port, for tests."""

from __future__ import annotations

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream


class MemoryTransport:
    """One end of a pair; what one end sends, the other receives."""

    def __init__(self, incoming: MemoryObjectReceiveStream[bytes], outgoing: MemoryObjectSendStream[bytes]) -> None:
        self._incoming = incoming
        self._outgoing = outgoing

    @classmethod
    def pair(cls) -> tuple[MemoryTransport, MemoryTransport]:
        a_send, b_recv = anyio.create_memory_object_stream[bytes](1000)
        b_send, a_recv = anyio.create_memory_object_stream[bytes](1000)
        return cls(a_recv, a_send), cls(b_recv, b_send)

    async def receive(self) -> bytes | None:
        try:
            return await self._incoming.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return None

    async def send(self, line: bytes) -> None:
        try:
            await self._outgoing.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def aclose(self) -> None:
        await self._outgoing.aclose()
