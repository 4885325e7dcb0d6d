"""The HTTP proxy: CONNECT for TLS (and anything else tunnelled), plain-HTTP requests forwarded.

What the command sends is untrusted: the head is bounded, the target is taken from the request line
alone (never from a Host header), and a forwarded request's Host header is rewritten to that target,
so what reaches the host names the host that was checked. Each plain request gets its own connection
(``Connection: close``): a second request on the same connection cannot ride on the first one's check.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio
import structlog
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream

from term2.adapters.network.dialer import Dialer, Refused, Unreachable
from term2.adapters.network.relay import relay

_log = structlog.get_logger("term2.network")

MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 30.0
_HOP_BY_HOP = {
    b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"proxy-authenticate", b"te",
    b"trailer", b"upgrade", b"host",
}  # fmt: skip


class BadRequest(Exception):
    pass


async def serve_http(client: ByteStream, dialer: Dialer) -> None:
    reader = BufferedByteReceiveStream(client)
    async with client:
        try:
            with anyio.fail_after(HEAD_TIMEOUT_S):
                head = await reader.receive_until(b"\r\n\r\n", MAX_HEAD)
            method, target, version, headers = _parse(head)
            if method == b"CONNECT":
                host, port = _authority(target.decode("ascii"), default_port=None)
                upstream = await dialer.dial(host, port)
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                host, port, path = _absolute(target.decode("ascii"))
                upstream = await dialer.dial(host, port)
                await upstream.send(_forwarded(method, path, version, headers, host, port))
        except Refused as exc:
            await _answer(client, b"403 Forbidden", str(exc))
            return
        except Unreachable as exc:
            await _answer(client, b"502 Bad Gateway", f"term2 proxy: {exc}")
            return
        except (BadRequest, UnicodeDecodeError, ValueError) as exc:
            await _answer(client, b"400 Bad Request", f"term2 proxy: bad request: {exc}")
            return
        except (anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.EndOfStream, TimeoutError):
            return
        await relay(reader, client, upstream)


def _parse(head: bytes) -> tuple[bytes, bytes, bytes, list[tuple[bytes, bytes]]]:
    line, *rest = head.split(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise BadRequest("the request line must be METHOD TARGET HTTP/1.x")
    headers: list[tuple[bytes, bytes]] = []
    for raw in rest:
        name, colon, value = raw.partition(b":")
        if not colon or not name or name != name.strip():
            raise BadRequest("malformed header line")
        headers.append((name, value.strip()))
    return parts[0], parts[1], parts[2], headers


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
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    return url.hostname, url.port or 80, path


def _forwarded(
    method: bytes, path: str, version: bytes, headers: list[tuple[bytes, bytes]], host: str, port: int
) -> bytes:
    shown = f"[{host}]" if ":" in host else host
    authority = shown if port == 80 else f"{shown}:{port}"
    lines = [method + b" " + path.encode("ascii") + b" " + version, b"Host: " + authority.encode("ascii")]
    lines += [name + b": " + value for name, value in headers if name.lower() not in _HOP_BY_HOP]
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _answer(client: ByteStream, status: bytes, message: str) -> None:
    body = (message + "\n").encode()
    head = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
    head += b"X-Term2-Proxy: refused\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode()
    try:
        await client.send(head + b"\r\n\r\n" + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        _log.debug("network.client_gone")
