"""OAuth 2.0 Token Exchange (RFC 8693) for a remote hop: the caller's token swapped, at the token endpoint, for
one the remote agent accepts, with this agent as the actor (`act`), cached until shortly before it expires.

    exchanger = TokenExchanger(ExchangeSettings(token_endpoint="https://idp.example.com/token",
                                                client_id="hub", client_secret="...",
                                                audience=["https://billing.example.com"]))
    issued = await exchanger.exchange(caller_token)      # TokenExchangeError when refused
    headers = {"Authorization": f"Bearer {issued.access_token}"}

One exchange is a form-encoded POST (RFC 8693 §2.1) authenticated as this Parley's OAuth client (RFC 6749
§2.3.1: HTTP Basic by default, or `client_id`/`client_secret` in the body) carrying:

- `subject_token`: the caller's bearer token (type `access_token` or `jwt`);
- `actor_token`: a token naming this agent, obtained from the same endpoint with the client-credentials grant
  (RFC 6749 §4.4) and cached, so the issued token's `act` claim names this agent and, nested inside it, the
  actors of the subject token (RFC 8693 §4.1): each hop of a chain is named;
- `audience` / `resource` / `scope`: what the issued token is for.

A refusal is the endpoint's error response (RFC 8693 §2.2.2, RFC 6749 §5.2: `invalid_grant`,
`invalid_target`, `invalid_client`, ...); it, a malformed answer, an unreachable endpoint and a token that is not
a bearer token all raise :class:`TokenExchangeError` naming what went wrong. Nothing here falls back to another
credential: what a refusal means for the delegation is the caller's business (it fails, see
:mod:`parley.hub.remote`).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote_plus

import httpx

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
SUBJECT_TOKEN_TYPES = {"access_token": ACCESS_TOKEN_TYPE, "jwt": JWT_TOKEN_TYPE}
MAX_CACHED = 1024  # exchanged tokens kept (least recently used dropped first)
DESCRIPTION_MAX = 200  # characters of the endpoint's error_description quoted in an error

ClientAuth = Literal["basic", "post"]


class TokenExchangeError(Exception):
    """The token endpoint refused or failed the exchange: `error` is the RFC 6749 §5.2 code when it sent one."""

    def __init__(self, message: str, *, error: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.status = status


@dataclass(frozen=True)
class ExchangeSettings:
    """Where and how to exchange: the endpoint, this client's credentials, what the issued token is for."""

    token_endpoint: str
    client_id: str
    client_secret: str = field(repr=False)
    audience: list[str] = field(default_factory=list)
    resource: list[str] = field(default_factory=list)
    scope: str | None = None
    subject_token_type: str = ACCESS_TOKEN_TYPE
    client_auth: ClientAuth = "basic"
    timeout: float = 10.0
    refresh_before_seconds: float = 30.0  # an issued token is used until this long before it expires


@dataclass(frozen=True)
class IssuedToken:
    """What the endpoint issued (RFC 8693 §2.2.1)."""

    access_token: str = field(repr=False)
    token_type: str
    issued_token_type: str
    expires_in: float | None = None
    scope: str | None = None


class TokenExchanger:
    """Exchanges tokens at one endpoint for one purpose (one remote agent), caching what it was issued."""

    def __init__(self, settings: ExchangeSettings, *, clock: Callable[[], float] = time.monotonic,
                 max_cached: int = MAX_CACHED) -> None:
        self.settings = settings
        self.clock = clock
        self.max_cached = max_cached
        self._cache: OrderedDict[str, tuple[IssuedToken, float]] = OrderedDict()  # digest -> (token, use until)
        self._actor: tuple[str, float] | None = None

    async def exchange(self, subject_token: str) -> IssuedToken:
        """A token for the remote agent on behalf of `subject_token`'s subject, this agent acting."""
        digest = hashlib.sha256(subject_token.encode()).hexdigest()
        cached = self._cache.get(digest)
        if cached is not None and self.clock() < cached[1]:
            self._cache.move_to_end(digest)
            return cached[0]
        s = self.settings
        form: list[tuple[str, str]] = [("grant_type", GRANT_TYPE), ("subject_token", subject_token),
                                       ("subject_token_type", s.subject_token_type),
                                       ("actor_token", await self.actor_token()),
                                       ("actor_token_type", ACCESS_TOKEN_TYPE),
                                       ("requested_token_type", ACCESS_TOKEN_TYPE)]
        form += [("audience", a) for a in s.audience] + [("resource", r) for r in s.resource]
        if s.scope:
            form.append(("scope", s.scope))
        issued = _issued(await self._post(form, "the token exchange"))
        self._keep(digest, issued)
        return issued

    async def actor_token(self) -> str:
        """This agent's own token (client credentials grant), the `actor_token` of every exchange; cached."""
        if self._actor is not None and self.clock() < self._actor[1]:
            return self._actor[0]
        issued = _issued(await self._post([("grant_type", "client_credentials")], "the actor token request"),
                         exchange=False)
        self._actor = (issued.access_token, self._use_until(issued))
        return issued.access_token

    def _keep(self, digest: str, issued: IssuedToken) -> None:
        if issued.expires_in is None:  # no lifetime said: not cached, exchanged again next time
            return
        self._cache[digest] = (issued, self._use_until(issued))
        self._cache.move_to_end(digest)
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)

    def _use_until(self, issued: IssuedToken) -> float:
        if issued.expires_in is None:
            return self.clock()  # used once
        margin = min(self.settings.refresh_before_seconds, issued.expires_in / 2)
        return self.clock() + issued.expires_in - margin

    async def _post(self, form: list[tuple[str, str]], what: str) -> dict[str, Any]:
        """POST the form with this client's authentication; the JSON answer, or TokenExchangeError."""
        s = self.settings
        auth: httpx.Auth | None = None
        if s.client_auth == "basic":  # RFC 6749 §2.3.1: both form-urlencoded, then Basic
            auth = httpx.BasicAuth(quote_plus(s.client_id), quote_plus(s.client_secret))
        else:
            form = [*form, ("client_id", s.client_id), ("client_secret", s.client_secret)]
        try:
            async with httpx.AsyncClient(timeout=s.timeout, follow_redirects=False) as http:
                resp = await http.post(s.token_endpoint, data=dict(_grouped(form)), auth=auth,
                                       headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise TokenExchangeError(f"cannot reach the token endpoint {s.token_endpoint} for {what}: "
                                     f"{type(exc).__name__}: {exc}") from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code == 200 and isinstance(body, dict):
            return body
        if isinstance(body, dict) and isinstance(body.get("error"), str):  # RFC 6749 §5.2
            code = body["error"]
            desc = body.get("error_description")
            detail = f": {_clip(desc)}" if isinstance(desc, str) and desc else ""
            raise TokenExchangeError(f"the token endpoint refused {what} (HTTP {resp.status_code}): {code}{detail}",
                                     error=code, status=resp.status_code)
        raise TokenExchangeError(f"the token endpoint answered {what} with HTTP {resp.status_code} and no "
                                 "OAuth error response", status=resp.status_code)


def _grouped(form: list[tuple[str, str]]) -> dict[str, str | list[str]]:
    """Repeated parameters (several `audience` or `resource`) as lists, the way httpx encodes them."""
    out: dict[str, str | list[str]] = {}
    for name, value in form:
        prior = out.get(name)
        if prior is None:
            out[name] = value
        else:
            out[name] = [*prior, value] if isinstance(prior, list) else [prior, value]
    return out


def _issued(body: dict[str, Any], *, exchange: bool = True) -> IssuedToken:
    """The successful response checked (RFC 8693 §2.2.1; RFC 6749 §5.1 for client credentials)."""
    token, token_type = body.get("access_token"), body.get("token_type")
    if not isinstance(token, str) or not token:
        raise TokenExchangeError("the token endpoint's answer has no access_token")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenExchangeError(f"the token endpoint issued a token of type {token_type!r}, not a Bearer token "
                                 "this server can present")
    issued_type = body.get("issued_token_type")
    if exchange and not isinstance(issued_type, str):
        raise TokenExchangeError("the token endpoint's answer has no issued_token_type (RFC 8693 §2.2.1)")
    expires_in = body.get("expires_in")
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0:
        expires_in = None
    scope = body.get("scope") if isinstance(body.get("scope"), str) else None
    return IssuedToken(token, token_type, issued_type if isinstance(issued_type, str) else ACCESS_TOKEN_TYPE,
                       float(expires_in) if expires_in is not None else None, scope)


def _clip(text: str) -> str:
    text = " ".join(text.split())  # no line breaks from a remote party in our messages and logs
    return text if len(text) <= DESCRIPTION_MAX else text[:DESCRIPTION_MAX] + "…"


__all__ = ["ACCESS_TOKEN_TYPE", "GRANT_TYPE", "JWT_TOKEN_TYPE", "SUBJECT_TOKEN_TYPES", "ExchangeSettings",
           "IssuedToken", "TokenExchangeError", "TokenExchanger"]
