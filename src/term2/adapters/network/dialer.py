"""Where one proxied connection may go: the approval, the host map, the proxy's own resolution.

Every connection either proxy makes goes through `Dialer.dial`, so the rule is applied in one
place: the name must be approved (for that port); a name in the user's host map goes to the mapped
address, whatever it is, because the user wrote it there; any other name is resolved here, never by
the command, and only its public addresses are tried. The proxy connects to the address it
resolved itself, so a command cannot point an approved name somewhere else, and a name whose
answers are all private (a rebinding trick, an internal name) is refused rather than reached.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio
import anyio.abc

from term2.domain.network import NetworkGrant, is_public_address, normalize_host, shown_host
from term2.support.deferred_log import get_logger

_log = get_logger("term2.network")

ResolveMap = Mapping[tuple[str, int], tuple[str, int]]  # (name, port) -> (address, port), curl --resolve's table


class Refused(Exception):
    """The rule refuses this connection; the message is the line the model and the user read."""


class Unreachable(Exception):
    """An allowed destination could not be reached (no address, connection refused, timeout)."""


@dataclass(slots=True)
class Dialer:
    grant: NetworkGrant
    resolve: ResolveMap
    refusals: list[str]
    connect_timeout: float = 15.0
    _seen: set[str] = field(default_factory=set)

    def refuse(self, message: str) -> Refused:
        """Record a refusal (once per message) and return the exception to raise. A name in `message`
        was chosen by the command: it comes here through `shown_host`, escaped."""
        if message not in self._seen:
            self._seen.add(message)
            self.refusals.append(message)
            _log.info("network.blocked", reason=message)
        return Refused(message)

    async def dial(self, host: str, port: int) -> anyio.abc.SocketStream:
        name = normalize_host(host)
        if not name or not 0 < port < 65536:
            raise self.refuse(f"blocked: '{shown_host(host)}' is not a host")
        if not self.grant.allows(name, port):
            if self.grant.names_host(name):
                raise self.refuse(f"blocked: {shown_host(name)} port {port} was not approved (approved: {self.grant})")
            raise self.refuse(f"blocked: {shown_host(name)} was not approved")
        last: Exception | None = None
        for address, target_port in await self._addresses(name, port):
            try:
                with anyio.fail_after(self.connect_timeout):
                    return await anyio.connect_tcp(address, target_port)
            except (OSError, TimeoutError) as exc:
                last = exc
        raise Unreachable(f"{name}:{port} could not be reached: {last}")

    async def _addresses(self, name: str, port: int) -> list[tuple[str, int]]:
        mapped = self.resolve.get((name, port))
        if mapped is not None:
            return [mapped]  # the user's own map: its address is used as written, private or not
        try:
            infos = await anyio.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise Unreachable(f"{name} could not be resolved: {exc}") from exc
        found: list[str] = []
        for _family, _kind, _proto, _canon, sockaddr in infos:
            address = str(sockaddr[0])
            if address not in found:
                found.append(address)
        public = [address for address in found if is_public_address(address)]
        if not public:
            shown = ", ".join(found[:4]) or "nothing"
            raise self.refuse(
                f"blocked: {shown_host(name)} resolves to {shown}, not a public address; only a [network.resolve] "
                "entry in term2's config.toml can send an approved name to such an address"
            )
        return [(address, port) for address in public]
