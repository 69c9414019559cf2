"""The secrets of a push config (its `token` and `authentication.credentials`): write-only, and
encrypted at rest when a key is configured.

A client registers a webhook with credentials the server must present to it; nobody needs to read
them back, so get and list answers leave them out (:func:`redact`). With `[push]
encryption_key_env` naming a variable that holds a Fernet key (`python -c "from
cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`), they are stored
encrypted (AES-128-CBC with HMAC-SHA256, from `cryptography`), and decrypted only to deliver.

They are sent as HTTP header values (`X-A2A-Notification-Token`, `Authorization: <scheme>
<credentials>`), so a value that is not one (CR, LF, NUL or another control character, or a
character outside printable ASCII) is refused when the config is registered: -32602 naming the
field, never the value (:func:`check_header_values`). A value stored before that rule existed is
refused again when it would be delivered (:meth:`SecretBox.open` raises SecretError, whose message
names the field only), so the notification is dead-lettered with that reason, not with an HTTP
library's error quoting the secret.
"""

from __future__ import annotations

import re

import msgspec
from cryptography.fernet import Fernet, InvalidToken

from parley.protocol import models as m
from parley.protocol.errors import InvalidParamsError

PREFIX = "enc:v1:"
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
    """A stored secret cannot be decrypted (the key changed or is missing)."""


class SecretBox:
    """Seals and opens the secrets of push configs with one Fernet key (None: stored as given)."""

    def __init__(self, key: str | bytes | None = None) -> None:
        self._fernet = Fernet(key) if key else None

    @property
    def encrypts(self) -> bool:
        return self._fernet is not None

    def seal(self, config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
        """A copy to store: its secrets checked (InvalidParamsError naming a field that cannot be a header value)
        and encrypted (when a key is configured)."""
        check_header_values(config)
        return self._map(config, self.encrypt_text)

    def open(self, config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
        """A stored config with its secrets readable again (SecretError when they cannot be, or when they are no
        header values: stored before registration refused those; the message names the field, not the value)."""
        opened = self._map(config, self.decrypt_text)
        bad = header_problems(opened)
        if bad:
            raise SecretError(f"the push config's `{bad[0]}` cannot be sent as an HTTP header value (it has control "
                              "or non-ASCII characters); register the config again with a valid one")
        return opened

    def encrypt_text(self, value: str) -> str:
        if self._fernet is None or value.startswith(PREFIX):
            return value
        return PREFIX + self._fernet.encrypt(value.encode()).decode()

    def decrypt_text(self, value: str) -> str:
        if not value.startswith(PREFIX):
            return value
        if self._fernet is None:
            raise SecretError("a push config's secrets are encrypted and no key is configured "
                              "([push] encryption_key_env)")
        try:
            return self._fernet.decrypt(value[len(PREFIX):].encode()).decode()
        except InvalidToken:
            raise SecretError("a push config's secrets cannot be decrypted with the configured key") from None

    @staticmethod
    def _map(config: m.TaskPushNotificationConfig, fn) -> m.TaskPushNotificationConfig:
        out = msgspec.structs.replace(config)
        if out.token:
            out.token = fn(out.token)
        if out.authentication is not None and out.authentication.credentials:
            out.authentication = msgspec.structs.replace(out.authentication,
                                                         credentials=fn(out.authentication.credentials))
        return out


def redact(config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
    """The config as get and list answer it: without its token and credentials (write-only)."""
    out = msgspec.structs.replace(config, token=None)
    if out.authentication is not None:
        out.authentication = msgspec.structs.replace(out.authentication, credentials=None)
    return out


__all__ = ["PREFIX", "SecretBox", "SecretError", "check_header_values", "header_problems", "redact"]
