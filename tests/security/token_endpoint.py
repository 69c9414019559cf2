"""A small OAuth 2.0 authorization server on 127.0.0.1 for the token-exchange tests (RFC 8693), signing with
PyJWT and a test key made here.

It serves its JWKS (`/jwks.json`, for the Parley servers that verify its tokens) and a token endpoint
(`/token`) for two grants, each authenticating the client (HTTP Basic per RFC 6749 §2.3.1, or
`client_id`/`client_secret` in the form):

- `client_credentials` (RFC 6749 §4.4): a token whose `sub` is the client id (an agent's actor token);
- `urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693 §2.1): the subject token and the actor token are
  verified (signed here, not expired; the actor token must be the authenticated client's own), the requested
  `audience`/`resource` must be a known target (else `invalid_target`), and the issued token keeps the
  subject's `sub` with `aud` = the target and `act` = {"sub": <actor>, "act": <the subject token's act>}: the
  nested actor chain of RFC 8693 §4.1.

Errors are the RFC 6749 §5.2 / RFC 8693 §2.2.2 JSON error response. Every request is recorded (`requests`), so
a test can count exchanges (the cache) and see what the client sent.

    with TokenEndpoint(clients={"hub": "s3cret"}, targets={"https://remote.test"}) as sts:
        caller = sts.issue("alice", aud="https://hub.test")
        ...  JwtSettings(jwks_url=sts.jwks_url, issuer=sts.issuer, audience=[...])
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote_plus

import jwt

from .jwks_server import Signer

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ISSUER = "https://sts.parley.test"


@dataclass
class Seen:
    """One request to the token endpoint: the grant, the authenticated client (or None) and the form."""

    grant: str
    client: str | None
    form: dict[str, list[str]]
    basic: bool
    status: int = 0
    issued: dict[str, Any] = field(default_factory=dict)  # the claims of the token issued, if one was


class Refusal(Exception):
    def __init__(self, status: int, error: str, description: str) -> None:
        self.status, self.error, self.description = status, error, description


class TokenEndpoint:
    """The authorization server over real HTTP on 127.0.0.1, in a thread."""

    def __init__(self, *, clients: dict[str, str], targets: set[str], ttl: int = 300,
                 issuer: str = ISSUER) -> None:
        self.clients = dict(clients)
        self.targets = set(targets)
        self.ttl = ttl
        self.issuer = issuer
        self.signer = Signer.rsa("sts-1")
        self.requests: list[Seen] = []
        self.answer_next: tuple[int, bytes] | None = None  # a raw answer for the next token request
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] == "/jwks.json":
                    self._send(200, {"keys": [owner.signer.jwk()]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                with owner._lock:
                    canned, owner.answer_next = owner.answer_next, None
                if canned is not None:
                    self.send_response(canned[0])
                    self.send_header("Content-Length", str(len(canned[1])))
                    self.end_headers()
                    self.wfile.write(canned[1])
                    return
                status, body = owner._token(self.path, self.headers.get("Content-Type") or "",
                                            self.headers.get("Authorization"), raw)
                extra = {"WWW-Authenticate": 'Basic realm="sts"'} if status == 401 else {}
                self._send(status, body, extra)

            def _send(self, status: int, body: dict[str, Any], extra: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "no-store")
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="token-endpoint")
        self._thread.start()

    # URLs
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks.json"

    # tokens
    def issue(self, sub: str, *, aud: str, scope: str = "a2a", **extra: Any) -> str:
        """A token for `sub` (a user who logged in at this server), for the audience `aud`."""
        now = int(time.time())
        return self.signer.sign({"iss": self.issuer, "sub": sub, "aud": aud, "iat": now, "exp": now + self.ttl,
                                 "scope": scope, **extra})

    def verify(self, token: str, what: str) -> dict[str, Any]:
        """The claims of a token this server issued (any audience); Refusal(invalid_grant) otherwise."""
        try:
            return jwt.decode(token, self.signer.private.public_key(), algorithms=[self.signer.alg],
                              issuer=self.issuer, options={"verify_aud": False, "require": ["exp", "sub"]})
        except jwt.PyJWTError as exc:
            raise Refusal(400, "invalid_grant", f"the {what} is not valid: {exc}") from None

    def seen(self, grant: str) -> list[Seen]:
        """The requests of one grant ("client_credentials" or EXCHANGE), oldest first."""
        with self._lock:
            return [s for s in self.requests if s.grant == grant]

    # the endpoint
    def _token(self, path: str, content_type: str, authorization: str | None, raw: str) -> tuple[int, dict]:
        form = parse_qs(raw, keep_blank_values=True)
        seen = Seen((form.get("grant_type") or [""])[0], None, form, basic=authorization is not None)
        try:
            if path != "/token":
                raise Refusal(404, "invalid_request", "no such endpoint")
            if not content_type.startswith("application/x-www-form-urlencoded"):
                raise Refusal(400, "invalid_request", "the request must be form-encoded")
            seen.client = self._client(authorization, form)
            if seen.grant == "client_credentials":
                claims = self._claims(seen.client, seen.client, self.issuer)
            elif seen.grant == EXCHANGE:
                claims = self._exchange(seen.client, form)
            else:
                raise Refusal(400, "unsupported_grant_type", f"grant {seen.grant!r} is not supported")
        except Refusal as refusal:
            seen.status = refusal.status
            with self._lock:
                self.requests.append(seen)
            return refusal.status, {"error": refusal.error, "error_description": refusal.description}
        seen.status, seen.issued = 200, claims
        with self._lock:
            self.requests.append(seen)
        body: dict[str, Any] = {"access_token": self.signer.sign(claims), "token_type": "Bearer",
                                "expires_in": self.ttl, "scope": claims["scope"]}
        if seen.grant == EXCHANGE:
            body["issued_token_type"] = ACCESS_TOKEN
        return 200, body

    def _client(self, authorization: str | None, form: dict[str, list[str]]) -> str:
        """The client the request authenticates as (RFC 6749 §2.3.1), or Refusal(invalid_client)."""
        in_form = "client_secret" in form
        if authorization is not None and in_form:
            raise Refusal(400, "invalid_request", "more than one client authentication method")
        if authorization is not None:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "basic":
                raise Refusal(401, "invalid_client", "Basic authentication expected")
            client_id, _, secret = base64.b64decode(value).decode().partition(":")
            client_id, secret = unquote_plus(client_id), unquote_plus(secret)
        elif in_form:
            client_id, secret = (form.get("client_id") or [""])[0], form["client_secret"][0]
        else:
            raise Refusal(401, "invalid_client", "client authentication required")
        if self.clients.get(client_id) != secret:
            raise Refusal(401, "invalid_client", "unknown client or wrong secret")
        return client_id

    def _claims(self, sub: str, client: str, aud: str | list[str], scope: str = "a2a",
                act: dict[str, Any] | None = None) -> dict[str, Any]:
        now = int(time.time())
        out: dict[str, Any] = {"iss": self.issuer, "sub": sub, "aud": aud, "iat": now, "exp": now + self.ttl,
                               "scope": scope, "client_id": client}
        if act is not None:
            out["act"] = act
        return out

    def _exchange(self, client: str, form: dict[str, list[str]]) -> dict[str, Any]:
        def one(name: str, required: bool = True) -> str | None:
            values = form.get(name) or []
            if len(values) > 1:
                raise Refusal(400, "invalid_request", f"{name} given more than once")
            if required and not values:
                raise Refusal(400, "invalid_request", f"{name} is required")
            return values[0] if values else None

        subject_type = one("subject_token_type")
        if subject_type not in (ACCESS_TOKEN, JWT_TYPE):
            raise Refusal(400, "invalid_request", f"unsupported subject_token_type {subject_type!r}")
        subject = self.verify(one("subject_token") or "", "subject_token")
        actor_token = one("actor_token", required=False)
        act: dict[str, Any] | None = None
        if actor_token is not None:
            if one("actor_token_type") != ACCESS_TOKEN:
                raise Refusal(400, "invalid_request", "actor_token_type must be access_token")
            actor = self.verify(actor_token, "actor_token")
            if actor["sub"] != client:
                raise Refusal(400, "invalid_grant", "the actor token is not the authenticated client's")
            act = {"sub": actor["sub"]}
            if isinstance(subject.get("act"), dict):
                act["act"] = subject["act"]  # RFC 8693 §4.1: the prior actors, nested
        targets = (form.get("audience") or []) + (form.get("resource") or [])
        unknown = [t for t in targets if t not in self.targets]
        if not targets or unknown:
            raise Refusal(400, "invalid_target", f"not a target of this server: {', '.join(unknown) or '(none)'}")
        scope = one("scope", required=False) or subject.get("scope") or "a2a"
        return self._claims(subject["sub"], client, targets[0] if len(targets) == 1 else targets, scope, act)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["ACCESS_TOKEN", "EXCHANGE", "ISSUER", "JWT_TYPE", "Seen", "TokenEndpoint"]
