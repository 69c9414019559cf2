"""Signed agent cards (A2A 1.0 §8.4): a JWS over the RFC 8785 canonical form of the 1.0 card, and the JWKS
that publishes the card keys (`GET /.well-known/agent-card-jwks.json`).

The payload is :func:`parley.protocol.card_signature.canonical_payload` of the 1.0 card (what the official
SDKs rebuild before they verify). The signature is made by PyJWT (ES256, a P-256 key); its protected
header holds `alg`, `typ: JOSE`, `kid` and `jku`. The keys live beside the tasks in their own table (`card_signing_keys`, the push key store's code);
a retired key stays in the JWKS for :data:`KEEP_SECONDS` (cards may be cached that long).
"""

from __future__ import annotations

from typing import Any

from jwt import api_jws

from parley.protocol.card_signature import canonical_payload
from parley.push.signing import ALGORITHM, SigningKey, SigningKeys

JWKS_PATH = "/.well-known/agent-card-jwks.json"
TABLE = "card_signing_keys"
KEEP_SECONDS = 7 * 24 * 3600.0  # a retired card key stays published a week: caches keep cards far less long


def signature(card_json: dict[str, Any], key: SigningKey, jku: str) -> dict[str, str]:
    """One `AgentCardSignature` (`protected`, `signature`) of the 1.0 card `card_json` made with `key`."""
    token = api_jws.encode(canonical_payload(card_json), key.private_key(), algorithm=ALGORITHM,
                           headers={"typ": "JOSE", "kid": key.kid, "jku": jku})
    protected, _, sig = token.split(".")
    return {"protected": protected, "signature": sig}


class CardSigner:
    """Signs the cards of one server with its active card key; publishes the card JWKS.

    Args:
        keys: the key store (table `card_signing_keys` beside the tasks).
        keep_seconds: how long a retired key stays in the JWKS.
    """

    def __init__(self, keys: SigningKeys, keep_seconds: float = KEEP_SECONDS) -> None:
        self.keys = keys
        self.keep_seconds = keep_seconds

    async def active(self) -> SigningKey:
        """The key that signs now (made on first use)."""
        return await self.keys.active()

    async def jwks(self) -> dict[str, Any]:
        """The JSON Web Key Set of the card keys a verifier may need (the active key made first if need be)."""
        await self.keys.active()
        return {"keys": [k.public_jwk() for k in await self.keys.published(self.keep_seconds)]}


__all__ = ["JWKS_PATH", "KEEP_SECONDS", "TABLE", "CardSigner", "signature"]
