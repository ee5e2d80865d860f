"""Which webhook targets Relay may connect to: the SSRF guard's rules. Plain Python.

A webhook URL is written by a marketer, so it must never become a way to reach
the machines behind Relay (the database, the cloud metadata service, an admin
panel on localhost). The rule: resolve the host, refuse it when ANY address it
resolves to is not a public unicast address, then connect to the address that
was checked (infrastructure pins the connection; this module decides).

Hosts are read the way C resolvers read them, so `2130706433`, `0x7f000001`,
`0177.0.0.1` and `127.1` are all 127.0.0.1 here too; IPv6 forms that carry an
IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by the
IPv4 address inside. `WEBHOOK_ALLOWED_HOSTS` names the only exceptions.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# resolve(host, port) -> the addresses the name resolves to, as strings (getaddrinfo's answer).
Resolver = Callable[[str, int], list[str]]

_NUMERIC_LABEL = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")
_METADATA = {ipaddress.IPv4Address("169.254.169.254"), ipaddress.IPv6Address("fd00:ec2::254")}
# Ranges no public service answers on that some Python versions' `ipaddress` still counts as global:
# 3fff::/20 (IPv6 documentation, RFC 9637) and 192.88.99.0/24 (the retired 6to4 relay anycast, RFC 7526).
_NOT_PUBLIC = (ipaddress.IPv6Network("3fff::/20"), ipaddress.IPv4Network("192.88.99.0/24"))


class TargetRefused(Exception):
    """The SSRF guard refused the target; the message says why (host and address, never the path)."""


def parse_ipv4_literal(host: str) -> ipaddress.IPv4Address | None:
    """Read `host` as inet_aton(3) does: 1 to 4 parts, each decimal, 0x-hex or 0-octal.

    Returns None when `host` is not written as a number at all (a name to resolve);
    raises TargetRefused when it is written as a number that is no valid address,
    so a malformed literal is never handed to a resolver that might read it otherwise.
    """
    labels = host.split(".")
    if labels and labels[-1] == "" and len(labels) > 1:
        labels = labels[:-1]  # a trailing dot changes nothing for a literal
    if not labels or not all(_NUMERIC_LABEL.match(label) for label in labels):
        return None
    if len(labels) > 4:
        raise TargetRefused(f"{host} is not a valid IP address")
    values: list[int] = []
    for label in labels:
        try:
            if label[:2].lower() == "0x":
                value = int(label[2:] or "0", 16)
            elif len(label) > 1 and label.startswith("0"):
                value = int(label, 8)
            else:
                value = int(label, 10)
        except ValueError:  # e.g. "089": an octal label with a non-octal digit
            raise TargetRefused(f"{host} is not a valid IP address") from None
        values.append(value)
    *head, last = values
    if any(v > 0xFF for v in head) or last >= 1 << (8 * (4 - len(head))):
        raise TargetRefused(f"{host} is not a valid IP address")
    number = last
    for index, value in enumerate(head):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address `host` names directly (any IPv4 spelling, IPv6 with or without brackets), else None."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in bare:
        try:
            return ipaddress.IPv6Address(bare)
        except ValueError:
            raise TargetRefused(f"{host} is not a valid IPv6 address") from None
    return parse_ipv4_literal(bare)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address stands for, when it carries one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    packed = int(address)
    if packed >> 32 == 0 and packed > 1:  # ::a.b.c.d (deprecated IPv4-compatible); ::, ::1 are judged as IPv6
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF), "IPv4-compatible"
    if address in _NAT64 or address in _NAT64_LOCAL:
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF), "NAT64"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address.teredo is not None:
        return address.teredo[1], "Teredo"
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why Relay must not connect to `address`, or None for a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return "a scoped (zone) IPv6 address"
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner, kind = embedded
            reason = refusal_reason(inner)
            if reason:
                return f"{reason} ({kind} {inner})"
    if address in _METADATA:
        return "the cloud metadata address"
    if address == _BROADCAST:
        return "the broadcast address"
    checks = (
        ("is_unspecified", "an unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_reserved", "a reserved address"),
        ("is_private", "a private address"),
    )
    for attribute, reason in checks:
        if getattr(address, attribute):
            return reason
    if not address.is_global or any(
        address in network for network in _NOT_PUBLIC if network.version == address.version
    ):
        # shared (100.64/10), documentation, benchmarking ... ranges
        return "not a public address"
    return None


def normalize_host(host: str) -> str:
    """Compare host names as DNS does: case-insensitive, trailing dot ignored, brackets off IPv6."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host.rstrip(".")
    if ":" in host:
        with contextlib.suppress(ValueError):
            host = ipaddress.IPv6Address(host).compressed
    return host


@dataclass(frozen=True)
class AllowList:
    """WEBHOOK_ALLOWED_HOSTS: `host` (any port) or `host:port`; `[v6]` or `[v6]:port` for IPv6.

    An entry lets exactly the host as written through (no other spelling of the
    same address): named internal targets for development and tests.
    """

    entries: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def parse(cls, raw: Iterable[str] | str | None) -> AllowList:
        if raw is None:
            return cls()
        if isinstance(raw, str):
            raw = raw.split(",")
        entries: set[tuple[str, int | None]] = set()
        for item in raw:
            item = item.strip()
            if item:
                entries.add(cls._parse_entry(item))
        return cls(frozenset(entries))

    @staticmethod
    def _parse_entry(item: str) -> tuple[str, int | None]:
        host, port_text = item, ""
        if item.startswith("["):
            end = item.find("]")
            if end < 0:
                raise ValueError(f"WEBHOOK_ALLOWED_HOSTS: {item!r} has an unclosed '['")
            host, rest = item[: end + 1], item[end + 1 :]
            if rest and not rest.startswith(":"):
                raise ValueError(f"WEBHOOK_ALLOWED_HOSTS: {item!r} is not host or host:port")
            port_text = rest[1:]
        elif item.count(":") == 1:
            host, port_text = item.split(":")
        port: int | None = None
        if port_text:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ValueError(f"WEBHOOK_ALLOWED_HOSTS: {item!r} has an invalid port")
            port = int(port_text)
        host = normalize_host(host)
        if not host:
            raise ValueError(f"WEBHOOK_ALLOWED_HOSTS: {item!r} has no host")
        return host, port

    def allows(self, host: str, port: int) -> bool:
        host = normalize_host(host)
        return (host, port) in self.entries or (host, None) in self.entries

    def __bool__(self) -> bool:
        return bool(self.entries)


@dataclass(frozen=True)
class VettedTarget:
    """Where a webhook may go: the host as named (for Host, SNI and the certificate) and the checked address."""

    host: str
    port: int
    address: str  # connect here, and only here
    allow_listed: bool = False


def vet_target(host: str, port: int, *, allow_list: AllowList, resolve: Resolver) -> VettedTarget:
    """Check a webhook target and choose the address to connect to, or raise TargetRefused."""
    host = normalize_host(host)
    if not host:
        raise TargetRefused("the URL has no host")
    allow_listed = allow_list.allows(host, port)
    literal = parse_ip_literal(host)
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    else:
        addresses = [_parse_resolved(host, answer) for answer in resolve(host, port)]
        if not addresses:
            raise TargetRefused(f"{host} did not resolve to any address")
    if not allow_listed:
        for address in addresses:
            reason = refusal_reason(address)
            if reason:
                where = f"{host} is" if literal is not None else f"{host} resolves to {address}, which is"
                raise TargetRefused(f"{where} {reason}; only public addresses are allowed")
    # One address is chosen and pinned; IPv4 first, as most receivers' IPv6 routes are the ones that break.
    chosen = next((a for a in addresses if a.version == 4), addresses[0])
    return VettedTarget(host=host, port=port, address=str(chosen), allow_listed=allow_listed)


def _parse_resolved(host: str, answer: str) -> IPAddress:
    try:
        return ipaddress.ip_address(answer.split("%", 1)[0] if "%" in answer else answer)
    except ValueError:
        raise TargetRefused(f"{host} resolved to something that is not an IP address") from None
