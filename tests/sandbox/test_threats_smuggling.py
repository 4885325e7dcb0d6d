"""Request smuggling through the egress proxy, from inside real bwrap (issue 30, item 8).

A command approved for one host speaks HTTP itself, over the loopback bridge to term2's proxy, to
a lenient server on 127.0.0.1 (reached through the host map) that records every byte: a pipelined
second request naming another Host, a header value with a bare LF, and every other shape the
proxy must refuse. The server must see exactly one request, rebuilt by the proxy, and no Host but
the approved one. Each exchange ends by the command half-closing its side, not by a clock.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from term2.adapters.network.proxy import FilteringProxy
from term2.adapters.sandbox import BubblewrapSandbox
from term2.domain.network import NetworkGrant, parse_hosts
from term2.ports.sandbox import CommandRequest
from tests.sandbox.commands import py, text
from tests.sandbox.conftest import Box
from tests.support.lenient_server import MALFORMED, ONE, SMUGGLED, Lenient, lenient_server

pytestmark = pytest.mark.anyio

# Sends each case on its own connection to the bridge, ends its side, prints the answer's status line.
_CLIENT = """
import base64, json, socket
for name, data in json.load(open("smuggling-cases.json")):
    sock = socket.create_connection(("127.0.0.1", 3128))
    sock.sendall(base64.b64decode(data))
    sock.shutdown(socket.SHUT_WR)
    answer = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        answer += chunk
    print(name, "=>", answer.split(b"\\r\\n", 1)[0].decode(), answer.count(b"HTTP/1.1 200"))
"""


@pytest.fixture(scope="module")
def lenient() -> Iterator[Lenient]:
    with lenient_server() as server:
        yield server


async def test_only_rebuilt_well_formed_requests_reach_a_lenient_server(box: Box, lenient: Lenient) -> None:
    before = len(lenient.connections())
    cases = [("pipelined", ONE + SMUGGLED), *MALFORMED.items()]
    box.write(box.root / "smuggling-cases.json", json.dumps([(n, base64.b64encode(d).decode()) for n, d in cases]))
    sandbox = BubblewrapSandbox(
        limits=box.limits, egress=FilteringProxy({("lenient.test", 80): ("127.0.0.1", lenient.port)})
    )
    request = CommandRequest(
        command=py(_CLIENT),
        root=str(box.root),
        cwd=str(box.root),
        timeout_s=60.0,
        network=NetworkGrant(parse_hosts(["lenient.test"])),
    )
    result = await sandbox.run(request)
    lines = dict(line.split(" => ") for line in text(result).splitlines())
    assert result.exit_code == 0 and len(lines) == len(cases), text(result)
    assert lines.pop("pipelined") == "HTTP/1.1 200 OK 1"  # the first answered, once
    assert lines == {name: "HTTP/1.1 400 Bad Request 0" for name in MALFORMED}
    assert lenient.connections()[before:] == [
        b"GET /one HTTP/1.1\r\nHost: lenient.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    ]
