"""The URLs clients use to reach this server and its agents, as seen from one HTTP request.

Configured (`public_url`), else as a trusted reverse proxy forwarded them
(`Forwarded`, `X-Forwarded-Proto/-Host/-Prefix`), else as the request came.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from starlette.requests import Request

from parley.server.loopback import loopback_host
from parley.settings import Settings

# A host name or IPv4 address, or a bracketed IPv6 address, with an optional port (RFC 3986 authority, no user).
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
                   r"[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def base_url(request: Request, settings: Settings) -> str:
    """The public base URL of the server (no trailing slash)."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    forwarded = forwarded_base(request, settings.forwarded_allow_ips)
    if forwarded:
        return forwarded
    host = request.headers.get("host")
    if host is not None and not _HOST.fullmatch(host):  # not a host[:port]: name the address it came in on
        return f"{request.url.scheme}://{_own_netloc(request)}{request.scope.get('root_path', '')}".rstrip("/")
    return str(request.base_url).rstrip("/")


def names_this_server(request: Request, settings: Settings) -> bool:
    """Whether :func:`base_url` of `request` is one this server may vouch for by signing a card naming it: the
    configured `public_url`, what a trusted proxy forwarded, a loopback name, or the address the request came in
    on. Any other `Host` is the client's own choice: a card naming it is served unsigned, never signed (else
    anyone could get a card signed by this server that sends its readers, and their credentials, elsewhere).
    """
    if settings.public_url or forwarded_base(request, settings.forwarded_allow_ips):
        return True
    host = request.headers.get("host")
    if host is None or not _HOST.fullmatch(host):
        return True  # base_url names the address the request came in on
    if loopback_host(request):
        return True
    return host.lower() == _own_netloc(request).lower()


def _own_netloc(request: Request) -> str:
    """The address and port the request came in on (when its Host header cannot be used)."""
    addr, port = request.scope.get("server") or ("127.0.0.1", 80)
    addr = f"[{addr}]" if ":" in str(addr) else addr
    return f"{addr}:{port}"


def agent_url(base: str, agent_id: str, *, root: bool = False) -> str:
    """Where an agent's JSON-RPC endpoint is below `base` (the default agent also at `base/`)."""
    return f"{base}/" if root else f"{base}/a2a/{agent_id}"


@dataclass(frozen=True, slots=True)
class RequestAgentUrl:
    """An agent's URL as one request names it, computed on demand (calling it), and whether this server may sign
    a card naming it (:meth:`vouched`, :func:`names_this_server`)."""

    request: Request
    settings: Settings
    agent_id: str
    root: bool = False

    def __call__(self) -> str:
        return agent_url(base_url(self.request, self.settings), self.agent_id, root=self.root)

    def vouched(self) -> bool:
        return names_this_server(self.request, self.settings)


def forwarded_base(request: Request, trusted: list[str]) -> str | None:
    """The base URL a reverse proxy says the client used (`Forwarded`, or `X-Forwarded-Proto/-Host/-Prefix`).

    Only honoured when the direct peer is a trusted proxy (`Settings.forwarded_allow_ips`; "*" trusts all).
    """
    peer = request.client.host if request.client else None
    if "*" not in trusted and peer not in trusted:
        return None
    h = request.headers
    proto = host = None
    if "forwarded" in h:  # RFC 7239: the first (client-side) element counts
        for pair in h["forwarded"].split(",")[0].split(";"):
            name, _, value = pair.strip().partition("=")
            value = value.strip('"')
            if name.lower() == "proto":
                proto = value
            elif name.lower() == "host":
                host = value
    proto = proto or h.get("x-forwarded-proto", "").split(",")[0].strip() or None
    host = host or h.get("x-forwarded-host", "").split(",")[0].strip() or None
    if host is not None and not _HOST.fullmatch(host):
        host = None  # not a host[:port]: ignored, like a header from an untrusted peer
    prefix = h.get("x-forwarded-prefix", "").split(",")[0].strip().rstrip("/")
    if not (proto or host or prefix):
        return None
    if prefix and not prefix.startswith("/"):
        prefix = "/" + prefix
    scheme = proto if proto in ("http", "https") else request.url.scheme
    raw_host = h.get("host")
    netloc = host or (raw_host if raw_host and _HOST.fullmatch(raw_host) else None) or _own_netloc(request)
    return f"{scheme}://{netloc}{str(request.base_url.path).rstrip('/')}{prefix}"


__all__ = ["RequestAgentUrl", "agent_url", "base_url", "forwarded_base", "names_this_server"]
