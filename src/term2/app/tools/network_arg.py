"""The `network` argument of run_shell and run_code: the hosts a command asks the user for (ADR 0030)."""

from __future__ import annotations

from typing import Any

from term2.app.tools.args import ArgumentError, Arguments, optional_str_list
from term2.domain.network import DEFAULT_PORTS, HostError, NetworkGrant, parse_hosts

NETWORK_SPEC: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "description": (
        'Hosts the command needs to reach, e.g. ["pypi.org", "files.pythonhosted.org"] for pip or '
        '["registry.npmjs.org"] for npm. Leave it out when no network is needed: commands have none. '
        f"A host without a port means ports {' and '.join(map(str, DEFAULT_PORTS))}; add ':port' for another; "
        "'*.example.org' allows its subdomains. The user is asked every time. Connections go through an "
        "HTTP/SOCKS proxy (set in the environment), so the tool must honour HTTP(S)_PROXY; anything else "
        "is refused, and the result names each host that was blocked."
    ),
}


def network_grant(args: Arguments) -> NetworkGrant | None:
    hosts = optional_str_list(args, "network")
    if hosts is None:
        return None
    try:
        return NetworkGrant(parse_hosts(hosts))
    except HostError as exc:
        raise ArgumentError(f"argument 'network': {exc}") from None
