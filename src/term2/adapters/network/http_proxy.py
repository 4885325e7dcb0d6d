"""The HTTP proxy: CONNECT for TLS (and anything else tunnelled), plain-HTTP requests forwarded.

What the command sends is untrusted and the server behind may read it more leniently than the proxy
does, so a plain request is parsed by the strict grammar of `http_message` and only its rebuilt form
is sent: the target comes from the request line alone (never from a Host header), the Host header is
rewritten to that target, hop-by-hop headers are dropped, the body is counted out by its own framing.
One request a connection: the server is sent ``Connection: close`` and nothing past the first body,
the command is told ``Connection: close`` in the answer, so a pipelined second request is never
forwarded and a client retries it on a new connection, checked like any other. A CONNECT tunnel is
opaque once set up (ADR 0030): what flows in it is TLS term2 does not open.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio
from anyio.abc import ByteStream, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from term2.adapters.network.dialer import Dialer, Refused, Unreachable
from term2.adapters.network.http_message import (
    BadRequest,
    BadResponse,
    Framing,
    copy_body,
    read_request,
    read_response_head,
    rebuilt_request,
    rebuilt_response,
)
from term2.adapters.network.relay import relay
from term2.support.deferred_log import get_logger

_log = get_logger("term2.network")

HEAD_TIMEOUT_S = 30.0
_CHUNK = 65536
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, anyio.IncompleteRead, OSError)


async def serve_http(client: ByteStream, dialer: Dialer) -> None:
    reader = BufferedByteReceiveStream(client)
    forwarded = b""
    async with client:
        try:
            with anyio.fail_after(HEAD_TIMEOUT_S):
                head, framing = await read_request(reader)
            method, target = head.start[0], head.start[1].decode("ascii")
            if method == b"CONNECT":
                if framing.chunked or framing.length:
                    raise BadRequest("a CONNECT request has no body")
                host, port = _authority(target, default_port=None)
                upstream = await dialer.dial(host, port)
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                host, port, path = _absolute(target)
                upstream = await dialer.dial(host, port)
                forwarded = rebuilt_request(head, path.encode("ascii"), _host_header(host, port), framing)
        except Refused as exc:
            await _answer(client, b"403 Forbidden", str(exc))
            return
        except Unreachable as exc:
            await _answer(client, b"502 Bad Gateway", f"term2 proxy: {exc}")
            return
        except (BadRequest, ValueError) as exc:
            await _answer(client, b"400 Bad Request", f"term2 proxy: bad request: {exc}")
            return
        except (anyio.IncompleteRead, anyio.EndOfStream, TimeoutError):
            return
        if method == b"CONNECT":
            await relay(reader, client, upstream)
        else:
            await _exchange(reader, client, upstream, forwarded, framing)


async def _exchange(
    reader: BufferedByteReceiveStream, client: ByteStream, upstream: SocketStream, head: bytes, framing: Framing
) -> None:
    """One request out, its answer back. After the body, what the command sends is read and dropped
    until it ends its side, which is then ended towards the server (a server that kept the connection
    open despite ``Connection: close`` would hold it for the command's lifetime otherwise). A body that
    breaks the grammar half-way ends both connections: the server has seen an unfinished request,
    never what followed it."""
    bad: list[Exception] = []
    answered = False
    async with upstream, anyio.create_task_group() as tg:

        async def outbound() -> None:
            try:
                await upstream.send(head)
                await copy_body(reader, framing, upstream.send)
                async for _ignored in reader:  # a pipelined request: never forwarded, retried by the client
                    pass
                await upstream.send_eof()  # the command ended its side: a server waiting for more learns it
            except BadRequest as exc:
                bad.append(exc)
                tg.cancel_scope.cancel()
            except _GONE:
                tg.cancel_scope.cancel()

        tg.start_soon(outbound)
        replies = BufferedByteReceiveStream(upstream)
        try:
            while True:
                response = await read_response_head(replies)
                interim = response.start[1].startswith(b"1")
                if response.start[1] == b"101":
                    raise BadResponse("the server switched protocols, which the proxy never asks for")
                await client.send(rebuilt_response(response, final=not interim))
                answered = True
                if not interim:
                    break
            while True:
                await client.send(await replies.receive(_CHUNK))
        except BadResponse as exc:
            bad.append(exc)
        except _GONE:
            pass
        tg.cancel_scope.cancel()
    if bad and not answered:
        status = b"400 Bad Request" if isinstance(bad[0], BadRequest) else b"502 Bad Gateway"
        what = "bad request" if isinstance(bad[0], BadRequest) else "bad answer from the server"
        await _answer(client, status, f"term2 proxy: {what}: {bad[0]}")


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[1:end], text[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = text.rpartition(":") if ":" in text else (text, "", "")
    if not port_text:
        if default_port is None:
            raise BadRequest("CONNECT needs host:port")
        return host, default_port
    if not port_text.isdigit():
        raise BadRequest(f"bad port in {text!r}")
    return host, int(port_text)


def _absolute(target: str) -> tuple[str, int, str]:
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise BadRequest("a proxied request needs an absolute http:// URL (use CONNECT for https)")
    if "@" in url.netloc:
        raise BadRequest("user info in a request's URL")
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    return url.hostname, url.port or 80, path


def _host_header(host: str, port: int) -> bytes:
    shown = f"[{host}]" if ":" in host else host
    return (shown if port == 80 else f"{shown}:{port}").encode("ascii")


async def _answer(client: ByteStream, status: bytes, message: str) -> None:
    body = (message + "\n").encode()
    head = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
    head += b"X-Term2-Proxy: refused\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode()
    try:
        await client.send(head + b"\r\n\r\n" + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        _log.debug("network.client_gone")
