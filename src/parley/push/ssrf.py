"""Webhook URLs that cannot be turned against the server's own network (SSRF).

A push-notification URL comes from a client, and the server POSTs to it: without checks a client
could make the server call its loopback admin ports, the cloud metadata service or the private
network. :class:`UrlGuard` checks a URL twice, when it is registered (:meth:`UrlGuard.check_registration`)
and again at every delivery (:meth:`UrlGuard.check`):

* only `http` and `https`, a host, no user name or password in the URL;
* the host is resolved, and *every* address it resolves to must be public: loopback, private
  (RFC 1918, unique-local), link-local (169.254/16 holds the cloud metadata services), carrier-grade
  NAT, multicast, reserved, unspecified and the Azure platform address 168.63.129.16 are refused, and so
  is an IPv6 address that carries one of those in IPv4 form (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
  `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`: the embedded address is decoded and checked), unless
  an allowlist entry (`[push] allow`, `parley serve --push-allow CIDR`) contains the address;
* the connection then goes to the address that was checked (:class:`Target`), with the original
  host name in `Host` and in TLS SNI and certificate checks, so DNS cannot change its answer between
  the check and the connection (no rebinding window).

A name that does not resolve *at registration* is accepted (its syntax is checked, and it is neither an IP
literal nor a metadata host name): a passing DNS failure must not refuse a legitimate webhook, and a name
that does not resolve cannot reach anything. What it resolves to is decided at delivery, which always
resolves and checks every address; there an unresolvable name is a failed attempt (:class:`Unresolved`,
retried, then dead-lettered) and an unsafe address refuses the notification.

A2A 1.0 section 13.2 (agents SHOULD validate webhook URLs to prevent SSRF).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from parley.protocol.errors import InvalidParamsError

log = logging.getLogger("parley.push")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Not covered by `is_global` / `is_private` in every Python version, or worth naming explicitly.
_ALWAYS_REFUSED = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "192.0.0.0/24", "198.18.0.0/15", "224.0.0.0/4",
    "240.0.0.0/4", "::/128", "::1/128", "fe80::/10", "fec0::/10", "fc00::/7", "ff00::/8", "64:ff9b:1::/48",
    "168.63.129.16/32",  # Azure's platform endpoint (DHCP, DNS, the VM agent): public, but never a webhook
)]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are an IPv4 address
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT ::ffff:0:a.b.c.d (RFC 2765): a translator's IPv4
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data"})


class UnsafeUrl(InvalidParamsError):
    """A webhook URL the guard refuses (JSON-RPC -32602 when registered; a failed attempt at delivery)."""


class Unresolved(UnsafeUrl):
    """The webhook's host name does not resolve now (a DNS failure may pass): accepted at registration, a
    failed attempt that is retried at delivery."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where to connect for a checked URL: `url` names the pinned address, `host` the original name."""

    url: str  # the URL with the host replaced by the checked address
    host: str  # the original host name: the Host header, TLS SNI and certificate name
    address: str


def parse_allow(entries: Iterable[str], what: str = "push allow") -> list[Network]:
    """Allowlist entries (CIDRs or single addresses) as networks; ValueError naming a bad one (`what` list)."""
    out: list[Network] = []
    for entry in entries:
        try:
            out.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{what} entry {entry!r} is not an IP address or CIDR network") from None
    return out


class UrlGuard:
    """Checks webhook URLs and pins their addresses.

    Args:
        allow: networks whose addresses are accepted even when they are not public (the tests allow
            127.0.0.1; a deployment may allow its own private webhook receivers).
        resolve: `host -> addresses` (default: the system resolver, off the event loop).
        subject: what the URLs are, in the refusals ("webhook"; the dashboard's inspector: "agent").
        allow_hint: where the refusal says the allowlist is set.
    """

    def __init__(self, allow: Iterable[Network] = (), *, resolve=None, subject: str = "webhook",
                 allow_hint: str = "[push] allow or --push-allow") -> None:
        self.allow = list(allow)
        self._resolve = resolve or _system_resolve
        self.subject = subject
        self.allow_hint = allow_hint

    def check_syntax(self, url: str) -> tuple[str, str, int]:
        """(scheme, host, port) of an acceptable URL, before any resolution; UnsafeUrl otherwise."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UnsafeUrl(f"Invalid params: {self.subject} URL {url[:200]!r} is not a valid URL ({exc})") from None
        if parts.scheme not in ("http", "https"):
            raise UnsafeUrl(f"Invalid params: {self.subject} URL must be http or https, got {parts.scheme or 'none'!r}")
        if parts.username is not None or parts.password is not None:
            raise UnsafeUrl(f"Invalid params: {self.subject} URL must not carry credentials (use `authentication`)")
        host = parts.hostname
        if not host:
            raise UnsafeUrl(f"Invalid params: {self.subject} URL {url[:200]!r} has no host")
        if host.rstrip(".").lower() in METADATA_HOSTS:
            raise UnsafeUrl(f"Invalid params: {self.subject} host {host!r} is a cloud metadata service")
        return parts.scheme, host, port or (443 if parts.scheme == "https" else 80)

    async def check_registration(self, url: str) -> None:
        """Check a URL being registered: its syntax; an IP literal, or every address its name resolves to.

        A name that does not resolve now is accepted (see the module docstring): UnsafeUrl only for a bad
        URL or an address that is not allowed."""
        try:
            await self.check(url)
        except Unresolved as exc:
            log.info("push: accepted a webhook whose host does not resolve now; it is checked at delivery (%s)",
                     exc)

    async def check(self, url: str) -> Target:
        """Check `url` and resolve it; the Target to connect to. UnsafeUrl names the refused address
        (Unresolved: the name does not resolve)."""
        scheme, host, port = self.check_syntax(url)
        try:
            literal: Address | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        addresses = [literal] if literal is not None else await self._addresses(host, port)
        if not addresses:
            raise Unresolved(f"Invalid params: {self.subject} host {host!r} does not resolve")
        for address in addresses:
            self.refuse_if_unsafe(address, host)
        chosen = addresses[0]
        parts = urlsplit(url)
        shown = f"[{chosen}]" if chosen.version == 6 else str(chosen)
        netloc = f"{shown}:{parts.port}" if parts.port else shown
        return Target(urlunsplit((scheme, netloc, parts.path or "/", parts.query, "")), host, str(chosen))

    def refuse_if_unsafe(self, address: Address, host: str) -> None:
        """Raise UnsafeUrl unless `address` is public or allowlisted."""
        if any(address in net for net in self.allow):
            return
        embedded = embedded_ipv4(address)
        if embedded is not None:
            if any(embedded in net for net in self.allow):
                return
            address = embedded
        if not address.is_global or any(address in net for net in _ALWAYS_REFUSED if net.version == address.version):
            raise UnsafeUrl(f"Invalid params: {self.subject} host {host!r} resolves to {address}, a "
                            f"{_kind(address)} address; allow it with {self.allow_hint}")

    async def _addresses(self, host: str, port: int) -> list[Address]:
        try:
            found = await self._resolve(host, port)
        except OSError as exc:  # socket.gaierror included
            raise Unresolved(f"Invalid params: {self.subject} host {host!r} does not resolve ({exc})") from None
        out: list[Address] = []
        for value in found:
            address = ipaddress.ip_address(value.split("%", 1)[0])
            if address not in out:
                out.append(address)
        return out


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, translated, NAT64, 6to4), which is where a
    connection to it ends up; None for other addresses."""
    if address.version != 6:
        return None
    assert isinstance(address, ipaddress.IPv6Address)
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _IPV4_TRANSLATED or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)  # (`::`, `::1`: not compatible forms)
    return None


async def _system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


def _kind(address: Address) -> str:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_unspecified:
        return "unspecified"
    if address.is_private:
        return "private"
    return "non-public"


__all__ = ["METADATA_HOSTS", "Target", "Unresolved", "UnsafeUrl", "UrlGuard", "parse_allow"]
