"""The SOCKS5 proxy, for tools that speak SOCKS rather than HTTP: CONNECT only, no authentication.

BIND and UDP ASSOCIATE are refused: the command gets no listening port on the outside and no
datagrams at all. A name sent as a name (``socks5h://``) is resolved by the proxy, which is the only
place names are resolved; an address sent as an address is judged like an approved IP literal.
"""

from __future__ import annotations

import ipaddress
import struct

import anyio
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream

from term2.adapters.network.dialer import Dialer, Refused, Unreachable
from term2.adapters.network.relay import relay
from term2.domain.network import shown_host

HANDSHAKE_TIMEOUT_S = 30.0
_SUCCEEDED, _NOT_ALLOWED, _UNREACHABLE, _UNSUPPORTED_COMMAND, _UNSUPPORTED_ADDRESS = 0, 2, 4, 7, 8


async def serve_socks(client: ByteStream, dialer: Dialer) -> None:
    reader = BufferedByteReceiveStream(client)
    async with client:
        try:
            with anyio.fail_after(HANDSHAKE_TIMEOUT_S):
                version, count = await reader.receive_exactly(2)
                methods = await reader.receive_exactly(count)
                if version != 5 or 0 not in methods:
                    await client.send(b"\x05\xff")
                    return
                await client.send(b"\x05\x00")
                version, command, _reserved, kind = await reader.receive_exactly(4)
                if kind == 1:
                    host = str(ipaddress.IPv4Address(await reader.receive_exactly(4)))
                elif kind == 4:
                    host = str(ipaddress.IPv6Address(await reader.receive_exactly(16)))
                elif kind == 3:
                    (length,) = await reader.receive_exactly(1)
                    host = (await reader.receive_exactly(length)).decode("idna")
                else:
                    await _reply(client, _UNSUPPORTED_ADDRESS)
                    return
                (port,) = struct.unpack("!H", await reader.receive_exactly(2))
            if version != 5 or command != 1:
                what = {2: "BIND", 3: "UDP ASSOCIATE"}.get(command, f"command {command}")
                dialer.refuse(
                    f"blocked: SOCKS {what} (to {shown_host(host)}:{port}) is not allowed; only TCP connections are"
                )
                await _reply(client, _UNSUPPORTED_COMMAND)
                return
            try:
                upstream = await dialer.dial(host, port)
            except Refused:
                await _reply(client, _NOT_ALLOWED)
                return
            except Unreachable:
                await _reply(client, _UNREACHABLE)
                return
            await _reply(client, _SUCCEEDED)
        except (anyio.IncompleteRead, anyio.EndOfStream, TimeoutError, UnicodeError, ValueError):
            return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return
        await relay(reader, client, upstream)


async def _reply(client: ByteStream, code: int) -> None:
    try:
        await client.send(bytes((5, code, 0, 1, 0, 0, 0, 0, 0, 0)))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
