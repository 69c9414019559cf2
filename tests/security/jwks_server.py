"""A tiny identity provider on 127.0.0.1 for the security tests: a JWKS and an OIDC discovery document.

Keys are made here with `cryptography` (RSA 2048, EC P-256, Ed25519; nothing is read from disk);
tokens are signed with PyJWT, or by hand for the attacks (`alg: none`, HS256 keyed with a public
key). The server runs in a thread and counts the requests per path, so a test can show how often
a verifier fetched the keys; it can be stopped (connection refused) and started again on the same
port, to show that cached keys keep working while the endpoint is down.

    with JwksServer() as idp:
        rsa = Signer.rsa("rsa-1")
        idp.publish(rsa)
        token = rsa.sign(claims(sub="alice"))
        ...  JwtSettings(jwks_url=idp.jwks_url, ...)  /  JwtSettings(oidc_discovery_url=idp.discovery_url)
        idp.hits[JWKS_PATH]
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

JWKS_PATH = "/jwks.json"
DISCOVERY_PATH = "/.well-known/openid-configuration"
ISSUER = "https://idp.parley.test"
AUDIENCE = "https://agents.parley.test/a2a"


# --- keys and tokens ------------------------------------------------------------------------------


@dataclass
class Signer:
    """A private key of the identity provider, its kid and algorithm, and its public JWK."""

    kid: str
    alg: str
    private: Any

    @classmethod
    def rsa(cls, kid: str) -> Signer:
        return cls(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def ec(cls, kid: str) -> Signer:
        return cls(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def ed(cls, kid: str) -> Signer:
        return cls(kid, "EdDSA", ed25519.Ed25519PrivateKey.generate())

    def jwk(self) -> dict[str, Any]:
        """The public key as a JWK (with kid, alg and use)."""
        public = self.private.public_key()
        to_jwk = {"RS256": RSAAlgorithm, "ES256": ECAlgorithm, "EdDSA": OKPAlgorithm}[self.alg].to_jwk
        out = to_jwk(public, as_dict=True)
        out.update(kid=self.kid, alg=self.alg, use="sig")
        return out

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, payload: dict[str, Any], *, kid: str | None = None) -> str:
        """A token signed with this key; `kid` overrides the header's key id."""
        return jwt.encode(payload, self.private, algorithm=self.alg, headers={"kid": kid or self.kid})


def claims(sub: str = "alice", *, now: float | None = None, **overrides: Any) -> dict[str, Any]:
    """Valid claims for ISSUER / AUDIENCE, good for ten minutes; `key=None` drops a claim."""
    now = time.time() if now is None else now
    out: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": int(now), "exp": int(now) + 600,
                           "scope": "a2a"}
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict[str, Any], payload: dict[str, Any], hmac_key: bytes | None = None) -> str:
    """A token built by hand: unsigned (`alg: none`, empty signature) or HS256 under `hmac_key`."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}"
    signature = b""
    if hmac_key is not None:
        signature = hmac.new(hmac_key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


# --- the server -----------------------------------------------------------------------------------


class JwksServer:
    """The provider's documents over real HTTP on 127.0.0.1, counting requests per path.

    `publish(...)` sets the JWKS; `stop()` closes the listening socket (clients get connection
    refused) and `start()` opens it again on the same port.
    """

    def __init__(self, issuer: str = ISSUER) -> None:
        self.issuer = issuer
        self.hits: Counter[str] = Counter()
        self._keys: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.start()

    # URLs
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return self.url + JWKS_PATH

    @property
    def discovery_url(self) -> str:
        return self.url + DISCOVERY_PATH

    # documents
    def publish(self, *signers: Signer | dict[str, Any]) -> None:
        """Serve these keys (Signers or raw JWK dicts) from now on."""
        with self._lock:
            self._keys = [s.jwk() if isinstance(s, Signer) else s for s in signers]

    def fetches(self) -> int:
        """How many times the JWKS was requested."""
        with self._lock:
            return self.hits[JWKS_PATH]

    def _document(self, path: str) -> dict[str, Any] | None:
        if path == JWKS_PATH:
            return {"keys": list(self._keys)}
        if path == DISCOVERY_PATH:
            return {"issuer": self.issuer, "jwks_uri": self.jwks_url,
                    "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"]}
        return None

    # lifecycle
    def start(self) -> None:
        """Listen (again) on 127.0.0.1: a free port the first time, the same port after a stop()."""
        assert self._server is None, "already running"
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with owner._lock:
                    owner.hits[path] += 1
                    document = owner._document(path)
                body = json.dumps(document if document is not None else {"error": "not found"}).encode()
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="jwks-server")
        self._thread.start()

    def stop(self) -> None:
        """Stop answering: the socket is closed, so a fetch fails with connection refused."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            assert self._thread is not None
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["AUDIENCE", "DISCOVERY_PATH", "ISSUER", "JWKS_PATH", "JwksServer", "Signer", "b64url", "claims",
           "handmade"]
