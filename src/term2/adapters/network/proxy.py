"""FilteringProxy: the Egress port, an HTTP and a SOCKS5 proxy on Unix sockets for one command.

The sockets live in a fresh 0700 folder under the host's /tmp (which a command never sees: its /tmp
is private), owned by whoever bwrap runs as, each 0600: only the sandbox bound to them, and root,
can connect. Both proxies share one `Dialer`, so one rule decides every connection, and one list
of refusals goes back with the command's result. Leaving the session stops both listeners, ends
every relayed connection and removes the folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import anyio
import anyio.abc
from anyio.abc import ByteStream

from term2.adapters.network.dialer import Dialer, ResolveMap
from term2.adapters.network.http_proxy import serve_http
from term2.adapters.network.socks import serve_socks
from term2.domain.network import NetworkGrant
from term2.ports.network import EgressSession
from term2.support.deferred_log import get_logger
from term2.support.unix_stream import UnixListener

_log = get_logger("term2.network")

MAX_CONNECTIONS = 256  # accepted at once, per command; more wait in the kernel's backlog for a free slot

Handler = Callable[[ByteStream, Dialer], Awaitable[None]]


class FilteringProxy:
    """See the module docstring. ``resolve`` is ``[network.resolve]``: (name, port) -> (address, port)."""

    def __init__(self, resolve: ResolveMap | None = None, *, connect_timeout: float = 15.0) -> None:
        self._resolve = dict(resolve or {})
        self._connect_timeout = connect_timeout

    @asynccontextmanager
    async def session(
        self, grant: NetworkGrant, *, owner: tuple[int, int] | None = None
    ) -> AsyncIterator[EgressSession]:
        folder = tempfile.mkdtemp(prefix="term2-net-", dir="/tmp")
        session = EgressSession(
            http_socket=os.path.join(folder, "http.sock"), socks_socket=os.path.join(folder, "socks.sock")
        )
        dialer = Dialer(grant, self._resolve, session.refusals, self._connect_timeout)
        listeners: list[UnixListener] = []
        failure: Exception | None = None
        try:
            for path in (session.http_socket, session.socks_socket):
                listeners.append(UnixListener.bind(path, mode=0o600))  # not anyio's: see its module
                if owner is not None:
                    os.chown(path, *owner)
            if owner is not None:
                os.chown(folder, *owner)
            limiter = anyio.CapacityLimiter(MAX_CONNECTIONS)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_accept, listeners[0], partial(_guarded, serve_http, dialer), limiter, tg)
                tg.start_soon(_accept, listeners[1], partial(_guarded, serve_socks, dialer), limiter, tg)
                try:
                    yield session
                except Exception as exc:  # re-raised below as itself, not wrapped by the task group
                    failure = exc
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                for listener in listeners:
                    await listener.aclose()
            shutil.rmtree(folder, ignore_errors=True)
        if failure is not None:
            raise failure


ACCEPT_BACKOFF_S = 0.1


async def _accept(
    listener: UnixListener,
    handle: Callable[[ByteStream], Awaitable[None]],
    limiter: anyio.CapacityLimiter,
    tg: anyio.abc.TaskGroup,
) -> None:
    """Accept only with a free slot: connections past MAX_CONNECTIONS wait in the kernel's backlog, not
    as descriptors in term2 (a command opening thousands once exhausted term2's descriptors and ended
    its proxy); a failed accept (EMFILE, ENFILE) waits and tries again rather than ending the session."""
    while True:
        slot = object()
        await limiter.acquire_on_behalf_of(slot)
        try:
            client = await listener.accept()
        except anyio.ClosedResourceError:
            limiter.release_on_behalf_of(slot)
            return
        except (OSError, anyio.BrokenResourceError) as exc:
            limiter.release_on_behalf_of(slot)
            _log.warning("network.proxy_accept_failed", error=str(exc))
            await anyio.sleep(ACCEPT_BACKOFF_S)
            continue
        tg.start_soon(_served, handle, client, limiter, slot)


async def _served(
    handle: Callable[[ByteStream], Awaitable[None]], client: ByteStream, limiter: anyio.CapacityLimiter, slot: object
) -> None:
    try:
        await handle(client)
    finally:
        limiter.release_on_behalf_of(slot)


async def _guarded(handler: Handler, dialer: Dialer, client: ByteStream) -> None:
    """One connection: its failure is its own, never the listener's (which serves the rest)."""
    try:
        await handler(client, dialer)
    except Exception:
        _log.exception("network.proxy_connection_failed")
        await client.aclose()
