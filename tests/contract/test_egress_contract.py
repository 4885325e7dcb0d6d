"""The Egress port's contract, against the filtering proxy, over its real Unix sockets and real servers.

What any adapter must do: connect approved names only, resolve names itself and refuse non-public
answers unless the host map names the address, keep plain requests to the host that was checked,
refuse SOCKS BIND and UDP, record each refusal once, and leave nothing listening after the session.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager

import anyio
import pytest
from anyio.abc import ByteStream

from term2.adapters.network.proxy import FilteringProxy
from term2.domain.network import NetworkGrant, parse_hosts
from term2.ports.network import Egress, EgressSession
from term2.support.unix_stream import UnixStream
from tests.support.registries import GREETING, Registry, fake_registry

pytestmark = pytest.mark.anyio

Open = Callable[[list[str]], AbstractAsyncContextManager[EgressSession]]


@pytest.fixture
def registry() -> Iterator[Registry]:
    with fake_registry() as server:
        yield server


@pytest.fixture(params=["filtering-proxy"])
def egress(request: pytest.FixtureRequest, registry: Registry) -> Egress:
    assert request.param == "filtering-proxy"
    return FilteringProxy(
        {("registry.test", 80): ("127.0.0.1", registry.port), ("registry.test", 443): ("127.0.0.1", registry.port)}
    )


def session(egress: Egress, *hosts: str) -> AbstractAsyncContextManager[EgressSession]:
    return egress.session(NetworkGrant(parse_hosts(list(hosts))))


async def _connect(path: str) -> ByteStream:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)  # a listening Unix socket takes the connection at once, into its backlog
    return UnixStream(sock)  # not anyio's: see term2.support.unix_stream


async def _read_all(stream: ByteStream) -> bytes:
    data = b""
    with anyio.fail_after(10):
        try:
            async for chunk in stream:
                data += chunk
        except anyio.BrokenResourceError:
            pass
    return data


async def http(net: EgressSession, request: bytes) -> bytes:
    stream = await _connect(net.http_socket)
    async with stream:
        await stream.send(request)
        return await _read_all(stream)


async def test_a_plain_request_to_an_approved_name_is_forwarded_to_that_host(
    egress: Egress, registry: Registry
) -> None:
    async with session(egress, "registry.test") as net:
        answer = await http(
            net, b"GET http://registry.test/hello HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: x\r\n\r\n"
        )
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(GREETING)
    assert registry.requests == [("registry.test", "/hello")]  # the Host header names the checked host
    assert net.refusals == []


async def test_connect_tunnels_to_an_approved_name(egress: Egress, registry: Registry) -> None:
    async with session(egress, "registry.test") as net:
        answer = await http(
            net,
            b"CONNECT registry.test:443 HTTP/1.1\r\nHost: registry.test:443\r\n\r\n"
            b"GET /hello HTTP/1.1\r\nHost: registry.test\r\nConnection: close\r\n\r\n",
        )
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200")
    assert answer.endswith(GREETING)


async def test_a_name_that_was_not_approved_is_refused_once_and_recorded(egress: Egress, registry: Registry) -> None:
    async with session(egress, "registry.test") as net:
        for _ in range(2):
            answer = await http(net, b"CONNECT github.com:443 HTTP/1.1\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 403") and b"blocked: github.com was not approved" in answer
        other_port = await http(net, b"GET http://registry.test:8080/hello HTTP/1.1\r\n\r\n")
    assert other_port.startswith(b"HTTP/1.1 403")
    assert net.refusals[0] == "blocked: github.com was not approved" and len(net.refusals) == 2
    assert "registry.test port 8080 was not approved" in net.refusals[1]
    assert registry.requests == []


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "169.254.169.254", "[::1]"])
async def test_an_approved_name_is_not_reached_at_a_non_public_address(
    egress: Egress, registry: Registry, host: str
) -> None:
    async with session(egress, f"{host}:{registry.port}") as net:
        answer = await http(net, f"GET http://{host}:{registry.port}/hello HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403") and b"not a public address" in answer, answer
    assert registry.requests == []


async def _socks(net: EgressSession, command: int, host: bytes, port: int) -> tuple[int, ByteStream]:
    stream = await _connect(net.socks_socket)
    await stream.send(b"\x05\x01\x00")
    assert await stream.receive() == b"\x05\x00"
    await stream.send(bytes((5, command, 0, 3, len(host))) + host + struct.pack("!H", port))
    reply = await stream.receive()
    return reply[1], stream


async def test_socks_connects_approved_names_only(egress: Egress, registry: Registry) -> None:
    async with session(egress, "registry.test") as net:
        code, stream = await _socks(net, 1, b"registry.test", 80)
        async with stream:
            assert code == 0
            await stream.send(b"GET /hello HTTP/1.0\r\nHost: registry.test\r\n\r\n")
            assert (await _read_all(stream)).endswith(GREETING)
        code, stream = await _socks(net, 1, b"github.com", 443)
        await stream.aclose()
        assert code == 2  # not allowed by the ruleset
        for command in (2, 3):  # BIND, UDP ASSOCIATE: even to an approved name
            code, stream = await _socks(net, command, b"registry.test", 80)
            await stream.aclose()
            assert code == 7
    assert "blocked: github.com was not approved" in net.refusals
    assert any("UDP ASSOCIATE" in line for line in net.refusals) and any("BIND" in line for line in net.refusals)


async def test_malformed_requests_are_answered_and_the_proxy_goes_on(egress: Egress, registry: Registry) -> None:
    async with session(egress, "registry.test") as net:
        assert (await http(net, b"NONSENSE\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await http(net, b"GET https://registry.test/ HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await http(net, b"CONNECT registry.test HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        too_long = await http(net, b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 20000)
        assert too_long.startswith(b"HTTP/1.1 400")  # head too long: answered and closed
        assert (await http(net, b"GET http://registry.test/hello HTTP/1.1\r\n\r\n")).endswith(GREETING)


async def test_nothing_listens_after_the_session(egress: Egress) -> None:
    async with session(egress, "registry.test") as net:
        for path in (net.http_socket, net.socks_socket):
            mode = os.stat(path).st_mode
            assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        folder = os.path.dirname(net.http_socket)
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        held = await _connect(net.http_socket)  # a connection still open when the command ends
    assert not os.path.exists(folder)
    with pytest.raises(OSError), socket.socket(socket.AF_UNIX) as probe:
        probe.connect(net.http_socket)
    with anyio.fail_after(60):
        assert await _read_all(held) == b""  # dropped, not kept
    await held.aclose()


async def test_an_error_in_the_body_comes_out_as_itself(egress: Egress) -> None:
    with pytest.raises(KeyError):
        async with session(egress, "registry.test"):
            raise KeyError("the command's own failure")


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_flood_of_idle_connections_neither_ends_the_session_nor_holds_a_descriptor_each(
    egress: Egress, registry: Registry
) -> None:
    """A command that opens far more connections than the proxy serves at once: the extra ones wait in the
    kernel's backlog, not as descriptors in term2, and the session still serves a real request after."""
    async with session(egress, "registry.test") as net:
        before = _open_descriptors()
        flood: list[socket.socket] = []
        try:
            for _ in range(600):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.setblocking(False)
                try:
                    sock.connect(net.http_socket)
                except BlockingIOError:
                    pass  # the backlog is full: the kernel holds the rest back, as intended
                flood.append(sock)
            await anyio.sleep(0.5)  # let the proxy accept what it will
            held_by_proxy = _open_descriptors() - before - len(flood)
            assert held_by_proxy <= 256 + 8, f"the proxy holds {held_by_proxy} descriptors for idle clients"
        finally:
            for sock in flood:
                sock.close()
        answer = await http(net, b"GET http://registry.test/hello HTTP/1.1\r\nHost: registry.test\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 200")
