"""Who is calling, and whether they may: principals, and the authenticate, authorize and rate-limit steps.

Every request of every binding goes through the same three steps in the request
pipeline (:mod:`parley.server.pipeline`). The defaults here are an open server:
every caller is the `anonymous` principal, everything is allowed, nothing is
limited. Authentication, per-agent keys and rate limits plug in by replacing them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from parley.protocol.operations import Operation


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. Tasks belong to a principal `id`: only it sees and changes them."""

    id: str
    kind: str = "anonymous"  # anonymous | key | token | internal (a delegation inside this server)
    scopes: frozenset[str] = frozenset()
    name: str | None = None
    agent: str | None = None  # the one agent an API key opens; None: any agent
    # The bearer token a `token` principal presented, for token exchange on remote hops (parley.hub.remote).
    # Kept in memory for the request and the runs it starts; never stored, compared, hashed or shown.
    token: str | None = field(default=None, compare=False, repr=False)
    # When the credential stops working on its own (a key's expiry, a token's `exp` plus leeway; epoch seconds),
    # and the API key it is (revocable): open streams end then (parley.security.credential_watch).
    expires_at: float | None = field(default=None, compare=False)
    key_id: str | None = field(default=None, compare=False)

    def opens(self, agent_id: str) -> bool:
        """Whether this principal may call `agent_id` at all."""
        return self.agent is None or self.agent in ("*", agent_id)


ANONYMOUS = Principal("anonymous")


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a request presents: its headers (HTTP headers or gRPC metadata, lower-case names) and peer."""

    headers: Mapping[str, str] = field(default_factory=dict)
    peer: str | None = None
    # Already known: an in-process call (a delegation inside this server) carries its caller's principal.
    # Only the in-process transport sets it; nothing a client sends can.
    principal: Principal | None = None


@dataclass(frozen=True, slots=True)
class Access:
    """One request as the access steps see it: which agent, which operation, over which binding, and the
    decoded request (for checks that look inside it, such as the skill a message asks for)."""

    agent_id: str  # "" when the request could not be decoded far enough to say
    op: Operation | None  # None when the request could not be decoded (only authentication runs then)
    binding: str
    request: Any = None


@dataclass(slots=True)
class Grant:
    """What a rate limiter allowed: headers for the response (RateLimit, RateLimit-Policy) and, for a
    limit on things held open (streams, running tasks), what to call when the request is over."""

    headers: dict[str, str] = field(default_factory=dict)
    release: Callable[[], None] | None = None

    def done(self) -> None:
        """The request (or its stream) is over: give back what it held, once."""
        release, self.release = self.release, None
        if release is not None:
            release()


class Authenticator(Protocol):
    """Turns credentials into a principal, or raises an A2AError (401-style) when they are missing or bad."""

    async def authenticate(self, access: Access, credentials: Credentials) -> Principal: ...


class Authorizer(Protocol):
    """Raises an A2AError (403-style) when the principal may not do this."""

    async def authorize(self, access: Access, principal: Principal) -> None: ...


class RateLimiter(Protocol):
    """Raises an A2AError (429-style, with Retry-After) when the principal is over a limit; else a Grant."""

    async def acquire(self, access: Access, principal: Principal) -> Grant: ...


class OpenAuthenticator:
    """No authentication configured: every caller is the anonymous principal (development mode)."""

    async def authenticate(self, access: Access, credentials: Credentials) -> Principal:
        return ANONYMOUS


class AllowAll:
    """Every principal may do everything."""

    async def authorize(self, access: Access, principal: Principal) -> None:
        return None


class NoLimit:
    """No rate limits."""

    async def acquire(self, access: Access, principal: Principal) -> Grant:
        return NO_GRANT


NO_GRANT = Grant()  # nothing to add, nothing to give back (never mutated: its release is None)


__all__ = ["ANONYMOUS", "NO_GRANT", "Access", "AllowAll", "Authenticator", "Authorizer", "Credentials", "Grant",
           "NoLimit", "OpenAuthenticator", "Principal", "RateLimiter"]
