"""What a secured server refuses to start with: settings that would let a stranger in.

Each rule raises :class:`UnsafeSettingError`, a `ValueError` whose one-line message names the setting and
what it needs; `parley serve` prints it as its only line and exits 2 (a configuration error, like a usage
error), before it listens.

- A token issuer whose keys come from a JWKS URL or an OIDC discovery document must name the audience
  (`auth.jwt.audience`): the provider signs tokens for every application it serves, and without an
  audience check a token made for any of them would be accepted here. With `jwks_url` the issuer
  (`auth.jwt.issuer`) is required too (a discovery document names its own issuer, which is then checked).
- Shared secrets must be strong enough not to be guessed: the admin key (`auth.admin_key_env`) at least
  32 characters, the HS256/384/512 secret (`auth.jwt.secret_env`) at least 32 bytes (RFC 7518 section
  3.2: a key at least as long as the hash output).
"""

from __future__ import annotations

from parley.settings import JwtSettings

MIN_ADMIN_KEY_CHARS = 32
MIN_HMAC_SECRET_BYTES = 32


class UnsafeSettingError(ValueError):
    """A setting a secured server must not start with; the message names it (one line)."""

    exit_code = 2  # what `parley serve` exits with


def check_issuer(settings: JwtSettings) -> None:
    """A public-key issuer (JWKS or OIDC discovery) names the audience, and with `jwks_url` the issuer."""
    source = "jwks_url" if settings.jwks_url else "oidc_discovery_url" if settings.oidc_discovery_url else None
    if source is None:
        return
    if not [a for a in settings.audience if a]:
        raise UnsafeSettingError(f"auth.jwt.audience is required with auth.jwt.{source}: without it any token the "
                                 "provider signs, for any application, would be accepted here")
    if source == "jwks_url" and not settings.issuer:
        raise UnsafeSettingError("auth.jwt.issuer is required with auth.jwt.jwks_url: without it a token of any "
                                 "issuer whose keys are in that JWKS would be accepted")


def check_hmac_secret(variable: str, secret: bytes) -> None:
    """The HS256 secret (from the variable `variable`) is at least MIN_HMAC_SECRET_BYTES bytes."""
    if len(secret) < MIN_HMAC_SECRET_BYTES:
        raise UnsafeSettingError(f"auth.jwt.secret_env: the secret in {variable} is {len(secret)} bytes; it must "
                                 f"be at least {MIN_HMAC_SECRET_BYTES} (python -c \"import secrets; "
                                 "print(secrets.token_urlsafe(48))\")")


def check_admin_key(variable: str, key: str) -> None:
    """The admin key (from the variable `variable`) is at least MIN_ADMIN_KEY_CHARS characters."""
    if len(key) < MIN_ADMIN_KEY_CHARS:
        raise UnsafeSettingError(f"auth.admin_key_env: the admin key in {variable} is {len(key)} characters; it "
                                 f"must be at least {MIN_ADMIN_KEY_CHARS} (python -c \"import secrets; "
                                 "print(secrets.token_urlsafe(48))\")")


__all__ = ["MIN_ADMIN_KEY_CHARS", "MIN_HMAC_SECRET_BYTES", "UnsafeSettingError", "check_admin_key",
           "check_hmac_secret", "check_issuer"]
