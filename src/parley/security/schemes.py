"""What an agent card declares about authentication: exactly the schemes that are enforced.

A secured server (see :mod:`parley.security.authenticate`) declares an API-key scheme
(`X-API-Key`) when it takes keys, and a bearer scheme (JWT, or OpenID Connect with its
discovery URL) when it takes tokens; its `securityRequirements` list them as alternatives.
An open server declares none: its cards promise nothing they do not enforce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parley.security.authenticate import API_KEY_HEADER, CredentialAuthenticator

API_KEY_SCHEME = "apiKey"
BEARER_SCHEME = "bearer"


@dataclass(frozen=True, slots=True)
class CardSecurity:
    """The A2A 1.0 `securitySchemes` and `securityRequirements` of the cards of a secured server."""

    schemes: tuple[tuple[str, Any], ...]  # (name, SecurityScheme JSON), hashable for card caches
    requirements: tuple[str, ...]  # scheme names, each an alternative requirement

    def schemes_json(self) -> dict[str, dict[str, Any]]:
        return {name: scheme for name, scheme in self.schemes}

    def requirements_json(self) -> list[dict[str, Any]]:
        return [{"schemes": {name: {"list": []}}} for name in self.requirements]


def card_security(auth: CredentialAuthenticator) -> CardSecurity:
    """The schemes a secured server enforces, as its cards declare them."""
    schemes: list[tuple[str, Any]] = []
    if auth.keys is not None or auth.admin_key is not None:
        schemes.append((API_KEY_SCHEME, {"apiKeySecurityScheme": {
            "location": "header", "name": API_KEY_HEADER,
            "description": "An API key of this agent (parley keys create); also accepted as a bearer token"}}))
    if auth.jwt is not None:
        schemes.append((BEARER_SCHEME, auth.jwt.security_scheme()))
    return CardSecurity(schemes=tuple(schemes), requirements=tuple(name for name, _ in schemes))


__all__ = ["API_KEY_SCHEME", "BEARER_SCHEME", "CardSecurity", "card_security"]
