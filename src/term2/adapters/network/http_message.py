"""HTTP/1.x messages read by the strictest reading, and rebuilt from what was read.

The proxy stands between an untrusted command and a server that may be more lenient than it. Any
byte the two could read differently (a bare CR or LF, a folded line, a control character, two
lengths, a length beside chunked) lets the command make the server see a request the proxy never
checked: a second request, another Host. So a request is read here by RFC 9110/9112's grammar with
none of its tolerances, anything outside it is `BadRequest`, and the proxy sends only what it
rebuilt from this parse (CRLF lines, ``Name: value``, its own framing), never the bytes it received.
h11 was not used: it accepts bare LF line ends, unfolds obs-fold, and takes Transfer-Encoding beside
Content-Length and repeated equal lengths (ADR 0041), the very shapes that must be refused here.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

MAX_LINE = 8 * 1024  # one request line, header line or chunk-size line
MAX_HEAD = 64 * 1024  # a whole header section (or a chunked body's trailers)
MAX_FIELDS = 128
_CHUNK = 65536

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 5.6.2 token: field names, methods
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # CTLs but HTAB (RFC 9110 5.5)
_TARGET = re.compile(rb"[\x21-\x7e]+\Z")  # visible ASCII: no space, no control, nothing raw past 0x7f
_VERSION = re.compile(rb"HTTP/1\.[01]\Z")
_STATUS = re.compile(rb"(HTTP/1\.[01]) ([1-9][0-9]{2}) ?(.*)\Z", re.DOTALL)
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})((?:;[^\x00-\x08\x0a-\x1f\x7f]*)?)\Z")

# Meaningful for one connection only (RFC 9110 7.6.1), so never forwarded; Host and the framing
# headers are dropped too, because the proxy writes its own from what it parsed.
HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"proxy-authenticate", b"te",
    b"trailer", b"transfer-encoding", b"upgrade",
})  # fmt: skip


class BadRequest(Exception):
    """Outside the grammar: answered 400 and the connection closed, nothing of it forwarded."""


class BadResponse(Exception):
    """The server's answer is outside the grammar: answered 502 when nothing was relayed yet."""


@dataclass(frozen=True, slots=True)
class Head:
    """A start line's three parts and the header fields, names as sent, values without their OWS."""

    start: tuple[bytes, bytes, bytes]
    fields: tuple[tuple[bytes, bytes], ...]

    def values(self, name: bytes) -> list[bytes]:
        return [value for key, value in self.fields if key.lower() == name]

    def connection_options(self) -> set[bytes]:
        """The names the Connection header lists: hop-by-hop for this message too (RFC 9110 7.6.1)."""
        return {token.strip().lower() for value in self.values(b"connection") for token in value.split(b",")}


@dataclass(frozen=True, slots=True)
class Framing:
    """How the body ends: ``chunked``, else ``length`` bytes; ``declared`` when a Content-Length was sent."""

    chunked: bool = False
    length: int = 0
    declared: bool = False


async def read_request(reader: BufferedByteReceiveStream) -> tuple[Head, Framing]:
    budget = _Budget(MAX_HEAD, BadRequest)
    parts = (await _line(reader, budget, BadRequest)).split(b" ")
    if len(parts) != 3 or not _VERSION.match(parts[2]):
        raise BadRequest("the request line must be METHOD TARGET HTTP/1.x")
    method, target, version = parts
    if not _TOKEN.match(method) or not _TARGET.match(target):
        raise BadRequest("a malformed method or target")
    head = Head((method, target, version), await _fields(reader, budget, BadRequest))
    if len(head.values(b"host")) > 1:
        raise BadRequest("more than one Host")  # RFC 9112 3.2: a 400, whichever the server would pick
    return head, request_framing(head)


def request_framing(head: Head) -> Framing:
    """RFC 9112 6: chunked or one Content-Length, never both, and no guessing between readings."""
    encodings, lengths = head.values(b"transfer-encoding"), head.values(b"content-length")
    if encodings and lengths:
        raise BadRequest("Transfer-Encoding and Content-Length together")
    if encodings:
        if head.start[2] == b"HTTP/1.0":
            raise BadRequest("Transfer-Encoding in an HTTP/1.0 request")
        if len(encodings) != 1 or encodings[0].lower() != b"chunked":
            raise BadRequest("only Transfer-Encoding: chunked is forwarded")
        return Framing(chunked=True)
    if len(lengths) > 1:
        raise BadRequest("more than one Content-Length")
    if not lengths:
        return Framing()
    if not lengths[0].isdigit() or len(lengths[0]) > 15:
        raise BadRequest("Content-Length must be a decimal number")
    return Framing(length=int(lengths[0]), declared=True)


async def read_response_head(reader: BufferedByteReceiveStream) -> Head:
    budget = _Budget(MAX_HEAD, BadResponse)
    status = _STATUS.match(await _line(reader, budget, BadResponse))
    if status is None or _BAD_VALUE.search(status.group(3)):
        raise BadResponse("the server's status line is not HTTP/1.x")
    version, code, reason = status.groups()
    return Head((version, code, reason), await _fields(reader, budget, BadResponse))


def rebuilt_request(head: Head, path: bytes, authority: bytes, framing: Framing) -> bytes:
    """The request as the proxy forwards it: its own version, Host, framing and ``Connection: close``."""
    method = head.start[0]
    lines = [method + b" " + path + b" HTTP/1.1", b"Host: " + authority]
    dropped = HOP_BY_HOP | head.connection_options() | {b"host", b"content-length"}
    lines += [name + b": " + value for name, value in head.fields if name.lower() not in dropped]
    if framing.chunked:
        lines.append(b"Transfer-Encoding: chunked")
    elif framing.declared:
        lines.append(b"Content-Length: " + str(framing.length).encode())
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def rebuilt_response(head: Head, *, final: bool) -> bytes:
    """The server's head for the command: connection options dropped, ``Connection: close`` on the final
    one (the proxy forwards one request a connection). The body after it is relayed as the server framed it."""
    version, code, reason = head.start
    lines = [version + b" " + code + b" " + reason]
    dropped = {b"connection", b"keep-alive", b"proxy-connection"} | head.connection_options()
    lines += [name + b": " + value for name, value in head.fields if name.lower() not in dropped]
    if final:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def copy_body(
    reader: BufferedByteReceiveStream, framing: Framing, send: Callable[[bytes], Awaitable[None]]
) -> None:
    """The body, and not a byte past it: a length is counted out; chunked is decoded and sent re-encoded,
    chunk extensions and trailers dropped (RFC 9112 7.1.1 and 7.1.2 allow it)."""
    if not framing.chunked:
        await _copy(reader, framing.length, send)
        return
    budget = _Budget(MAX_HEAD, BadRequest)
    while True:
        size_line = _CHUNK_SIZE.match(await _line(reader, budget, BadRequest))
        if size_line is None:
            raise BadRequest("malformed chunk size line")
        size = int(size_line.group(1), 16)
        if size == 0:
            break
        await send(b"%x\r\n" % size)
        await _copy(reader, size, send)
        if await reader.receive_exactly(2) != b"\r\n":
            raise BadRequest("a chunk's data is not followed by CRLF")
        await send(b"\r\n")
    await _fields(reader, budget, BadRequest)  # trailers: read by the same grammar, not forwarded
    await send(b"0\r\n\r\n")


async def _copy(reader: BufferedByteReceiveStream, count: int, send: Callable[[bytes], Awaitable[None]]) -> None:
    while count:
        chunk = await reader.receive(min(count, _CHUNK))
        count -= len(chunk)
        await send(chunk)


class _Budget:
    """What is left of a header section's bound; `error` is what exceeding it raises."""

    def __init__(self, size: int, error: type[Exception]) -> None:
        self.left = size
        self.error = error

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise self.error("header section too long")


async def _line(reader: BufferedByteReceiveStream, budget: _Budget, error: type[Exception]) -> bytes:
    """One line ended by CRLF and holding no other CR or LF."""
    try:
        line = await reader.receive_until(b"\n", MAX_LINE)
    except anyio.DelimiterNotFound:
        raise error("line too long") from None
    if len(line) > MAX_LINE:  # anyio finds a delimiter already buffered past its bound
        raise error("line too long")
    budget.spend(len(line) + 1)
    if not line.endswith(b"\r"):
        raise error("a line ended by a bare LF")
    line = line[:-1]
    if b"\r" in line:
        raise error("a bare CR in a line")
    return line


async def _fields(
    reader: BufferedByteReceiveStream, budget: _Budget, error: type[Exception]
) -> tuple[tuple[bytes, bytes], ...]:
    fields: list[tuple[bytes, bytes]] = []
    while line := await _line(reader, budget, error):
        if line[:1] in (b" ", b"\t"):
            raise error("a folded header line (obs-fold)")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.match(name):
            raise error("a malformed header name")
        value = value.strip(b" \t")
        if _BAD_VALUE.search(value):
            raise error(f"a control character in the value of {name.decode('ascii')}")
        fields.append((name, value))
        if len(fields) > MAX_FIELDS:
            raise error("too many header lines")
    return tuple(fields)
