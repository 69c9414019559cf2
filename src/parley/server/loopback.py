"""Whether a request names this machine's loopback: the rule an open (development) server answers by.

A name counts when it is `localhost` (or under `.localhost`) or a loopback address literal; a DNS name that
resolves to 127.0.0.1, as in DNS rebinding, does not. Used by the server's edge for every route and by the
dashboard (docs/security.md, "Modes").
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from starlette.requests import Request


@functools.lru_cache(maxsize=256)  # asked on every request of an open server: parse each name once
def loopback_name(name: str | None) -> bool:
    """Whether a host name is this machine's loopback by its spelling alone."""
    if not name:
        return False
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def loopback_host(request: Request) -> bool:
    """Whether the request's `Host` header names the loopback (any port; `[::1]` in brackets)."""
    return loopback_host_value(request.headers.get("host") or "")


def loopback_host_value(host: str) -> bool:
    """Whether a `Host` header's value names the loopback (any port; `[::1]` in brackets)."""
    return loopback_name(host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0])


@functools.lru_cache(maxsize=256)  # the edge asks on every request of an open server, from the raw header
def loopback_host_raw(host: bytes) -> bool:
    """`loopback_host_value` of a raw (latin-1) `Host` header value, as an ASGI scope carries it."""
    return loopback_host_value(host.decode("latin-1"))


def loopback_origin(origin: str) -> bool:
    """Whether an `Origin` header names a page served from this machine's loopback (`null` does not)."""
    try:
        return loopback_name(urlsplit(origin).hostname)
    except ValueError:
        return False
