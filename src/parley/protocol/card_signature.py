"""What an agent card's signatures cover and how one is checked (A2A 1.0 §8.4), sans-IO: used by the server
that signs (parley.server.card_signing) and by the client and dashboard that verify.

The payload is the card as the official SDKs rebuild it before they verify (§8.4.1; a2a-sdk's
`a2a.utils.signing`, @a2a-js/sdk's `canonicalizeAgentCard`): the 1.0 JSON without `signatures`, with the
protobuf default values left out (empty strings, lists and objects, and `false` of the two non-`optional`
booleans, `AgentExtension.required` and `pkceRequired`), in RFC 8785 form (the `rfc8785` package). A
signature is a JWS with a detached payload (§8.4.2); PyJWT checks it. The keys a verifier trusts come from
the caller, never from the card's `jku` alone (spec PR #2099).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import rfc8785
from jwt import PyJWK, api_jws
from jwt.exceptions import PyJWKError, PyJWTError

ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "EdDSA"]  # asymmetric only
NON_OPTIONAL_BOOLS = frozenset({"required", "pkceRequired"})  # proto3 plain bools: `false` is the default
V03_ONLY = ("url", "preferredTransport", "protocolVersion", "additionalInterfaces",
            "supportsAuthenticatedExtendedCard", "security")


class CardSignatureError(Exception):
    """A card's signatures do not show it comes from a trusted key; `reason` is missing, invalid or untrusted."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


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


def canonical_payload(card_json: Mapping[str, Any]) -> bytes:
    """The bytes a 1.0 card's signatures cover: its JSON without `signatures` or default values, in JCS form."""
    body = {k: v for k, v in card_json.items() if k != "signatures"}
    return rfc8785.dumps(without_defaults(body) or {})


def protected_header(sig: Mapping[str, Any]) -> dict[str, Any]:
    """The decoded protected header of a signature (ValueError: not base64url JSON of an object)."""
    raw = str(sig.get("protected", ""))
    try:
        header = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"its protected header is not base64url JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError("its protected header is not a JSON object")  # noqa: TRY004 - one error for bad input
    return header


def verify(card_json: Mapping[str, Any], trusted: Mapping[str, Any]) -> str:
    """The `kid` of the first signature of `card_json` made by a key of `trusted` (a JWKS: {"keys": [...]}).

    The 0.3 connection fields a server adds for clients without a version are not covered (they are not
    part of a 1.0 card). Raises CardSignatureError: no signature, none valid, or none by a trusted key.
    """
    sigs = card_json.get("signatures")
    if not isinstance(sigs, list) or not sigs:
        raise CardSignatureError("missing", "the agent card is not signed (it has no `signatures`)")
    keys = {k.get("kid"): k for k in trusted.get("keys", []) if isinstance(k, dict)}
    payload = base64.urlsafe_b64encode(canonical_payload({k: v for k, v in card_json.items() if k not in V03_ONLY}))
    problems: list[str] = []
    for i, sig in enumerate(sigs):
        try:
            if not isinstance(sig, dict):
                raise ValueError("it is not an object")  # noqa: TRY004 - reported like the others
            header = protected_header(sig)
            kid = header.get("kid")
            if kid not in keys:
                problems.append(f"signature {i}: key {kid!r} is not one you trust")
                continue
            token = f"{sig.get('protected')}.{payload.rstrip(b'=').decode()}.{sig.get('signature')}"
            api_jws.decode_complete(token, PyJWK(keys[kid]), algorithms=ALGORITHMS)
            return str(kid)
        except (ValueError, PyJWTError, PyJWKError) as exc:
            problems.append(f"signature {i}: {exc}")
    untrusted = all("is not one you trust" in p for p in problems)
    raise CardSignatureError("untrusted" if untrusted else "invalid",
                             "no signature of the agent card verifies: " + "; ".join(problems))


__all__ = ["ALGORITHMS", "CardSignatureError", "canonical_payload", "protected_header", "verify",
           "without_defaults"]
