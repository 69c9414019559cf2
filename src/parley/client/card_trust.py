"""The keys a client trusts to sign agent cards, and the check of a card against them (A2A 1.0 §8.4.3).

Trust comes from the caller: a key list (a JWKS as a dict), a pinned JWKS file, or a pinned JWKS URL the
caller names. The card's own `jku` is never used to decide trust (spec PR #2099): anyone can sign a card
with a key they publish themselves.

    trust = CardTrust.from_file("agents-example-com.jwks.json")
    client = await A2AClient.connect(url, verify=trust)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from parley.client.errors import ClientError
from parley.protocol.card_signature import CardSignatureError, verify


class CardVerificationError(ClientError):
    """The agent card is not signed by a key the caller trusts; `reason` is missing, invalid or untrusted."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class CardTrust:
    """A set of trusted public keys (JWKS form, each with a `kid`)."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        keys = jwks.get("keys") if isinstance(jwks, dict) else None
        if not isinstance(keys, list) or not keys:
            raise ValueError("a trusted key set is a JWKS: {\"keys\": [...]} with at least one key")
        self.jwks = {"keys": keys}

    @classmethod
    def from_file(cls, path: str | Path) -> CardTrust:
        """A pinned JWKS file."""
        try:
            return cls(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            raise ClientError(f"cannot read the trusted keys {path}: {exc}") from None

    @classmethod
    async def from_url(cls, url: str, http: httpx.AsyncClient | None = None) -> CardTrust:
        """A pinned JWKS URL (the caller's choice, not a card's `jku`)."""
        owns = http is None
        http = http or httpx.AsyncClient(timeout=10)
        try:
            resp = await http.get(url)
            resp.raise_for_status()
            return cls(resp.json())
        except (httpx.HTTPError, ValueError) as exc:
            raise ClientError(f"cannot read the trusted keys at {url}: {exc}") from None
        finally:
            if owns:
                await http.aclose()

    @classmethod
    async def load(cls, where: str) -> CardTrust:
        """A JWKS file, or an http(s) URL of one."""
        if where.startswith(("http://", "https://")):
            return await cls.from_url(where)
        return cls.from_file(where)

    def check(self, card_json: dict[str, Any]) -> str:
        """The `kid` that signed `card_json` (CardVerificationError: missing, invalid or untrusted)."""
        try:
            return verify(card_json, self.jwks)
        except CardSignatureError as exc:
            raise CardVerificationError(exc.reason, str(exc)) from None


__all__ = ["CardTrust", "CardVerificationError"]
