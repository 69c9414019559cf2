"""Signed notifications: a JWT made with the server's key in every webhook request, and the JWKS that
publishes the public keys (`GET /.well-known/jwks.json`).

Each notification carries `Parley-Signature: <JWT>` (ES256, `kid` in the header) with the claims

    iss          the server's public base URL
    aud          the webhook URL
    iat, exp     when it was signed, and five minutes later
    jti          unique per request (`<event id>.<attempt>.<random>`): a replayed request is recognisable,
                 while a notification sent again (a retry, or after a restart) is a new request
    taskId, eventId, seq
    body_sha256  base64url SHA-256 of the exact request body: the body cannot be swapped

so a receiver that trusts the server's JWKS knows who sent it, for which webhook, when, and that the
body is the one that was signed (A2A `docs/topics/streaming-and-async.md`, "JWT + JWKS"). PyJWT does
the signing; the keys are P-256 keys from `cryptography`, kept beside the tasks (encrypted with the
push encryption key when one is configured).

Rotation (`parley push rotate-key`, or :meth:`SigningKeys.rotate`): new notifications are signed with
a new key at once, and the old key stays in the JWKS as long as a notification signed with it may
still be retried (`[push] max_age_seconds` plus the longest backoff), then it is dropped.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ALGORITHM = "ES256"
SIGNATURE_HEADER = "Parley-Signature"
TOKEN_LIFETIME = 300  # seconds a signature is valid
KeySealer = Callable[[str, str], str]  # (kid, value) -> value: seals or opens a private key at rest


@dataclass(slots=True)
class SigningKey:
    kid: str
    private_pem: str = field(repr=False)  # never in a log line or a repr
    created_at: float
    retired_at: float | None = None

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        return serialization.load_pem_private_key(self.private_pem.encode(), password=None)  # type: ignore[return-value]

    def public_jwk(self) -> dict:
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.private_key().public_key()))
        return {**jwk, "kid": self.kid, "alg": ALGORITHM, "use": "sig"}


def new_key(now: float) -> SigningKey:
    """A fresh P-256 key."""
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return SigningKey(kid=f"parley-{int(now)}-{secrets.token_hex(4)}", private_pem=pem, created_at=now)


class SigningKeys(ABC):
    """Where the server's signing keys live. `seal(kid, pem)`/`open(kid, stored)` protect the private keys at
    rest (:meth:`parley.push.secrets.SecretBox.seal_key` / `open_key`: sealed and bound to their kid)."""

    def __init__(self, seal: KeySealer | None = None, open_: KeySealer | None = None) -> None:
        self._seal: KeySealer = seal or (lambda kid, pem: pem)
        self._open: KeySealer = open_ or (lambda kid, stored: stored)
        self._lock = asyncio.Lock()

    async def active(self, now: float | None = None) -> SigningKey:
        """The key that signs now (made on first use)."""
        now = time.time() if now is None else now
        async with self._lock:
            keys = [k for k in await self._all() if k.retired_at is None]
            if keys:
                return max(keys, key=lambda k: k.created_at)
            key = new_key(now)
            await self._put(key)
            return key

    async def rotate(self, now: float | None = None) -> SigningKey:
        """Retire the signing key(s) and make a new one."""
        now = time.time() if now is None else now
        async with self._lock:
            for key in await self._all():
                if key.retired_at is None:
                    key.retired_at = now
                    await self._put(key)
            key = new_key(now)
            await self._put(key)
            return key

    async def published(self, keep_seconds: float, now: float | None = None) -> list[SigningKey]:
        """The keys receivers may need: the active ones, and retired ones younger than `keep_seconds`."""
        now = time.time() if now is None else now
        return [k for k in await self._all() if k.retired_at is None or k.retired_at + keep_seconds > now]

    @abstractmethod
    async def _all(self) -> list[SigningKey]: ...

    @abstractmethod
    async def _put(self, key: SigningKey) -> None: ...

    async def open(self) -> None:
        """Connect (a server database's keys create their tables here); the runtime calls it at start."""

    async def close(self) -> None:
        """Release resources."""


class MemorySigningKeys(SigningKeys):
    """Keys of a `--memory` server: gone with the process (receivers refetch the JWKS on an unknown kid)."""

    def __init__(self) -> None:
        super().__init__()
        self._keys: dict[str, SigningKey] = {}

    async def _all(self) -> list[SigningKey]:
        return list(self._keys.values())

    async def _put(self, key: SigningKey) -> None:
        self._keys[key.kid] = key


class SqliteSigningKeys(SigningKeys):
    """Keys in the task database's file (table `push_signing_keys`, or `table`: the card keys have their own),
    private keys sealed."""

    def __init__(self, path: str, seal: KeySealer | None = None, open_: KeySealer | None = None, *, table: str = "push_signing_keys") -> None:
        super().__init__(seal, open_)
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        self.table = table
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (kid TEXT PRIMARY KEY, private_pem TEXT "
                         "NOT NULL, created_at REAL NOT NULL, retired_at REAL)")

    async def _all(self) -> list[SigningKey]:
        rows = self._db.execute(f"SELECT kid, private_pem, created_at, retired_at FROM {self.table}").fetchall()
        return [SigningKey(kid, self._open(kid, pem), created, retired) for kid, pem, created, retired in rows]

    async def _put(self, key: SigningKey) -> None:
        self._db.execute(f"INSERT OR REPLACE INTO {self.table} VALUES (?,?,?,?)",
                         (key.kid, self._seal(key.kid, key.private_pem), key.created_at, key.retired_at))

    async def close(self) -> None:
        self._db.close()


def body_digest(body: bytes) -> str:
    """base64url (no padding) SHA-256 of a request body: the `body_sha256` claim."""
    return base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()


class PushSigner:
    """Signs notifications with the active key; publishes the JWKS.

    Args:
        keys: the key store.
        keep_seconds: how long a retired key stays published (the longest a signed notification may
            still be retried).
    """

    def __init__(self, keys: SigningKeys, keep_seconds: float) -> None:
        self.keys = keys
        self.keep_seconds = keep_seconds

    async def sign(self, body: bytes, *, issuer: str, url: str, task_id: str, event_id: str, seq: int,
                   attempt: int, now: float | None = None) -> str:
        now = time.time() if now is None else now
        key = await self.keys.active(now)
        claims = {"iss": issuer, "aud": url, "iat": int(now), "exp": int(now) + TOKEN_LIFETIME,
                  "jti": f"{event_id}.{attempt}.{secrets.token_hex(6)}", "taskId": task_id, "eventId": event_id,
                  "seq": seq,
                  "body_sha256": body_digest(body)}
        return jwt.encode(claims, key.private_key(), algorithm=ALGORITHM, headers={"kid": key.kid, "typ": "JWT"})

    async def jwks(self, now: float | None = None) -> dict:
        """The JSON Web Key Set of the keys receivers may need."""
        return {"keys": [k.public_jwk() for k in await self.keys.published(self.keep_seconds, now)]}


def standard_webhook_headers(secret: str, event_id: str, body: bytes, now: float | None = None) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp`, `webhook-signature` (Standard Webhooks, HMAC-SHA256 `v1`) for a
    secret in the `whsec_<base64>` form (the prefix is optional)."""
    timestamp = str(int(time.time() if now is None else now))
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{event_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": event_id, "webhook-timestamp": timestamp,
            "webhook-signature": "v1," + base64.b64encode(mac).decode()}


__all__ = ["ALGORITHM", "SIGNATURE_HEADER", "MemorySigningKeys", "PushSigner", "SigningKey", "SigningKeys",
           "SqliteSigningKeys", "body_digest", "new_key", "standard_webhook_headers"]
