"""Bearer tokens from an identity provider: verify a JWT and say who it names (PyJWT underneath).

A server that trusts an issuer's tokens configures `[server.auth.jwt]` (:class:`JwtSettings`):
HS256 with a secret shared through an environment variable, or public keys (RS256, ES256,
EdDSA) from a JWKS URL or an OpenID Connect discovery document. :class:`JwtVerifier` checks the
signature, the expiry and not-before (with bounded clock skew), the issuer and the audience,
and returns a :class:`TokenIdentity`; anything else is an :class:`UnauthenticatedError` with a
short reason and an RFC 6750 `WWW-Authenticate` challenge, never echoing the token.

Why this shape:

- The signature and the `iss` / `aud` checks are PyJWT's; this module only picks the key. The
  algorithm comes from the settings' list, never from the token alone: `none` is never accepted,
  HMAC only with a configured secret, and a token's `alg` must equal the algorithm of the JWK its
  `kid` names (a JWK without `alg` gets the one its type implies: RSA RS256, EC by curve,
  Ed25519 EdDSA), so an HS256 token can never be checked against a public key.
- The times (`exp` required, `nbf`, `iat`) are checked here against an injectable clock, because
  PyJWT reads the wall clock itself; same rule as PyJWT (`exp <= now - leeway` is expired).
- Keys are fetched with httpx on the event loop (no blocking calls), cached, refetched once
  `jwks_max_age_seconds` passed or when a token names an unknown `kid`, but never more than once
  per `jwks_min_refresh_seconds`; concurrent verifications share one fetch. When the JWKS endpoint
  is down the cached keys keep working.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx

try:
    import jwt
    from jwt.algorithms import get_default_algorithms
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("JWT bearer tokens need PyJWT: pip install 'parley-a2a[jwt]'") from exc

from parley.protocol.errors import UnauthenticatedError
from parley.security.required import check_hmac_secret
from parley.settings import JwtSettings

log = logging.getLogger(__name__)

HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
DEFAULT_KEY_ALGORITHMS = ("RS256", "ES256", "EdDSA")
MAX_TOKEN_CHARS = 16 * 1024  # larger is refused before it is parsed
MAX_DOCUMENT_BYTES = 1024 * 1024  # a JWKS or discovery document
FETCH_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class TokenIdentity:
    """Who a verified token names, what it allows, and all its claims."""

    principal: str  # the `principal_claim` (default "sub")
    scopes: frozenset[str]  # the `scopes_claim` ("scope"), else "scp": a space-separated string or a list
    claims: dict[str, Any]


class _FetchError(Exception):
    """A JWKS or discovery document could not be fetched or read (logged, never shown to a client)."""


class JwtVerifier:
    """Verifies bearer tokens of one issuer, as `JwtSettings` describe it.

    Args:
        settings: the issuer, audience, key source, algorithms, leeway and claim names.
        http: the client that fetches keys (default: one of its own, closed by :meth:`aclose`).
        env: where `settings.secret_env` is looked up (default: `os.environ`), read once, here.
        clock: seconds since the epoch; decides expiry, not-before and when keys are refetched.

    Raises:
        ValueError: unusable settings (no or several key sources, an unknown or mismatched
            algorithm, "none", a missing or empty secret variable); UnsafeSettingError (a ValueError)
            for an HMAC secret shorter than 32 bytes (parley.security.required; the server's own rules
            about the issuer and audience are checked by parley.security.setup, since a webhook's
            PushVerifier uses this class too).
    """

    def __init__(self, settings: JwtSettings, *, http: httpx.AsyncClient | None = None,
                 env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time) -> None:
        sources = [name for name in ("secret_env", "jwks_url", "oidc_discovery_url") if getattr(settings, name)]
        if len(sources) != 1:
            raise ValueError("auth.jwt: give exactly one of secret_env (HS256), jwks_url or oidc_discovery_url")
        self.settings = settings
        self._clock = clock
        self._secret: bytes | None = None
        if settings.secret_env:
            value = (os.environ if env is None else env).get(settings.secret_env)
            if not value:
                raise ValueError(f"auth.jwt.secret_env: the environment variable {settings.secret_env} "
                                 "is not set or is empty")
            self._secret = value.encode()
            check_hmac_secret(settings.secret_env, self._secret)
        self.algorithms = frozenset(settings.algorithms or (["HS256"] if self._secret else DEFAULT_KEY_ALGORITHMS))
        known = set(get_default_algorithms()) - {"none"}
        for alg in sorted(self.algorithms):
            if alg.lower() == "none":
                raise ValueError('auth.jwt.algorithms: "none" is never accepted')
            if alg not in known:
                raise ValueError(f"auth.jwt.algorithms: {alg!r} is not supported (use some of {sorted(known)})")
            if alg in HMAC_ALGORITHMS and self._secret is None:
                raise ValueError(f"auth.jwt.algorithms: {alg} needs secret_env (keys from a JWKS are public keys)")
            if alg not in HMAC_ALGORITHMS and self._secret is not None:
                raise ValueError(f"auth.jwt.algorithms: {alg} needs jwks_url or oidc_discovery_url, not a secret")
        self._issuer = settings.issuer  # with discovery and none configured: the provider's `issuer`
        self._jwks_url = settings.jwks_url
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS)
        self._keys: jwt.PyJWKSet | None = None
        self._fetched_at = 0.0  # clock time of the last fetch that worked
        self._attempted_at: float | None = None  # clock time of the last fetch started
        self._inflight: asyncio.Task[None] | None = None
        self._document: dict[str, Any] | None = None  # the OIDC discovery document, once fetched

    async def provider_document(self) -> dict[str, Any]:
        """The OIDC discovery document (its authorization and token endpoints serve the dashboard's login);
        fetched once. ValueError when no discovery URL is configured or the document cannot be read."""
        url = self.settings.oidc_discovery_url
        if url is None:
            raise ValueError("auth.jwt.oidc_discovery_url is not set")
        if self._document is None:
            try:
                self._document = await self._get_json(url)
            except _FetchError as exc:
                raise ValueError(f"the OIDC discovery document {url} could not be read: {exc}") from None
        return self._document

    async def verify(self, token: str) -> TokenIdentity:
        """The identity a valid token names; else UnauthenticatedError saying why."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            _reject("The token is not a JWT")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            _reject("The token is not a JWT")
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.algorithms:
            _reject("The token's algorithm is not accepted")
        if kid is not None and not isinstance(kid, str):
            _reject("The token's key id (kid) is not a string")
        claims = await self._verified_claims(token, alg, kid)
        self._check_times(claims)
        return TokenIdentity(self._principal(claims), self._scopes(claims), claims)

    def expires_at(self, identity: TokenIdentity) -> float | None:
        """When a verified token stops being accepted (its `exp` plus the leeway), epoch seconds."""
        exp = identity.claims.get("exp")
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            return None
        return float(exp) + self.settings.leeway_seconds

    def security_scheme(self) -> dict[str, Any]:
        """This issuer as an A2A 1.0 AgentCard `SecurityScheme` (the value of one `securitySchemes` entry)."""
        if self.settings.oidc_discovery_url:
            return {"openIdConnectSecurityScheme": {"openIdConnectUrl": self.settings.oidc_discovery_url}}
        return {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}

    async def aclose(self) -> None:
        """Stop a fetch under way and close the HTTP client if it is this verifier's own."""
        if self._inflight is not None:
            self._inflight.cancel()
            self._inflight = None
        if self._own_http:
            await self._http.aclose()

    # -- signature and claims (PyJWT) --------------------------------------------------------------

    def _decode(self, token: str, key: Any, alg: str) -> dict[str, Any]:
        """The verified claims (signature, `exp` present, `iss`, `aud`); PyJWT's errors propagate."""
        s = self.settings
        options: dict[str, Any] = {
            "require": ["exp"],
            "verify_exp": False, "verify_nbf": False, "verify_iat": False,  # _check_times, with our clock
            "verify_sub": False, "verify_jti": False,  # _principal checks the principal claim
            "verify_aud": bool(s.audience),
            "verify_iss": self._issuer is not None,
        }
        # issuer as a list: PyJWT 2.10.0 compared a str issuer with `in` (CVE-2024-53861: substrings passed)
        issuer = [self._issuer] if self._issuer is not None else None
        return jwt.decode(token, key, algorithms=[alg], options=options,  # type: ignore[arg-type]
                          audience=s.audience or None, issuer=issuer)

    async def _verified_claims(self, token: str, alg: str, kid: str | None) -> dict[str, Any]:
        try:
            if self._secret is not None:
                return self._decode(token, self._secret, alg)
            keys = await self._keys_for(alg, kid)
            for key in keys[:-1]:  # several only for a token without a kid: the one that verifies
                try:
                    return self._decode(token, key, alg)
                except jwt.InvalidSignatureError:
                    continue
            return self._decode(token, keys[-1], alg)
        except jwt.InvalidSignatureError:
            _reject("The token's signature does not verify")
        except jwt.MissingRequiredClaimError as exc:
            _reject(f"The token has no {exc.claim} claim")
        except jwt.InvalidAudienceError:
            _reject("The token's audience is not accepted")
        except jwt.InvalidIssuerError:
            _reject("The token's issuer is not accepted")
        except jwt.InvalidAlgorithmError:
            _reject("The token's algorithm is not accepted")
        except jwt.InvalidKeyError:
            _reject("The token's signing key cannot verify it")
        except jwt.DecodeError:
            _reject("The token is not a JWT")
        except jwt.PyJWTError:  # a `crit` header it does not understand...
            _reject("The token is not valid")

    def _check_times(self, claims: dict[str, Any]) -> None:
        now, leeway = self._clock(), self.settings.leeway_seconds
        exp = _time_claim(claims, "exp")
        if exp is not None and exp <= now - leeway:
            _reject("The token has expired")
        nbf = _time_claim(claims, "nbf")
        if nbf is not None and nbf > now + leeway:
            _reject("The token is not valid yet (nbf)")
        iat = _time_claim(claims, "iat")
        if iat is not None and iat > now + leeway:
            _reject("The token's issue time (iat) is in the future")

    def _principal(self, claims: dict[str, Any]) -> str:
        name = self.settings.principal_claim
        value = claims.get(name)
        if not isinstance(value, str) or not value.strip():
            _reject(f"The token's {name} claim is not a non-empty string")
        return value

    def _scopes(self, claims: dict[str, Any]) -> frozenset[str]:
        for name in (self.settings.scopes_claim, "scp"):
            value = claims.get(name)
            if value is None:
                continue
            if isinstance(value, str):
                return frozenset(value.split())
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return frozenset(v for v in value if v)
            _reject(f"The token's {name} claim is neither a string nor a list of strings")
        return frozenset()

    # -- keys (JWKS, OIDC discovery) ---------------------------------------------------------------

    async def _keys_for(self, alg: str, kid: str | None) -> list[jwt.PyJWK]:
        """The cached keys that may have signed a token with this alg and kid, refetched if due."""
        if self._keys is None or self._clock() - self._fetched_at >= self.settings.jwks_max_age_seconds:
            await self._refresh()
        found = self._match(alg, kid)
        if not found:
            await self._refresh()  # an unknown kid: maybe the keys rotated (if not fetched too recently)
            found = self._match(alg, kid)
        if not found:
            _reject("The token's signing keys cannot be fetched" if self._keys is None
                    else "The token's signing key is not known")
        return found

    def _match(self, alg: str, kid: str | None) -> list[jwt.PyJWK]:
        if self._keys is None:
            return []
        return [key for key in self._keys.keys
                if (kid is None or key.key_id == kid) and key.algorithm_name == alg
                and key.public_key_use in (None, "sig")]

    async def _refresh(self) -> None:
        """Fetch the keys, unless a fetch started less than jwks_min_refresh_seconds ago; join one under way."""
        if self._inflight is None:
            now = self._clock()
            if self._attempted_at is not None and now - self._attempted_at < self.settings.jwks_min_refresh_seconds:
                return
            self._attempted_at = now
            self._inflight = asyncio.ensure_future(self._fetch())
        await asyncio.shield(self._inflight)  # a caller that gives up does not cancel the others' fetch

    async def _fetch(self) -> None:
        try:
            if self._jwks_url is None:
                await self._discover()
            assert self._jwks_url is not None
            document = await self._get_json(self._jwks_url)
            try:
                keys = jwt.PyJWKSet.from_dict(document)
            except (jwt.PyJWTError, ValueError, TypeError, KeyError, AttributeError) as exc:  # untrusted data
                raise _FetchError(f"no usable keys ({exc.__class__.__name__})") from None
            self._keys, self._fetched_at = keys, self._clock()
        except _FetchError as exc:
            log.warning("JWT signing keys not fetched from %s: %s", self._jwks_url or
                        self.settings.oidc_discovery_url, exc)
        finally:
            self._inflight = None

    async def _discover(self) -> None:
        url = self.settings.oidc_discovery_url
        assert url is not None
        document = await self._get_json(url)
        self._document = document
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            raise _FetchError("the discovery document has no jwks_uri URL")
        issuer = document.get("issuer")
        if self._issuer is None:
            if not isinstance(issuer, str) or not issuer:
                raise _FetchError("the discovery document has no issuer")
            self._issuer = issuer
        self._jwks_url = jwks_uri

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with self._http.stream("GET", url, headers={"Accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise _FetchError(f"HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise _FetchError(f"the document is larger than {MAX_DOCUMENT_BYTES} bytes")
        except httpx.HTTPError as exc:
            raise _FetchError(f"{exc.__class__.__name__}: {exc}") from None
        try:
            document = json.loads(body)
        except ValueError:
            raise _FetchError("the document is not JSON") from None
        if not isinstance(document, dict):
            raise _FetchError("the document is not a JSON object")
        return document


def _time_claim(claims: dict[str, Any], name: str) -> int | float | None:
    """A NumericDate claim; PyJWT's JSON parser accepts NaN and Infinity, which are no dates."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        _reject(f"The token's {name} claim is not a number")
    return value


def _reject(reason: str) -> NoReturn:
    """Refuse a token: 401 with an RFC 6750 challenge (the reason is fixed text, never the token)."""
    challenge = f'Bearer realm="a2a", error="invalid_token", error_description="{reason}"'
    raise UnauthenticatedError(reason, headers={"WWW-Authenticate": challenge}) from None


__all__ = ["JwtVerifier", "TokenIdentity"]
