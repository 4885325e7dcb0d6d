"""term2's Unix stream and listener: a wait cancelled as the socket turns readable leaves no error.

The reproducer is deterministic: one task waits; another, in one loop iteration, makes the socket
readable and queues the cancel with ``call_soon``, so in the next iteration the cancel runs just
before the selector's reader callback. anyio 4.16's own classes fail it (strict xfail: when anyio is
fixed, this says term2.support.unix_stream can go).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from term2.support.unix_stream import UnixListener, UnixStream

pytestmark = pytest.mark.anyio

_ANYIO_RACES = pytest.mark.xfail(strict=True, reason="anyio 4.16: add_reader(sock, future.set_result) races a cancel")


async def _cancelled_as_readable(wait: Callable[[], Awaitable[Any]], make_readable: Callable[[], None]) -> list[str]:
    """Errors the loop's exception handler saw when ``wait`` was cancelled as its socket turned readable."""
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(repr(context.get("exception"))))
    try:
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:

                async def trigger() -> None:
                    await anyio.sleep(0.01)  # the other task is waiting on the socket by now
                    make_readable()
                    loop.call_soon(scope.cancel)

                tg.start_soon(trigger)
                await wait()
        await anyio.sleep(0.02)  # a few iterations for a late callback to run
    finally:
        loop.set_exception_handler(previous)
    return errors


@pytest.fixture
async def pair() -> AsyncIterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield ours, theirs
    ours.close()
    theirs.close()


@pytest.mark.parametrize("how", ["data", "eof"])
@pytest.mark.parametrize("make", [UnixStream, pytest.param("anyio", marks=_ANYIO_RACES)])
async def test_a_receive_cancelled_as_the_peer_writes_or_closes(
    pair: tuple[socket.socket, socket.socket], make: Any, how: str
) -> None:
    ours, theirs = pair
    stream = await anyio.abc.UNIXSocketStream.from_socket(ours) if make == "anyio" else make(ours)
    errors = await _cancelled_as_readable(stream.receive, theirs.close if how == "eof" else lambda: theirs.send(b"x"))
    assert errors == []
    await stream.aclose()


@pytest.mark.parametrize("make", [UnixListener.bind, pytest.param("anyio", marks=_ANYIO_RACES)])
async def test_an_accept_cancelled_as_a_client_connects(tmp_path: Path, make: Any) -> None:
    path = str(tmp_path / "s")
    listener = await anyio.create_unix_listener(path) if make == "anyio" else make(path, mode=0o600)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        errors = await _cancelled_as_readable(listener.accept, lambda: client.connect(path))
        assert errors == []
    finally:
        client.close()
        await listener.aclose()


async def test_bytes_both_ways_eof_and_a_half_close(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    big = os.urandom(1 << 20)  # past the socket buffer: send waits for the reader
    async with UnixStream(ours) as a, UnixStream(theirs) as b:
        got = bytearray()

        async def read_all() -> None:
            async for chunk in b:
                got.extend(chunk)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_all)
            await a.send(big)
            await a.send_eof()
        assert bytes(got) == big
        await b.send(b"reply after their half-close")
        assert await a.receive() == b"reply after their half-close"


async def test_closing_wakes_a_waiting_receive_and_accept(tmp_path: Path) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stream = UnixStream(ours)
    listener = UnixListener.bind(str(tmp_path / "s"), mode=0o600)
    assert (tmp_path / "s").stat().st_mode & 0o777 == 0o600
    outcomes: list[type[BaseException]] = []

    async def waits(call: Callable[[], Awaitable[Any]]) -> None:
        try:
            await call()
        except Exception as exc:
            outcomes.append(type(exc))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waits, stream.receive)
            tg.start_soon(waits, listener.accept)
            await anyio.sleep(0.01)
            await stream.aclose()
            await listener.aclose()
    theirs.close()
    assert outcomes == [anyio.ClosedResourceError, anyio.ClosedResourceError]
    with pytest.raises(anyio.ClosedResourceError):
        await stream.send(b"x")
