"""Copying bytes both ways between a command's connection and the host it was allowed to reach."""

from __future__ import annotations

import anyio
import anyio.abc
from anyio.abc import ByteReceiveStream, ByteStream

_CHUNK = 65536


async def relay(client_in: ByteReceiveStream, client: ByteStream, upstream: anyio.abc.SocketStream) -> None:
    """Until the host is done: the host's end ends the exchange; the command's end only half-closes it.

    ``client_in`` is the command's side as the proxy read it (buffered bytes it received after the
    request head come first); replies go to ``client``.
    """
    async with upstream, anyio.create_task_group() as tg:

        async def outbound() -> None:
            try:
                async for chunk in client_in:
                    await upstream.send(chunk)
                await upstream.send_eof()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
                tg.cancel_scope.cancel()

        tg.start_soon(outbound)
        try:
            async for chunk in upstream:
                await client.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        tg.cancel_scope.cancel()
