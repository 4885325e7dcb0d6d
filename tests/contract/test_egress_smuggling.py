"""The Egress port forwards only well-formed requests, rebuilt, one a connection (issue 30, item 8).

Against the filtering proxy over its real Unix sockets and a lenient raw server on 127.0.0.1 that
records every byte: whatever shape the command sends, the server must see only requests the proxy
parsed and rebuilt (CRLF lines, ``Name: value``, the checked Host), never a second request on a
connection and never a Host of the command's choosing. Each malformed shape gets a 400 and nothing
of it reaches the server. The client half-closes after sending, so every exchange ends without a
clock: the proxy passes the end on, the server closes, the answer ends.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import anyio
import pytest

from term2.adapters.network.proxy import FilteringProxy
from term2.domain.network import NetworkGrant, parse_hosts
from term2.ports.network import EgressSession
from term2.support.unix_stream import UnixStream
from tests.support.lenient_server import ANSWER, MALFORMED, ONE, SMUGGLED, Lenient, lenient_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def lenient() -> Iterator[Lenient]:
    with lenient_server() as server:
        yield server


def _proxy(lenient: Lenient) -> FilteringProxy:
    return FilteringProxy({("lenient.test", 80): ("127.0.0.1", lenient.port)})


async def exchange(net: EgressSession, data: bytes) -> bytes:
    """Send `data`, end the sending side, read the answer to its end."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(net.http_socket)
    stream = UnixStream(sock)
    answer = b""
    async with stream:
        await stream.send(data)
        await stream.send_eof()
        with anyio.fail_after(30):
            try:
                async for chunk in stream:
                    answer += chunk
            except anyio.BrokenResourceError:
                pass
    return answer


def _grant() -> NetworkGrant:
    return NetworkGrant(parse_hosts(["lenient.test"]))


async def test_a_pipelined_second_request_never_reaches_the_server(lenient: Lenient) -> None:
    async with _proxy(lenient).session(_grant()) as net:
        answer = await exchange(net, ONE + SMUGGLED)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"\r\nConnection: close\r\n" in answer
    assert answer.count(b"HTTP/1.1 200") == 1
    assert lenient.connections() == [
        b"GET /one HTTP/1.1\r\nHost: lenient.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    ]


async def test_each_request_gets_its_own_checked_connection(lenient: Lenient) -> None:
    async with _proxy(lenient).session(_grant()) as net:
        for _ in range(2):
            assert (await exchange(net, ONE)).endswith(b"lenient\n")
        refused = await exchange(net, b"GET http://evil.test/ HTTP/1.1\r\nHost: lenient.test\r\n\r\n")
    assert refused.startswith(b"HTTP/1.1 403") and net.refusals == ["blocked: evil.test was not approved"]
    assert lenient.hosts() == [b"lenient.test", b"lenient.test"]


@pytest.mark.parametrize("shape", list(MALFORMED))
async def test_a_malformed_request_is_refused_and_nothing_of_it_is_sent(lenient: Lenient, shape: str) -> None:
    async with _proxy(lenient).session(_grant()) as net:
        answer = await exchange(net, MALFORMED[shape])
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:200]
    assert lenient.connections() == []


async def test_headers_are_rebuilt_and_hop_by_hop_ones_dropped(lenient: Lenient) -> None:
    request = (
        b"POST http://lenient.test:80/up?x=1 HTTP/1.0\r\nhost: evil.test\r\nX-Keep:   spaced value \t\r\n"
        b"Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nProxy-Authorization: Basic x\r\n"
        b"TE: trailers\r\nUpgrade: h2c\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    )
    async with _proxy(lenient).session(_grant()) as net:
        answer = await exchange(net, request)
    assert answer.endswith(ANSWER[-8:])
    assert lenient.connections() == [
        b"POST /up?x=1 HTTP/1.1\r\nHost: lenient.test\r\nX-Keep: spaced value\r\nContent-Length: 5\r\n"
        b"Connection: close\r\n\r\nhello"
    ]


async def test_a_chunked_body_is_sent_re_encoded_and_stops_at_its_last_chunk(lenient: Lenient) -> None:
    request = (
        b"POST http://lenient.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n0006\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
        b"GET http://lenient.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    )
    async with _proxy(lenient).session(_grant()) as net:
        await exchange(net, request)
    assert lenient.connections() == [
        b"POST / HTTP/1.1\r\nHost: lenient.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    ]


async def test_a_chunked_body_that_breaks_the_grammar_is_cut_where_it_breaks(lenient: Lenient) -> None:
    request = (
        b"POST http://lenient.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\nGET http://lenient.test/ HTTP/1.1\nHost: evil.test\n\n"
    )
    async with _proxy(lenient).session(_grant()) as net:
        await exchange(net, request)
    # At most one connection, with at most what came before the break: the proxy drops it there, and the
    # server may not even have accepted it (or have read what was in flight) by then.
    connections = lenient.connections()
    assert len(connections) <= 1, connections
    sent = b"POST / HTTP/1.1\r\nHost: lenient.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    for received in connections:
        assert (sent + b"5\r\nhello\r\n").startswith(received), received


async def test_connect_stays_an_opaque_tunnel(lenient: Lenient) -> None:
    inside = b"GET / HTTP/1.1\r\nHost: lenient.test\r\n\r\n"
    async with _proxy(lenient).session(NetworkGrant(parse_hosts(["lenient.test:80"]))) as net:
        answer = await exchange(net, b"CONNECT lenient.test:80 HTTP/1.1\r\nHost: lenient.test:80\r\n\r\n" + inside)
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n") and answer.endswith(b"lenient\n")
    assert lenient.connections() == [inside]
