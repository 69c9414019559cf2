"""Signed agent cards (A2A 1.0 §8.4): a JWS over the RFC 8785 canonical form of the 1.0 card, and the JWKS
that publishes the card keys (`GET /.well-known/agent-card-jwks.json`).

The payload is the card as the official SDKs rebuild it before they verify (§8.4.1; a2a-sdk's
`a2a.utils.signing`, @a2a-js/sdk's `canonicalizeAgentCard`): the 1.0 JSON without `signatures`, with the
protobuf default values left out (empty strings, lists and objects, and `false` of the two non-`optional`
booleans, `AgentExtension.required` and `pkceRequired`), canonicalized with the `rfc8785` package. The
signature is made by PyJWT (ES256, a P-256 key); its protected header holds `alg`, `typ: JOSE`, `kid` and
`jku`. The keys live beside the tasks in their own table (`card_signing_keys`, the push key store's code);
a retired key stays in the JWKS for :data:`KEEP_SECONDS` (cards may be cached that long).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import rfc8785
from jwt import api_jws

from parley.push.signing import ALGORITHM, SigningKey, SigningKeys

JWKS_PATH = "/.well-known/agent-card-jwks.json"
TABLE = "card_signing_keys"
KEEP_SECONDS = 7 * 24 * 3600.0  # a retired card key stays published a week: caches keep cards far less long
NON_OPTIONAL_BOOLS = frozenset({"required", "pkceRequired"})  # proto3 plain bools: `false` is the default


def without_defaults(value: Any, key: str | None = None) -> Any:
    """`value` with what ProtoJSON leaves out removed: None, "", [], {} (recursively) and `false` of a plain bool."""
    if isinstance(value, dict):
        out = {k: c for k, v in value.items() if (c := without_defaults(v, k)) is not None}
        return out or None
    if isinstance(value, list):
        items = [c for v in value if (c := without_defaults(v)) is not None]
        return items or None
    if value == "" or (value is False and key in NON_OPTIONAL_BOOLS):
        return None
    return value


def canonical_payload(card_json: dict[str, Any]) -> bytes:
    """The bytes a card's signatures cover: its 1.0 JSON without `signatures` or default values, in JCS form."""
    body = {k: v for k, v in card_json.items() if k != "signatures"}
    return rfc8785.dumps(without_defaults(body) or {})


def signature(card_json: dict[str, Any], key: SigningKey, jku: str) -> dict[str, str]:
    """One `AgentCardSignature` (`protected`, `signature`) of the 1.0 card `card_json` made with `key`."""
    token = api_jws.encode(canonical_payload(card_json), key.private_key(), algorithm=ALGORITHM,
                           headers={"typ": "JOSE", "kid": key.kid, "jku": jku})
    protected, _, sig = token.split(".")
    return {"protected": protected, "signature": sig}


def protected_header(sig: dict[str, Any]) -> dict[str, Any]:
    """The decoded protected header of a signature (ValueError: not base64url JSON of an object)."""
    raw = str(sig.get("protected", ""))
    try:
        header = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"protected header is not base64url JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ValueError("protected header is not a JSON object")
    return header


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
        """The JSON Web Key Set of the card keys a verifier may need."""
        return {"keys": [k.public_jwk() for k in await self.keys.published(self.keep_seconds)]}


__all__ = ["JWKS_PATH", "KEEP_SECONDS", "TABLE", "CardSigner", "canonical_payload", "protected_header",
           "signature", "without_defaults"]
