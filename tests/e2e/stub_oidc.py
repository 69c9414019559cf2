"""A stand-in OpenID Connect provider for the dashboard's login tests: an identity provider is an external
service we cannot run here, so this one speaks the same HTTP interface (discovery, JWKS, the authorization
endpoint, the token endpoint with PKCE S256 and client_secret_basic) on a real port of 127.0.0.1.

The authorization endpoint approves at once, as the user `next_user` names (the test sets it), and remembers
what it was asked, so tests can check the client sent a state and an S256 challenge.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
import time
from typing import Any
from urllib.parse import urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

AUDIENCE = "parley"


class StubProvider:
    """The provider: its keys, its users' next login, the codes it handed out, and what it was sent."""

    def __init__(self, client_id: str, client_secret: str) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.next_user: dict[str, str] = {"sub": "ops", "scope": "openid admin a2a"}
        self.codes: dict[str, dict[str, Any]] = {}
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def discovery_url(self) -> str:
        return f"{self.url}/.well-known/openid-configuration"

    # --- HTTP -------------------------------------------------------------------------------------

    async def discovery(self, request: Request) -> Response:
        return JSONResponse({"issuer": self.url, "authorization_endpoint": f"{self.url}/authorize",
                             "token_endpoint": f"{self.url}/token", "jwks_uri": f"{self.url}/jwks",
                             "code_challenge_methods_supported": ["S256"]})

    async def jwks(self, request: Request) -> Response:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**jwk, "kid": "stub-1", "alg": "RS256", "use": "sig"}]})

    async def authorize(self, request: Request) -> Response:
        q = dict(request.query_params)
        self.authorize_requests.append(q)
        if q.get("client_id") != self.client_id or q.get("response_type") != "code":
            return JSONResponse({"error": "unauthorized_client"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"challenge": q.get("code_challenge"), "redirect_uri": q.get("redirect_uri"),
                            "user": dict(self.next_user)}
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q.get('state', '')})}",
                                status_code=302)

    async def token(self, request: Request) -> Response:
        form = dict(await request.form())
        self.token_requests.append(form)
        expected = "Basic " + base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("redirect_uri") != grant["redirect_uri"]:
            return JSONResponse({"error": "invalid_grant", "error_description": "unknown code"}, status_code=400)
        verifier = form.get("code_verifier", "")
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        if digest != grant["challenge"]:
            return JSONResponse({"error": "invalid_grant", "error_description": "PKCE verifier does not match"},
                                status_code=400)
        now = int(time.time())
        claims = {"iss": self.url, "aud": AUDIENCE, "iat": now, "exp": now + 600, **grant["user"]}
        access = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "stub-1"})
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 600})

    # --- running ----------------------------------------------------------------------------------

    def start(self) -> StubProvider:
        app = Starlette(routes=[Route("/.well-known/openid-configuration", self.discovery),
                                Route("/jwks", self.jwks), Route("/authorize", self.authorize),
                                Route("/token", self.token, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:  # bounded: uvicorn says when it listens
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the stub OIDC provider did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)
