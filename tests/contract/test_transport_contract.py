"""The Transport port's contract, run against both adapters (real pipes and in-memory)."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from typing import BinaryIO

import anyio
import pytest

from term2.adapters.acp.memory_transport import MemoryTransport
from term2.adapters.acp.stdio import StdioTransport
from term2.ports.transport import LineTooLong, Transport

pytestmark = pytest.mark.anyio


class StdioPeer:
    """Drives a StdioTransport over two os.pipe() pairs."""

    def __init__(self, limit: int | None = None) -> None:
        in_r, self._in_w = os.pipe()
        self._out_r, self._out_w = os.pipe()
        self._stdin: BinaryIO = os.fdopen(in_r, "rb")
        kwargs = {} if limit is None else {"limit": limit}
        self.transport: Transport = StdioTransport(self._stdin, self._out_w, **kwargs)
        self._fds = {self._in_w, self._out_r, self._out_w}

    async def feed(self, lines: list[bytes]) -> None:
        self.feed_raw(b"".join(line + b"\n" for line in lines))

    def feed_raw(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._in_w, view) :]

    async def end_input(self) -> None:
        self._close(self._in_w)

    async def received_after_close(self) -> list[bytes]:
        await self.transport.aclose()
        self._close(self._out_w)  # the transport never owns out_fd; EOF for our reader
        chunks = []
        while chunk := os.read(self._out_r, 65536):
            chunks.append(chunk)
        data = b"".join(chunks)
        assert data == b"" or data.endswith(b"\n")
        return data.split(b"\n")[:-1]

    def break_output(self) -> None:
        self._close(self._out_r)

    def _close(self, fd: int) -> None:
        if fd in self._fds:
            self._fds.discard(fd)
            os.close(fd)

    async def cleanup(self) -> None:
        await self.transport.aclose()
        for fd in list(self._fds):
            self._close(fd)
        self._stdin.close()


class MemoryPeer:
    def __init__(self) -> None:
        self.transport, self._other = MemoryTransport.pair()

    async def feed(self, lines: list[bytes]) -> None:
        for line in lines:
            await self._other.send(line)

    async def end_input(self) -> None:
        await self._other.aclose()

    async def received_after_close(self) -> list[bytes]:
        await self.transport.aclose()
        lines = []
        while (line := await self._other.receive()) is not None:
            lines.append(line)
        return lines

    async def cleanup(self) -> None:
        await self.transport.aclose()
        await self._other.aclose()


Peer = StdioPeer | MemoryPeer


@pytest.fixture(params=["stdio", "memory"])
async def peer(request: pytest.FixtureRequest) -> AsyncIterator[Peer]:
    made: Peer = StdioPeer() if request.param == "stdio" else MemoryPeer()
    try:
        yield made
    finally:
        await made.cleanup()


async def test_lines_arrive_in_order_then_none_at_eof(peer: Peer) -> None:
    lines = [b'{"id":1}', b"second", b"\xc3\xa9 utf-8 bytes", b"x" * 10_000]
    with anyio.fail_after(60):
        await peer.feed(lines)
        await peer.end_input()
        got = [await peer.transport.receive() for _ in lines]
        assert got == lines
        assert await peer.transport.receive() is None
        assert await peer.transport.receive() is None  # EOF stays EOF


async def test_receive_waits_for_a_line(peer: Peer) -> None:
    got: list[bytes | None] = []
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:

            async def reader() -> None:
                got.append(await peer.transport.receive())

            tg.start_soon(reader)
            await anyio.sleep(0.02)
            assert got == []
            await peer.feed([b"late"])
    assert got == [b"late"]


async def test_send_order_is_preserved_and_aclose_flushes(peer: Peer) -> None:
    lines = [f'{{"n":{i}}}'.encode() for i in range(200)]
    with anyio.fail_after(60):
        for line in lines:
            await peer.transport.send(line)
        assert await peer.received_after_close() == lines


async def test_concurrent_senders_never_interleave_a_line(peer: Peer) -> None:
    async def sender(tag: bytes) -> None:
        for i in range(50):
            await peer.transport.send(tag * 100 + str(i).encode())

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for tag in (b"a", b"b", b"c"):
                tg.start_soon(sender, tag)
        got = await peer.received_after_close()
    assert len(got) == 150
    for tag in (b"a", b"b", b"c"):
        mine = [line for line in got if line.startswith(tag)]
        assert mine == [tag * 100 + str(i).encode() for i in range(50)]


async def test_send_after_close_is_a_no_op_and_close_is_idempotent(peer: Peer) -> None:
    with anyio.fail_after(60):
        await peer.transport.send(b"before")
        got = await peer.received_after_close()
        await peer.transport.send(b"after")
        await peer.transport.aclose()
    assert got == [b"before"]


# -- stdio only ---------------------------------------------------------------------


@pytest.fixture
async def small() -> AsyncIterator[StdioPeer]:
    made = StdioPeer(limit=16)
    try:
        yield made
    finally:
        await made.cleanup()


async def test_stdio_line_over_the_limit_is_skipped_and_the_next_line_arrives(small: StdioPeer) -> None:
    with anyio.fail_after(60):
        await small.feed([b"x" * 16, b"y" * 17, b"z" * 5000, b"ok"])
        await small.end_input()
        assert await small.transport.receive() == b"x" * 16  # exactly at the limit is fine
        with pytest.raises(LineTooLong):
            await small.transport.receive()
        with pytest.raises(LineTooLong):
            await small.transport.receive()
        assert await small.transport.receive() == b"ok"
        assert await small.transport.receive() is None


async def test_stdio_oversized_unterminated_last_line(small: StdioPeer) -> None:
    with anyio.fail_after(60):
        small.feed_raw(b"w" * 40)
        await small.end_input()
        with pytest.raises(LineTooLong):
            await small.transport.receive()
        assert await small.transport.receive() is None


async def test_stdio_crlf_and_unterminated_final_line() -> None:
    peer = StdioPeer()
    try:
        with anyio.fail_after(60):
            peer.feed_raw(b"dos\r\n\nlast")
            await peer.end_input()
            assert await peer.transport.receive() == b"dos"
            assert await peer.transport.receive() == b""  # blank lines are the caller's business
            assert await peer.transport.receive() == b"last"
            assert await peer.transport.receive() is None
    finally:
        await peer.cleanup()


async def test_stdio_send_to_a_vanished_reader_does_not_raise() -> None:
    peer = StdioPeer()
    try:
        with anyio.fail_after(60):
            peer.break_output()
            for _ in range(3):
                await peer.transport.send(b"into the void")
                await anyio.sleep(0.01)
            await peer.transport.aclose()
    finally:
        await peer.cleanup()


@pytest.mark.anyio
async def test_stdio_send_waits_for_a_client_that_stops_reading() -> None:
    """A client that stops reading slows term2 down instead of making it buffer without end."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    transport = StdioTransport(os.fdopen(in_r, "rb"), out_w)
    line = b"x" * (1024 * 1024)
    blocked = False
    for _ in range(64):
        with anyio.move_on_after(0.5) as waited:
            await transport.send(line)
        if waited.cancelled_caught:
            blocked = True
            break
    assert blocked, "send never waited although nobody read"

    def drain() -> None:
        with os.fdopen(out_r, "rb") as reader:
            while reader.read(1 << 20):
                pass

    threading.Thread(target=drain, daemon=True).start()
    with anyio.fail_after(10):
        await transport.send(b"after the client read again")
    os.close(in_w)
    await transport.aclose()
