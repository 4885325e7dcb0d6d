"""Network by approval: which hosts a command may reach, and which addresses never count as a host's.

A command that asks for the network names its hosts; the user approves them for that one command,
and term2's proxy outside the sandbox lets it reach those names and nothing else (ADR 0030). This
module is the rule, without I/O: how a host is written, what a pattern matches, and which addresses
a name must not lead to unless the user's own host map sends it there.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

DEFAULT_PORTS = (80, 443)  # a host named without a port: plain HTTP and TLS
MAX_HOSTS = 32  # one approval question must stay readable
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


class HostError(ValueError):
    """A host the model asked for cannot be approved as written; the message says why."""


@dataclass(frozen=True, slots=True)
class HostPattern:
    """One approved host: a name, an IP literal, or ``*.`` + a domain (its subdomains, not the domain)."""

    host: str  # lower case, no trailing dot; for a wildcard, the domain after "*."
    port: int | None = None  # None: the default ports
    wildcard: bool = False

    def matches(self, host: str, port: int) -> bool:
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        name = normalize_host(host)
        if self.wildcard:
            return name.endswith("." + self.host)
        return name == self.host

    def __str__(self) -> str:
        shown = f"*.{self.host}" if self.wildcard else (f"[{self.host}]" if ":" in self.host else self.host)
        return shown if self.port is None else f"{shown}:{self.port}"


@dataclass(frozen=True, slots=True)
class NetworkGrant:
    """The hosts one approved command may reach, through the proxy only."""

    hosts: tuple[HostPattern, ...]

    def allows(self, host: str, port: int) -> bool:
        return any(pattern.matches(host, port) for pattern in self.hosts)

    def names_host(self, host: str) -> bool:
        """Whether `host` was approved on some port (to word a refusal of the wrong port)."""
        name = normalize_host(host)
        return any(name.endswith("." + p.host) if p.wildcard else name == p.host for p in self.hosts)

    def __str__(self) -> str:
        return ", ".join(str(pattern) for pattern in self.hosts)


def shown_host(host: str) -> str:
    """`host` as a refusal line names it: a command chooses the name it asks for, so anything but
    printable ASCII is written as an escape (``\\x1b``, ``\\u202e``), and the line cannot carry a
    terminal escape sequence, break into a line the command forged, or read backwards."""
    return "".join(
        char
        if " " < char < "\x7f" and char != "\\"
        else (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
        for char in host
    )


def normalize_host(host: str) -> str:
    """The form hosts are compared in: lower case, no trailing dot, IP literals canonical and unbracketed."""
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def parse_host(text: str) -> HostPattern:
    """One host as the model writes it: ``name``, ``name:port``, ``*.domain[:port]``, ``1.2.3.4``, ``[::1]:8080``."""
    raw = text.strip()
    if not raw:
        raise HostError("a host must not be empty")
    if "://" in raw or "/" in raw or "@" in raw or any(c.isspace() for c in raw):
        raise HostError(f"{text!r} is not a host: give a name and an optional port, e.g. pypi.org or pypi.org:443")
    host, port = _split_port(raw)
    wildcard = host.startswith("*.")
    if wildcard:
        host = host[2:]
    if "*" in host:
        raise HostError(f"{text!r}: a wildcard is only allowed as a whole first label, e.g. *.example.org")
    name = normalize_host(host)
    if _is_ip(name):
        if wildcard:
            raise HostError(f"{text!r}: an IP address cannot take a wildcard")
        return HostPattern(name, port)
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise HostError(f"{text!r} is not a valid host name")
    if wildcard and len(labels) < 2:
        raise HostError(f"{text!r} is too wide: a wildcard needs a domain of two labels or more, e.g. *.example.org")
    return HostPattern(name, port, wildcard)


def parse_hosts(values: list[str]) -> tuple[HostPattern, ...]:
    if not values:
        raise HostError("name at least one host, or leave the argument out for no network")
    if len(values) > MAX_HOSTS:
        raise HostError(f"at most {MAX_HOSTS} hosts per command")
    patterns: list[HostPattern] = []
    for value in values:
        pattern = parse_host(value)
        if pattern not in patterns:
            patterns.append(pattern)
    return tuple(patterns)


def parse_endpoint(text: str) -> tuple[str, int]:
    """A ``host:port`` (or ``[v6]:port``) with the port required, as ``[network.resolve]`` writes both sides."""
    host, port = _split_port(text.strip())
    if port is None:
        raise HostError(f"{text!r} needs a port, e.g. registry.test:80")
    name = normalize_host(host)
    if not name or "*" in name:
        raise HostError(f"{text!r} is not a host and port")
    return name, port


def is_public_address(address: str) -> bool:
    """Whether a name may lead to `address` without the user's host map saying so.

    Loopback, private, link-local (cloud metadata at 169.254.169.254 included), unique-local
    (fd00::/8 and the rest of fc00::/7), shared, multicast, reserved and unspecified addresses
    reach the user's own machine or network, never "a host on the internet"; IPv4 inside IPv6
    (mapped, NAT64's 64:ff9b::/96) is judged by the IPv4 it carries. The stdlib's tables changed
    in a security fix (CVE-2024-4032: Python 3.11.10, and distributions' backports), so the blocks
    it added are named here, whatever interpreter runs this: 6to4 (2002::/16, deprecated, reached
    through whichever relay answers), local-use NAT64 (64:ff9b:1::/48, a local translator) and
    the IETF's special-purpose blocks (192.0.0.0/24, 2001::/23) are never public.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if any(ip in block for block in _NEVER_PUBLIC):
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_v4(ip)
        if embedded is not None:
            return is_public_address(str(embedded))
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_loopback or ip.is_link_local)


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NEVER_PUBLIC = (
    ipaddress.IPv4Network("192.0.0.0/24"),
    ipaddress.IPv6Network("64:ff9b:1::/48"),
    ipaddress.IPv6Network("2001::/23"),  # the new tables except a few anycast and ORCHID blocks: refuse all
    ipaddress.IPv6Network("2002::/16"),
)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _split_port(raw: str) -> tuple[str, int | None]:
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise HostError(f"{raw!r}: an IPv6 address must be closed with ]")
        host, rest = raw[1:end], raw[end + 1 :]
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise HostError(f"{raw!r} is not a host and port")
        return host, _port(rest[1:], raw)
    if raw.count(":") > 1:  # a bare IPv6 address, no port
        return raw, None
    host, colon, port = raw.partition(":")
    return host, (_port(port, raw) if colon else None)


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise HostError(f"{whole!r}: the port must be a number from 1 to 65535")
    return int(text)
