"""The secrets of a push config (its `token` and `authentication.credentials`): write-only, and
encrypted at rest when a key is configured.

A client registers a webhook with credentials the server must present to it; nobody needs to read
them back, so get and list answers leave them out (:func:`redact`). With `[push]
encryption_key_env` naming a variable that holds a Fernet key (`python -c "from
cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`), they are stored
encrypted (AES-128-CBC with HMAC-SHA256, from `cryptography`), and decrypted only to deliver.
"""

from __future__ import annotations

import msgspec
from cryptography.fernet import Fernet, InvalidToken

from parley.protocol import models as m

PREFIX = "enc:v1:"


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
        """A copy to store: its secrets encrypted (when a key is configured)."""
        return self._map(config, self.encrypt_text)

    def open(self, config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
        """A stored config with its secrets readable again (SecretError when they cannot be)."""
        return self._map(config, self.decrypt_text)

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


__all__ = ["PREFIX", "SecretBox", "SecretError", "redact"]
