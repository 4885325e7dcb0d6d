"""A byte stream and a listener over Unix sockets whose waits survive cancellation.

anyio 4.16's asyncio Unix socket streams and listener wait with
``loop.add_reader(sock, future.set_result, None)``. When the waiting task is cancelled in the same
loop iteration in which the socket turns readable (its peer wrote, closed or connected), the reader
callback still runs and calls ``set_result`` on a cancelled future: ``InvalidStateError`` in the
loop's exception handler, an "Exception in callback" trace on stderr and a failed test under anyio's
pytest plugin. It happens whenever a command ends: its sandbox closes the connections of term2's
network proxy (and run_code's bridge) while term2 cancels the tasks reading them. Upstream is not
fixed (agronholm/anyio at 660a06d, 2026-08-22; #1267 fixed only ``aclose``).
``anyio.wait_readable``/``wait_writable`` guard that case, so these wait through them; anyio's
``notify_closing`` wakes a waiter when the socket is closed under it. tests/unit/test_unix_stream.py
holds the reproducer, run against anyio's classes too (a strict xfail) so the day anyio is fixed the
suite says these can go.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import anyio
import anyio.abc
import anyio.lowlevel

_CHUNK = 65536
_T = TypeVar("_T")
_BACKLOG = 65536  # the kernel caps it at net.core.somaxconn, as anyio's listener does


class _OwnedSocket:
    """A non-blocking socket owned from here on; closing it wakes whoever waits on it (``notify_closing``)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._closed = False

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._sock)
            self._sock.close()
        await anyio.lowlevel.checkpoint()


class UnixStream(_OwnedSocket, anyio.abc.ByteStream):
    """A connected ``AF_UNIX``/``SOCK_STREAM`` socket, owned by the stream from here on."""

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        await anyio.lowlevel.checkpoint()
        data = await self._io(partial(self._sock.recv, max_bytes), anyio.wait_readable)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        view = memoryview(item)
        while view:
            view = view[await self._io(partial(self._sock.send, view), anyio.wait_writable) :]

    async def _io(self, call: Callable[[], _T], wait: Callable[[socket.socket], Awaitable[None]]) -> _T:
        """``call`` on the non-blocking socket, waiting (through anyio's guarded wait) until it can go."""
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                return call()
            except BlockingIOError:
                await wait(self._sock)
            except OSError as exc:
                raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise anyio.BrokenResourceError from exc


class UnixListener(_OwnedSocket):
    """A listening Unix socket; ``accept`` raises ``ClosedResourceError`` once closed and the
    ``OSError`` of a failed accept (EMFILE, ENFILE) as is, for the caller to wait and retry."""

    @classmethod
    def bind(cls, path: str, *, mode: int) -> UnixListener:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            os.chmod(path, mode)
            sock.listen(_BACKLOG)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    async def accept(self) -> UnixStream:
        await anyio.lowlevel.checkpoint()
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                conn, _ = self._sock.accept()
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
                continue
            return UnixStream(conn)
