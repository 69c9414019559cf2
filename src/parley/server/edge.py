"""The edge of the HTTP server: whether a request may reach any route at all, decided from its request line
and headers alone, before a route reads (let alone parses) its body.

Two rules, one per mode of the server (docs/security.md, "Modes"):

- **Open** (no credentials configured, development mode on a loopback address): every route answers only
  requests whose `Host` is a loopback name (`localhost`, `127.0.0.1`, `[::1]`, any port) and whose `Origin`,
  when there is one, is a loopback origin. A web page the user visits cannot reach the server through a DNS
  name it rebinds to 127.0.0.1 (its `Host` is that name), nor read answers cross-site (its `Origin` is its
  own). The rule is `parley.server.loopback`'s, the dashboard's too.
  `--insecure` and `public_url` (a server meant to be reached by other names) turn it off, as they do for the
  dashboard.
- **Secured** (a credential exists): a request is authenticated from its headers first. Without valid
  credentials it gets 401 at once, in its binding's error shape, with `Connection: close`: its body is never
  read nor parsed, and no route, agent id or path is looked at (no 404 that lists agents, no 405 that names
  methods). Public without credentials: the agent cards (of the agents hosted), `/healthz`, `/readyz`, the
  push-signing keys (`/.well-known/jwks.json`: webhook receivers verify with them) and the dashboard (it has
  its own login). The principal found is handed to the route (`PRINCIPAL_KEY` in the ASGI scope), which does
  not authenticate again.

An authenticator without a `secured()` method (one a test or an embedding application supplies) is left to
the request pipeline: neither rule applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from parley.protocol.errors import A2AError, InternalError, PermissionDeniedError, ServiceUnavailableError
from parley.server.access import Access, Credentials
from parley.server.http import PRINCIPAL_KEY
from parley.server.loopback import loopback_host, loopback_host_raw, loopback_origin
from parley.server.rpc_door import route_path
from parley.tasks.store import unavailable

log = logging.getLogger("parley.server")

ECHO_MAX = 64  # characters of a client's input quoted back in an error

Refusal = Callable[[Request, A2AError], Response]
IsPublic = Callable[[str, str], bool]


class UntrustedHostError(PermissionDeniedError):
    """An open server was reached through a name, or from an origin, that is not this machine's loopback."""

    reason = "UNTRUSTED_HOST"


def clip(text: str, limit: int = ECHO_MAX) -> str:
    """A client's input as an error quotes it: at most `limit` characters, then "…"."""
    return text if len(text) <= limit else text[:limit] + "…"


def host_refusal(request: Request) -> UntrustedHostError | None:
    """Why an open server refuses `request` (its Host or Origin is not loopback), or None."""
    if not loopback_host(request):
        host = request.headers.get("host") or ""
        return UntrustedHostError(
            f"Forbidden: this server is open (no credentials configured) and answers only loopback host names; "
            f"Host {clip(host)!r} is not one (DNS rebinding). Use http://127.0.0.1, or configure credentials, "
            "public_url or --insecure")
    origin = request.headers.get("origin")
    if origin is not None and not loopback_origin(origin):
        return UntrustedHostError(
            f"Forbidden: this server is open (no credentials configured) and answers no cross-site requests; "
            f"Origin {clip(origin)!r} is not a loopback origin")
    return None


def scope_host_refusal(scope: Scope) -> UntrustedHostError | None:
    """`host_refusal` read straight from the ASGI scope's headers: one pass, no Request, the verdict on a Host
    cached (every request of an open server asks it; a refusal is worded by `host_refusal`)."""
    host = origin = None
    for name, value in scope["headers"]:  # the first of each, as Request.headers.get gives it
        if name == b"host":
            if host is None:
                host = value
        elif name == b"origin" and origin is None:
            origin = value
    if host is not None and origin is None and loopback_host_raw(host):
        return None
    return host_refusal(Request(scope))


def _failure(exc: Exception) -> A2AError:
    """What a client is told when authentication itself failed: 503 when a backend (the key store) cannot be
    reached (retry), else 500; the detail goes to the log, as in the request pipeline."""
    if unavailable(exc):
        log.warning("authenticating a request failed: a backend cannot be reached (%s: %s)", type(exc).__name__, exc)
        return ServiceUnavailableError(headers={"Retry-After": "1"})
    log.error("authenticating a request failed", exc_info=exc)
    return InternalError()


class EdgeGuard:
    """ASGI middleware applying the open-mode host rule or the secured-mode authenticate-first rule.

    Args:
        app: the application behind the edge.
        authenticator: the request pipeline's authenticator (its `secured()` says which mode applies).
        host_check: whether the open-mode rule applies (False with `--insecure` or `public_url`).
        refuse: the response for a refused request, in the error shape of the binding its path belongs to.
        is_public: whether (method, path) is answered to anyone on a secured server.
    """

    def __init__(self, app: ASGIApp, *, authenticator: object, host_check: bool, refuse: Refusal,
                 is_public: IsPublic) -> None:
        self.app = app
        self.authenticator = authenticator
        self.secured = getattr(authenticator, "secured", None)
        self.host_check = host_check
        self.refuse = refuse
        self.is_public = is_public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.secured is None:
            await self.app(scope, receive, send)
            return
        try:
            secured = await self.secured()
        except Exception as exc:  # noqa: BLE001 - the key store cannot say which mode: only public paths go on
            refusal = None if self.is_public(scope["method"], route_path(scope)) else _failure(exc)
        else:
            if secured:
                refusal = await self._authenticate(scope)
            elif self.host_check:
                refusal = scope_host_refusal(scope)
            else:
                refusal = None
        if refusal is None:
            await self.app(scope, receive, send)
            return
        response = self.refuse(Request(scope), refusal)
        # The body (if any) is not read: the connection cannot carry another request after this answer.
        response.headers["Connection"] = "close"
        await response(scope, receive, send)

    async def _authenticate(self, scope: Scope) -> A2AError | None:
        """Authenticate from the headers (the principal goes into the scope); the error if that fails."""
        if self.is_public(scope["method"], route_path(scope)):
            return None
        request = Request(scope)
        client = scope.get("client")
        credentials = Credentials(headers=request.headers, peer=client[0] if client else None)
        try:
            scope[PRINCIPAL_KEY] = await self.authenticator.authenticate(Access("", None, "HTTP"), credentials)
        except A2AError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - the key store or token issuer failed: 503 or 500, logged
            return _failure(exc)
        return None


__all__ = ["ECHO_MAX", "PRINCIPAL_KEY", "EdgeGuard", "UntrustedHostError", "clip", "host_refusal", "loopback_origin"]
