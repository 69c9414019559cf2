"""The secrets of a push config (its `token` and `authentication.credentials`) and the push-signing keys:
write-only, and sealed at rest, bound to their row, when a key is configured.

A client registers a webhook with credentials the server must present to it; nobody needs to read
them back, so get and list answers leave them out (:func:`redact`). With `[push]
encryption_key_env` naming a variable that holds a Fernet key (`python -c "from
cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`), they are stored sealed
with AES-256-GCM (`cryptography`; the AEAD key is derived from that key with HKDF-SHA256), and opened
only to deliver.

What a client sends is never taken for sealed data: every value is sealed as it came, so a stored
ciphertext pasted in as a token is delivered as that text, never opened. A sealed value is bound to
where it is stored by the AEAD's associated data (:class:`Binding`: task id, config id, owner and field
name; a signing key: its kid), so a value copied to another row or field, or to another owner, does not
open: SecretError, and the notification is dead-lettered with a reason naming the field only.

Stored forms: `enc:v2:<base64url nonce + ciphertext>` (sealed, bound), `plain:<value>` (no key
configured). Rows written by older Parleys still open: `enc:v1:` (Fernet, unbound) and unprefixed
plain values; they are sealed in the new form when the config is registered again (a rotated signing
key is sealed in the new form). An `enc:v1:` value is refused when it was sealed well before its row
was stored (LEGACY_SKEW): an older Parley stored a pasted ciphertext as it came, so such a value was
sealed for another row.

They are sent as HTTP header values (`X-A2A-Notification-Token`, `Authorization: <scheme>
<credentials>`), so a value that is not one (CR, LF, NUL or another control character, or a
character outside printable ASCII) is refused when the config is registered: -32602 naming the
field, never the value (:func:`check_header_values`). A value stored before that rule existed is
refused again when it would be delivered (:meth:`SecretBox.open` raises SecretError, whose message
names the field only), so the notification is dead-lettered with that reason, not with an HTTP
library's error quoting the secret.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from parley.protocol import models as m
from parley.protocol.errors import InvalidParamsError

PREFIX = "enc:v2:"  # sealed with AES-GCM, bound to its row
LEGACY_PREFIX = "enc:v1:"  # sealed with Fernet by Parley before the binding (read, never written)
PLAIN_PREFIX = "plain:"  # stored as given: no key configured
LEGACY_SKEW = 300.0  # seconds an older Parley's seal may predate its row's created_at (clocks of replicas)
_HKDF_INFO = b"parley push secrets v2"
_NONCE = 12
_HEADER_VALUE = re.compile(r"[\x20-\x7e]*")  # printable ASCII and space: what a header value can carry as is
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110 section 5.6.2): the auth scheme


def header_problems(config: m.TaskPushNotificationConfig) -> list[str]:
    """The fields of `config` that cannot be sent as HTTP header values as they are (names only, never values):
    `token`, `authentication.credentials` (printable ASCII), `authentication.scheme` (an HTTP token)."""
    bad = []
    if config.token and not _HEADER_VALUE.fullmatch(config.token):
        bad.append("token")
    auth = config.authentication
    if auth is not None:
        if auth.scheme and not _TOKEN.fullmatch(auth.scheme.strip()):
            bad.append("authentication.scheme")
        if auth.credentials and not _HEADER_VALUE.fullmatch(auth.credentials):
            bad.append("authentication.credentials")
    return bad


def check_header_values(config: m.TaskPushNotificationConfig) -> None:
    """InvalidParamsError (-32602) naming the first field :func:`header_problems` finds; the value is never quoted."""
    bad = header_problems(config)
    if bad:
        what = "an HTTP token" if bad[0] == "authentication.scheme" else "printable ASCII (no control characters)"
        raise InvalidParamsError(f"Invalid params: `{bad[0]}` must be {what}: it is sent as an HTTP header value")


class SecretError(Exception):
    """A stored secret cannot be opened (the key changed or is missing, or it was moved from another row)."""


@dataclass(frozen=True, slots=True)
class Binding:
    """Where a push config's secrets are stored: what their associated data names."""

    task_id: str
    config_id: str
    owner: str
    created_at: float = 0.0  # when the config was stored: an older Parley's seal must not predate it

    def context(self, field: str) -> bytes:
        return f"parley-push-config\0{self.task_id}\0{self.config_id}\0{self.owner}\0{field}".encode()


def signing_key_context(kid: str, purpose: str = "push") -> bytes:
    """The associated data of a signing private key: what it signs ("push" notifications, agent "card"s) and
    its kid (a config's secret never opens as one, nor a card key as a push key)."""
    return f"parley-{purpose}-signing-key\0{kid}".encode()


class SecretBox:
    """Seals and opens push secrets with one key (None: stored as given, marked `plain:`)."""

    def __init__(self, key: str | bytes | None = None) -> None:
        self._fernet = Fernet(key) if key else None  # ValueError: not a Fernet key
        self._aead: AESGCM | None = None
        if key:
            raw = base64.urlsafe_b64decode(key)
            self._aead = AESGCM(HKDF(hashes.SHA256(), 32, salt=None, info=_HKDF_INFO).derive(raw))

    @property
    def encrypts(self) -> bool:
        return self._aead is not None

    def seal(self, config: m.TaskPushNotificationConfig, where: Binding) -> m.TaskPushNotificationConfig:
        """A copy to store: its secrets checked (InvalidParamsError naming a field that cannot be a header value)
        and sealed as they came, bound to `where`."""
        check_header_values(config)
        return self._map(config, lambda value, field: self.seal_text(value, where.context(field)))

    def open(self, config: m.TaskPushNotificationConfig, where: Binding) -> m.TaskPushNotificationConfig:
        """A stored config with its secrets readable again (SecretError when they cannot be: sealed for another
        row, field or owner, or another key; or when they are no header values: stored before registration
        refused those). The message names the field, never the value."""
        opened = self._map(config, lambda value, field: self._open_field(value, where, field))
        bad = header_problems(opened)
        if bad:
            raise SecretError(f"the push config's `{bad[0]}` cannot be sent as an HTTP header value (it has control "
                              "or non-ASCII characters); register the config again with a valid one")
        return opened

    def _open_field(self, value: str, where: Binding, field: str) -> str:
        try:
            return self.open_text(value, where.context(field), not_before=where.created_at - LEGACY_SKEW)
        except SecretError as exc:
            raise SecretError(f"the push config's `{field}` {exc}") from None

    def seal_text(self, value: str, context: bytes) -> str:
        """`value` as stored: sealed with `context` as associated data (always, whatever it looks like)."""
        if self._aead is None:
            return PLAIN_PREFIX + value
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, value.encode(), context)
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open_text(self, value: str, context: bytes, *, not_before: float = 0.0) -> str:
        """A stored value readable again (SecretError when it was sealed for another context or key).

        An older Parley's `enc:v1:` value carries no binding, only when it was sealed: one sealed before
        `not_before` (the row was stored later: it was pasted in from elsewhere) is refused."""
        if value.startswith(PLAIN_PREFIX):
            return value[len(PLAIN_PREFIX):]
        if value.startswith(PREFIX):
            if self._aead is None:
                raise SecretError("is sealed and no key is configured ([push] encryption_key_env)")
            try:
                raw = base64.urlsafe_b64decode(value[len(PREFIX):])
                return self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], context).decode()
            except (InvalidTag, binascii.Error, ValueError):
                raise SecretError("does not open here: it was sealed for another row or owner, or with "
                                  "another key") from None
        if value.startswith(LEGACY_PREFIX):  # stored by an older Parley; read, never written
            if self._fernet is None:
                raise SecretError("is sealed and no key is configured ([push] encryption_key_env)")
            token = value[len(LEGACY_PREFIX):].encode()
            try:
                opened = self._fernet.decrypt(token).decode()
                sealed_at = self._fernet.extract_timestamp(token)
            except InvalidToken:
                raise SecretError("cannot be opened with the configured key") from None
            if sealed_at < not_before:
                raise SecretError("does not open here: it was sealed before its row was stored (copied from "
                                  "another row)")
            return opened
        return value  # stored as given by an older Parley with no key

    def seal_key(self, kid: str, private_pem: str, purpose: str = "push") -> str:
        """A signing private key as stored: sealed, bound to its kid and its purpose ("push" or "card")."""
        return self.seal_text(private_pem, signing_key_context(kid, purpose))

    def open_key(self, kid: str, stored: str, purpose: str = "push") -> str:
        """A stored signing private key readable again (SecretError when it is not this kid's, for this purpose)."""
        return self.open_text(stored, signing_key_context(kid, purpose))

    def seal_card_key(self, kid: str, private_pem: str) -> str:
        """An agent-card signing key as stored (:meth:`seal_key` for cards)."""
        return self.seal_key(kid, private_pem, "card")

    def open_card_key(self, kid: str, stored: str) -> str:
        """A stored agent-card signing key readable again."""
        return self.open_key(kid, stored, "card")

    @staticmethod
    def _map(config: m.TaskPushNotificationConfig, fn) -> m.TaskPushNotificationConfig:
        out = msgspec.structs.replace(config)
        if out.token:
            out.token = fn(out.token, "token")
        if out.authentication is not None and out.authentication.credentials:
            out.authentication = msgspec.structs.replace(
                out.authentication, credentials=fn(out.authentication.credentials, "authentication.credentials"))
        return out


def redact(config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
    """The config as get and list answer it: without its token and credentials (write-only)."""
    out = msgspec.structs.replace(config, token=None)
    if out.authentication is not None:
        out.authentication = msgspec.structs.replace(out.authentication, credentials=None)
    return out


__all__ = ["LEGACY_PREFIX", "PLAIN_PREFIX", "PREFIX", "Binding", "SecretBox", "SecretError", "check_header_values",
           "header_problems", "redact", "signing_key_context"]
