"""A connection to the model's endpoint opened before the first request needs it (issue 32, ADR 0048).

Why: the first request of a session otherwise pays the TCP and TLS handshakes
while the user waits for the first token, and on a real network that is one or
more round trips. httpcore has no public way to put an open, request-less
connection in its pool (a pool connection that has sent nothing is "new", not
"available"), so the opening happens one layer down: `KeepingBackend` is the
pool's network backend; `open` dials and shakes hands ahead of time and keeps
the stream; the pool's next dial to that host and port is handed the kept
stream instead of a new one, and the pool wraps it in an ordinary connection.
Nothing is ever written on a kept stream before the pool writes its request,
so a server sees a connection and then the real request on it.

What may go wrong is contained here: a failed opening is the caller's to
ignore (the real request dials as it always did); a kept stream the server
has closed (readable while idle: plain TCP only, where the check is exact) or
one older than `max_age` is closed and replaced by a fresh dial.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

import httpcore

__all__ = ["KeepingBackend"]


class _Handed(httpcore.AsyncNetworkStream):
    """A kept stream as the pool sees it: its TLS, if any, is already done for the host the pool asks."""

    def __init__(self, stream: httpcore.AsyncNetworkStream, tls_host: str | None) -> None:
        self._stream = stream
        self._tls_host = tls_host

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        if self._tls_host is None:
            return await self._stream.start_tls(ssl_context, server_hostname, timeout)
        if server_hostname != self._tls_host:  # never: kept by host; a mismatch must not pass unverified
            await self._stream.aclose()
            raise httpcore.ConnectError(f"kept connection was verified for {self._tls_host}, not {server_hostname}")
        return self._stream

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Kept:
    def __init__(self, stream: httpcore.AsyncNetworkStream, tls_host: str | None) -> None:
        self.stream = stream
        self.tls_host = tls_host
        self.opened = time.monotonic()


class KeepingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, with at most one connection per host and port opened ahead and kept."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, max_age: float) -> None:
        self._inner = inner
        self._max_age = max_age
        self._kept: dict[tuple[str, int], _Kept] = {}

    def holds(self, host: str, port: int, younger_than: float) -> bool:
        """A connection opened less than ``younger_than`` seconds ago waits for ``host:port``."""
        kept = self._kept.get((host, port))
        return kept is not None and time.monotonic() - kept.opened < younger_than

    async def open(
        self,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        timeout: float | None,
        socket_options: Any = None,
    ) -> None:
        """Dial ``host:port`` and, with ``tls``, shake hands (verifying as the pool would); keep the stream.

        Raises what dialing raises; a stream replaced here is closed.
        """
        stream = await self._inner.connect_tcp(host, port, timeout=timeout, socket_options=socket_options)
        try:
            if tls is not None:
                tls.set_alpn_protocols(["http/1.1"])  # what httpcore offers with HTTP/2 off
                stream = await stream.start_tls(tls, server_hostname=host, timeout=timeout)
        except BaseException:
            await stream.aclose()
            raise
        await self._drop((host, port))
        self._kept[(host, port)] = _Kept(stream, host if tls is not None else None)

    async def _drop(self, key: tuple[str, int]) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            await old.stream.aclose()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        kept = self._kept.pop((host, port), None)
        if kept is not None and local_address is None:
            fresh = time.monotonic() - kept.opened < self._max_age
            closed = kept.tls_host is None and bool(kept.stream.get_extra_info("is_readable"))
            if fresh and not closed:
                return _Handed(kept.stream, kept.tls_host)
        if kept is not None:
            await kept.stream.aclose()
        return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)

    async def aclose(self) -> None:
        """Close every kept stream (at shutdown)."""
        for key in list(self._kept):
            await self._drop(key)
