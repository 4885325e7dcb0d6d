"""Egress port: the one way a sandboxed command reaches the network, for the hosts the user approved.

The command keeps a network namespace with nothing but loopback; an adapter of this port runs,
outside the sandbox and for that command's lifetime only, proxies that connect to approved names
and nothing else (ADR 0030). The sandbox binds the two Unix sockets it gets into the command's view
and ends the session when the command ends: nothing keeps listening after it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from term2.domain.network import NetworkGrant


@dataclass(slots=True)
class EgressSession:
    """The proxies of one command: where they listen, and what they refused so far."""

    http_socket: str  # HTTP proxy (CONNECT and plain-HTTP forwarding) on a Unix socket
    socks_socket: str  # SOCKS5 proxy (CONNECT only) on a Unix socket
    refusals: list[str] = field(default_factory=list)  # "blocked: github.com was not approved", in order, once each


class Egress(Protocol):
    def session(
        self, grant: NetworkGrant, *, owner: tuple[int, int] | None = None
    ) -> AbstractAsyncContextManager[EgressSession]:
        """Listen for the command while the context is open; on exit stop listening, drop every connection
        and remove the sockets. ``owner`` (uid, gid) is who may connect, when that is not term2 itself."""
        ...
