"""Logging in to the dashboard at the configured OpenID Connect provider: the authorization code flow with
PKCE (RFC 6749 section 4.1, RFC 7636 S256, OpenID Connect Core 1.0 section 3.1).

The browser is sent to the provider's `authorization_endpoint` (from `auth.jwt.oidc_discovery_url`) with a
fresh `state` and code challenge, kept in a short-lived sealed cookie of their own. No `nonce` is sent: no
ID token is used (the nonce binds an ID token to its login; the access token is what is kept). The provider
sends it back to `{root}/login/oidc/callback` with a code; Parley checks the state, redeems the code at the
`token_endpoint` with the verifier (and the client secret, for a confidential client) and keeps the
**access token** as the session's credential: it is the token the server's JwtVerifier accepts for A2A
calls, so the login means exactly what an API call with it would mean (admin scope, or a listed admin).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import msgspec

from parley.settings import DashboardSettings

TIMEOUT_SECONDS = 10.0
PENDING_COOKIE = "parley_oidc"
PENDING_SECONDS = 600  # a login started more than this long ago must start again


class OidcError(Exception):
    """The provider login did not work; the message says why (shown on the login page)."""


class Pending(msgspec.Struct, array_like=True):
    """A login on its way to the provider and back."""

    state: str
    verifier: str
    next: str


@dataclass(frozen=True, slots=True)
class OidcClient:
    """The dashboard as an OAuth client of the provider."""

    client_id: str
    client_secret: str | None
    scopes: list[str]


def client_of(settings: DashboardSettings, env: Mapping[str, str] | None = None) -> OidcClient | None:
    """The OIDC client the settings describe, or None when the dashboard has no provider login."""
    if not settings.oidc_client_id:
        return None
    env = os.environ if env is None else env
    secret = env.get(settings.oidc_client_secret_env) if settings.oidc_client_secret_env else None
    return OidcClient(settings.oidc_client_id, secret or None, list(settings.oidc_scopes))


def start(client: OidcClient, provider: dict[str, Any], redirect_uri: str, next_path: str) -> tuple[str, Pending]:
    """The provider URL to send the browser to, and what must come back with it."""
    endpoint = provider.get("authorization_endpoint")
    if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
        raise OidcError("the provider's discovery document has no authorization_endpoint")
    pending = Pending(secrets.token_urlsafe(24), secrets.token_urlsafe(48), next_path)
    query = {"response_type": "code", "client_id": client.client_id, "redirect_uri": redirect_uri,
             "scope": " ".join(client.scopes), "state": pending.state,
             "code_challenge": challenge(pending.verifier), "code_challenge_method": "S256"}
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}", pending


def challenge(verifier: str) -> str:
    """The S256 code challenge of a verifier (RFC 7636 section 4.2)."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


async def redeem(client: OidcClient, provider: dict[str, Any], code: str, pending: Pending,
                 redirect_uri: str, http: httpx.AsyncClient | None = None) -> str:
    """Exchange the code for tokens at the provider; the access token (OidcError when there is none)."""
    endpoint = provider.get("token_endpoint")
    if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
        raise OidcError("the provider's discovery document has no token_endpoint")
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
            "client_id": client.client_id, "code_verifier": pending.verifier}
    auth = (client.client_id, client.client_secret) if client.client_secret else None
    own = http is None
    http = http or httpx.AsyncClient(timeout=TIMEOUT_SECONDS)
    try:
        response = await http.post(endpoint, data=form, auth=auth, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise OidcError(f"the provider's token endpoint could not be reached ({exc.__class__.__name__})") from None
    finally:
        if own:
            await http.aclose()
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code != 200:
        reason = body.get("error_description") or body.get("error") if isinstance(body, dict) else None
        raise OidcError(f"the provider refused the code (HTTP {response.status_code}"
                        f"{': ' + str(reason) if reason else ''})")
    token = body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise OidcError("the provider's answer has no access_token")
    return token


__all__ = ["PENDING_COOKIE", "PENDING_SECONDS", "OidcClient", "OidcError", "Pending", "challenge", "client_of",
           "redeem", "start"]
