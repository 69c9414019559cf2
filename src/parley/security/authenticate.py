"""Turning a request's credentials into a principal: API keys, an admin key, JWT bearer tokens.

The server is *secured* as soon as any credential is configured: an active API key in the
store, an admin key in the environment, or a token issuer. Then every A2A request of every
binding must present one (HTTP 401 / gRPC UNAUTHENTICATED otherwise, with a
`WWW-Authenticate` challenge naming the accepted schemes). With nothing configured the server
is open: every caller is the anonymous principal (development mode, loopback only unless
`--insecure`; see :func:`open_mode_problem`).

Keys are read from `X-API-Key`, or from `Authorization: Bearer pk_...`; any other bearer token
is a JWT for the configured issuer.

Principals are one namespace for what callers name themselves (a token's `sub` "alice" and a key made
with `--principal alice` are the same caller, by design), but the server's own names are not a token's
to take: `key:<id>` (a key's own principal), `admin` (the environment's admin key), `anonymous` (an
open server's callers), and `token:...`. A token whose subject is one of those is the principal
`token:<subject>` instead (:func:`token_principal`), so it never reads their tasks.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping
from typing import Any

from parley.protocol.errors import RateLimitedError, UnauthenticatedError
from parley.security.failures import FailureThrottle, client_address
from parley.security.keys import ADMIN, KeyStore
from parley.server.access import ANONYMOUS, Access, Credentials, Principal

API_KEY_HEADER = "X-API-Key"
TOKEN_PREFIX = "token:"
RESERVED_PREFIXES = ("key:", TOKEN_PREFIX)  # key:<id> is an API key's own principal
RESERVED_NAMES = frozenset({"admin", "anonymous"})  # the environment's admin key; an open server's callers
SECURED_CACHE_SECONDS = 1.0  # how long "are there active keys?" is remembered (a key made by the CLI counts soon)


class CredentialAuthenticator:
    """The Authenticator of the request pipeline over the configured credentials.

    Args:
        keys: the API key store (None: keys are not accepted).
        jwt: a verifier of bearer tokens (`parley.security.jwt.JwtVerifier`), or None.
        admin_key: a key from the environment that is an admin principal (bootstraps `--memory`).
        failures: counts refused credentials per client address, and refuses an address with too many
            (429 + Retry-After; None: nothing is counted).
        trusted: the proxies whose forwarded client address counts instead of theirs (`forwarded_allow_ips`).
    """

    def __init__(self, keys: KeyStore | None, jwt: Any = None, admin_key: str | None = None, *,
                 failures: FailureThrottle | None = None, trusted: list[str] | None = None) -> None:
        self.keys = keys
        self.jwt = jwt
        self.admin_key = admin_key or None
        self.failures = failures
        self.trusted = list(trusted or [])
        self._secured_until = 0.0
        self._secured = False

    async def secured(self) -> bool:
        """Whether requests must authenticate: a credential of some kind is configured, or a key was
        ever made in the store. Once secured, always secured (for the life of this process)."""
        if self._secured or self.jwt is not None or self.admin_key is not None:
            return True
        if self.keys is None:
            return False
        now = time.monotonic()
        if now >= self._secured_until:
            self._secured = await self.keys.has_keys()
            self._secured_until = now + SECURED_CACHE_SECONDS
        return self._secured

    def recheck(self) -> None:
        """Ask the key store again at the next request (a key was just made here: no second of open access)."""
        self._secured_until = 0.0

    def challenge(self, error: str | None = None, description: str | None = None) -> dict[str, str]:
        """The `WWW-Authenticate` header for a refusal: the schemes this server accepts."""
        parts = []
        if self.keys is not None or self.admin_key is not None:
            parts.append(f'ApiKey realm="a2a", header="{API_KEY_HEADER}"')
        if self.jwt is not None or self.keys is not None:
            bearer = 'Bearer realm="a2a"'
            if error:
                bearer += f', error="{error}"'
            if description:
                bearer += f', error_description="{_quoted(description)}"'
            parts.append(bearer)
        return {"WWW-Authenticate": ", ".join(parts) or 'Bearer realm="a2a"'}

    def refuse(self, message: str, error: str | None = "invalid_token") -> UnauthenticatedError:
        return UnauthenticatedError(message, headers=self.challenge(error, message if error else None))

    async def authenticate(self, access: Access, credentials: Credentials) -> Principal:
        if not await self.secured():
            return ANONYMOUS
        address = client_address(credentials.peer, credentials.headers, self.trusted)
        self.check_address(address)
        api_key, bearer = presented(credentials.headers)
        token = api_key or bearer
        if not token:  # no guess: not counted
            raise self.refuse(f"Authentication required: send an API key ({API_KEY_HEADER}) or a bearer token",
                              error=None)
        try:
            return await self._check(token, api_key)
        except UnauthenticatedError:
            if self.failures is not None:
                self.failures.failed(address)
            raise

    def check_address(self, address: str | None) -> None:
        """RateLimitedError (429 + Retry-After) when `address` failed to authenticate too often lately."""
        wait = self.failures.retry_after(address) if self.failures is not None else None
        if wait is not None:
            raise RateLimitedError(f"Too many failed authentications from this address: retry in {wait} s",
                                   headers={"Retry-After": str(wait)})

    async def _check(self, token: str, api_key: str | None) -> Principal:
        """The principal `token` authenticates as; UnauthenticatedError when it does not."""
        if self.admin_key is not None and hmac.compare_digest(token.encode(), self.admin_key.encode()):
            return Principal("admin", kind="key", scopes=frozenset({ADMIN, "a2a"}), name="admin (environment)")
        if token.startswith("pk_") or api_key is not None:
            key = await self.keys.check(token) if self.keys is not None else None
            if key is None:
                raise self.refuse("The API key is not valid: unknown, revoked or expired")
            return Principal(key.principal, kind="key", scopes=key.scopes, name=key.name or key.id, agent=key.agent_id,
                             expires_at=key.expires_at, key_id=key.id)
        if self.jwt is None:
            raise self.refuse("The bearer token is not an API key of this server, and no token issuer is configured")
        identity = await self.jwt.verify(token)  # UnauthenticatedError with its own challenge
        return Principal(token_principal(identity.principal), kind="token", scopes=identity.scopes, token=token,
                         expires_at=self.jwt.expires_at(identity))

    async def still_valid(self, principal: Principal) -> str | None:
        """None while the credential `principal` authenticated with still works; else why not (one line).
        Expiry is the watch's own clock check (Principal.expires_at); this asks the key store about the key."""
        if principal.key_id is None or self.keys is None:
            return None
        if await self.keys.current(principal.key_id) is None:
            return "The API key is not valid any more: revoked, expired or deleted"
        return None

    def revocations(self) -> int:
        """Changes when a key is revoked through this process's key store (open streams re-check at once)."""
        return self.keys.revocations if self.keys is not None else 0


def token_principal(subject: str) -> str:
    """The principal a token's subject names: the subject itself, unless it is one of the server's own names
    (`key:<id>`, `admin`, `anonymous`, or already `token:...`): then `token:<subject>`. One to one: no two
    subjects give the same principal, and no token gives a key's or the admin key's."""
    if subject.startswith(RESERVED_PREFIXES) or subject in RESERVED_NAMES:
        return TOKEN_PREFIX + subject
    return subject


def presented(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(the X-API-Key value, the bearer token of Authorization) a request carries."""
    api_key = headers.get("x-api-key") or None
    auth = headers.get("authorization") or ""
    scheme, _, value = auth.strip().partition(" ")
    bearer = value.strip() or None if scheme.lower() == "bearer" else None
    return (api_key.strip() if api_key else None), bearer


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', "'")


__all__ = ["API_KEY_HEADER", "RESERVED_NAMES", "RESERVED_PREFIXES", "TOKEN_PREFIX", "CredentialAuthenticator",
           "presented", "token_principal"]
