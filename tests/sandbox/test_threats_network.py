"""Network by approval under real bwrap, in both host modes: the proxy is the only way out.

The command keeps its own network namespace; with hosts approved it gains term2's proxy (Unix sockets
bound into its private /run, a loopback bridge) and nothing else. Every guarantee the threat suite
holds without network must hold with it: no host sockets, no writes outside the root, secrets
masked, no UDP or DNS, no other socket family reaching out; and nothing of the proxy outlives the run.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from term2.adapters.network.proxy import FilteringProxy
from term2.adapters.sandbox import BubblewrapSandbox
from term2.domain.network import NetworkGrant, parse_hosts
from term2.ports.sandbox import CommandRequest, CommandResult, SandboxFailed
from tests.sandbox.commands import py, text
from tests.sandbox.conftest import Box
from tests.support.registries import GREETING, Registry, fake_registry

pytestmark = pytest.mark.anyio

if not os.path.exists("/usr/bin/curl"):
    pytest.skip("curl is not installed (scripts/setup installs it)", allow_module_level=True)


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with fake_registry() as server:
        yield server


async def run(
    box: Box, registry: Registry, command: str, hosts: list[str] | None = ("registry.test",), **kw: float
) -> CommandResult:  # type: ignore[assignment]
    sandbox = BubblewrapSandbox(
        limits=box.limits, egress=FilteringProxy({("registry.test", 80): ("127.0.0.1", registry.port)})
    )
    grant = None if hosts is None else NetworkGrant(parse_hosts(list(hosts)))
    request = CommandRequest(
        command=command, root=str(box.root), cwd=str(box.root), timeout_s=kw.get("timeout_s", 20.0), network=grant
    )
    return await sandbox.run(request)


def _traces() -> list[str]:
    with open("/proc/net/unix") as table:
        listening = [line.split()[-1] for line in table if "term2-net-" in line]
    return listening + [name for name in os.listdir("/tmp") if name.startswith("term2-net-")]


async def test_an_approved_host_is_reached_through_the_proxy(box: Box, registry: Registry) -> None:
    result = await run(box, registry, "curl -sS --fail http://registry.test/hello")
    assert result.exit_code == 0, text(result)
    assert text(result) == GREETING.decode() and result.notices == ()


async def test_refusals_come_back_as_notices(box: Box, registry: Registry) -> None:
    result = await run(box, registry, "curl -sS http://github.com/; curl -sS https://github.com/; true")
    assert result.notices == ("blocked: github.com was not approved",)


async def test_the_bridge_keeps_the_commands_status(box: Box, registry: Registry) -> None:
    assert (await run(box, registry, "exit 7")).exit_code == 7
    assert (await run(box, registry, "kill -TERM $$")).exit_code == 128 + 15


async def test_no_udp_dns_or_other_family_reaches_out(box: Box, registry: Registry) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        result = await run(
            box,
            registry,
            py(f"""
            import socket
            for target in (("127.0.0.1", {port}), ("1.1.1.1", 53), ("192.0.2.1", 53)):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    s.sendto(b"leak", target)
                    print("udp sent", target)
                except OSError as exc:
                    print("udp failed", target[0], exc.errno)
            for family, kind in ((socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_INET, socket.SOCK_RAW),
                                 (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_INET6, socket.SOCK_DGRAM)):
                try:
                    s = socket.socket(family, kind, 0)
                    if family == socket.AF_INET6:
                        s.sendto(b"leak", ("2606:4700:4700::1111", 53))
                    print("family", family, "opened")
                except OSError as exc:
                    print("family", int(family), "failed")
            try:
                socket.getaddrinfo("example.com", 443)
                print("DNS-RESOLVED")
            except OSError:
                print("dns failed")
            """)
            + "getent hosts example.com || echo getent-failed; cat /proc/net/dev | tail -n +3 | cut -d: -f1",
            ["example.com", "registry.test"],
        )
        time.sleep(0.2)
        with pytest.raises(BlockingIOError):
            listener.recvfrom(64)  # the sandbox's "127.0.0.1" is its own loopback, never the host's
    finally:
        listener.close()
    out = text(result)
    assert "udp failed 1.1.1.1 101" in out and "udp failed 192.0.2.1 101" in out, out  # ENETUNREACH
    assert "DNS-RESOLVED" not in out and "dns failed" in out and "getent-failed" in out
    assert f"family {int(socket.AF_PACKET)} failed" in out and f"family {int(socket.AF_INET)} failed" in out
    assert f"family {int(socket.AF_INET6)} failed" in out  # no route for v6 either
    assert {line.strip() for line in out.splitlines()[-1:]} <= {"lo"}, out  # only the namespace's loopback


async def test_the_existing_guarantees_hold_with_network_on(box: Box, registry: Registry) -> None:
    box.write(box.root / ".env", "API_KEY=sk-network-secret\n")
    host_socket = box.base / "agent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(host_socket))
    os.chmod(host_socket, 0o777)
    server.listen(1)
    server.setblocking(False)
    try:
        result = await run(
            box,
            registry,
            f"echo owned > {box.outside}/owned-{box.tag} 2>&1; cat .env; ls -A /run/term2-network; "
            f"ls -A {box.base} /tmp /run; "
            + py(f"""
            import socket
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect("{host_socket}")
                print("HOST-SOCKET-CONNECTED")
            except OSError as exc:
                print("host socket refused", exc.errno)
            """)
            + "curl -sS --fail http://registry.test/hello",
        )
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    out = text(result)
    assert not (box.outside / f"owned-{box.tag}").exists()
    assert "sk-network-secret" not in out and "HOST-SOCKET-CONNECTED" not in out
    assert "http.sock\nsocks.sock\n" in out  # the two sockets, not the folder they live in on the host
    assert "term2-net-" not in out  # the host folder holding them is nowhere in the sandbox's view
    assert out.endswith(GREETING.decode()), out  # and the approved host is still reached


async def test_a_command_without_network_has_no_proxy(box: Box, registry: Registry) -> None:
    before = len(registry.requests)
    command = (
        "env | grep -ic proxy; ls /run/term2-network; curl -sS -m 3 -x http://127.0.0.1:3128 http://registry.test/hello"
    )
    out = text(await run(box, registry, command, None))
    assert out.startswith("0\n") and "No such file" in out and GREETING.decode() not in out, out
    assert registry.requests[before:] == []


async def test_nothing_of_the_proxy_outlives_the_command(box: Box, registry: Registry) -> None:
    assert _traces() == []
    result = await run(
        box, registry, "(sleep 300 &) ; setsid sleep 300 & curl -sS http://registry.test/hello; sleep 60", timeout_s=3.0
    )
    assert result.timed_out
    assert _traces() == []  # no listening socket, no folder
    bridges = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if b"/run/term2-network/http.sock" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    bridges.append(entry)
            except OSError:
                pass
    assert bridges == []


async def test_network_without_a_proxy_fails_and_runs_nothing(box: Box, registry: Registry) -> None:
    marker = box.root / f"ran-{box.tag}"
    request = CommandRequest(
        command=f"touch {marker}",
        root=str(box.root),
        cwd=str(box.root),
        network=NetworkGrant(parse_hosts(["pypi.org"])),
    )
    with pytest.raises(SandboxFailed, match="network by approval is not available"):
        await BubblewrapSandbox(limits=box.limits).run(request)
    assert not marker.exists()
