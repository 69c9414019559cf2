"""The URLs clients use to reach this server and its agents, as seen from one HTTP request.

Configured (`public_url`), else as a trusted reverse proxy forwarded them
(`Forwarded`, `X-Forwarded-Proto/-Host/-Prefix`), else as the request came.
"""

from __future__ import annotations

from starlette.requests import Request

from parley.settings import Settings


def base_url(request: Request, settings: Settings) -> str:
    """The public base URL of the server (no trailing slash)."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    forwarded = forwarded_base(request, settings.forwarded_allow_ips)
    return forwarded or str(request.base_url).rstrip("/")


def agent_url(base: str, agent_id: str, *, root: bool = False) -> str:
    """Where an agent's JSON-RPC endpoint is below `base` (the default agent also at `base/`)."""
    return f"{base}/" if root else f"{base}/a2a/{agent_id}"


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
    prefix = h.get("x-forwarded-prefix", "").split(",")[0].strip().rstrip("/")
    if not (proto or host or prefix):
        return None
    if prefix and not prefix.startswith("/"):
        prefix = "/" + prefix
    scheme = proto if proto in ("http", "https") else request.url.scheme
    netloc = host or h.get("host") or request.url.netloc
    return f"{scheme}://{netloc}{str(request.base_url.path).rstrip('/')}{prefix}"


__all__ = ["agent_url", "base_url", "forwarded_base"]
