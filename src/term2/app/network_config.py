"""`[network]` in config.toml: the proxy's host map (`resolve`), like curl's ``--resolve`` (ADR 0030).

A mapped name still needs the user's approval for each command; the map only says where the proxy
connects once it is approved, and it is the one way an approved name may lead to a loopback or
private address (a local mirror, a test registry).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from term2.domain.network import HostError, parse_endpoint

ResolveMap = dict[tuple[str, int], tuple[str, int]]


def network_resolve(block: Any, where: str) -> ResolveMap:
    """Check the whole `[network]` table; the first bad entry is a ConfigError naming it."""
    from term2.app.config import ConfigError

    if not isinstance(block, Mapping):
        raise ConfigError(f"{where}: network must be a table")
    unknown = set(block) - {"resolve"}
    if unknown:
        raise ConfigError(f"{where}: network: unknown keys {sorted(unknown)}")
    table = block.get("resolve", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f'{where}: network.resolve must be a table of "host:port" = "address:port"')
    out: ResolveMap = {}
    for key, value in table.items():
        at = f"{where}: network.resolve.{key!r}"
        if not isinstance(value, str):
            raise ConfigError(f'{at}: expected "address:port", got {value!r}')
        try:
            name = parse_endpoint(key)
            address, port = parse_endpoint(value)
            ipaddress.ip_address(address)
        except HostError as exc:
            raise ConfigError(f"{at}: {exc}") from None
        except ValueError:
            raise ConfigError(f"{at}: {value!r} must be an IP address and a port, e.g. 127.0.0.1:8080") from None
        out[name] = (address, port)
    return out
