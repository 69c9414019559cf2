"""The push-notification parts of one server, built from its settings: the URL guard, the secret box,
the config rules, the signing keys and the dispatcher that drains the outbox."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from parley.push.configs import PushConfigs
from parley.push.dispatcher import PushDispatcher
from parley.push.secrets import SecretBox
from parley.push.signing import MemorySigningKeys, PushSigner, SigningKeys, SqliteSigningKeys
from parley.push.ssrf import UrlGuard, parse_allow
from parley.settings import MEMORY, Settings
from parley.tasks.log import Entry
from parley.tasks.store import TaskRecord, TaskStore


class Push:
    """Push notifications of one server.

    Args:
        settings: `settings.push` and the database the signing keys live beside.
        store: the task store whose outbox is delivered.
        issuer: the server's public base URL (signatures' `iss`).
        env: where `encryption_key_env` and `webhook_secret_env` are read (default: os.environ).

    Raises:
        ValueError: a variable the settings name is not set, or holds an unusable key.
    """

    def __init__(self, settings: Settings, store: TaskStore, issuer: Callable[[], str],
                 env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        push = settings.push
        key = _variable(env, push.encryption_key_env, "push.encryption_key_env")
        try:
            self.box = SecretBox(key)
        except ValueError:
            raise ValueError(f"push.encryption_key_env: {push.encryption_key_env} does not hold a Fernet key "
                             "(32 url-safe base64-encoded bytes)") from None
        webhook_secret = _variable(env, push.webhook_secret_env, "push.webhook_secret_env")
        self.guard = UrlGuard(parse_allow(push.allow))
        self.configs = PushConfigs(push, self.guard, self.box)
        db = settings.db
        self.keys: SigningKeys = (MemorySigningKeys() if db is None or db == MEMORY
                                  else SqliteSigningKeys(db, seal=self._seal, open_=self._open))
        # A retired key stays published while a notification signed with it may still be retried.
        keep = push.max_age_seconds + push.max_backoff_seconds + push.timeout_seconds
        self.signer = PushSigner(self.keys, keep_seconds=keep)
        self.dispatcher = PushDispatcher(store, push, guard=self.guard, box=self.box,
                                         signer=self.signer, issuer=issuer,
                                         webhook_secret=webhook_secret)

    def _seal(self, text: str) -> str:
        return self.box.encrypt_text(text)

    def _open(self, text: str) -> str:
        return self.box.decrypt_text(text)

    def on_commit(self, record: TaskRecord, entries: list[Entry]) -> None:
        """An engine listener: entries that may have queued notifications wake the dispatcher."""
        if any(e.kind in ("status", "artifact") for e in entries):
            self.dispatcher.wake()

    def start(self) -> None:
        self.dispatcher.start()

    async def stop(self) -> None:
        await self.dispatcher.stop()
        await self.keys.close()


def _variable(env: Mapping[str, str], name: str | None, setting: str) -> str | None:
    if not name:
        return None
    value = env.get(name)
    if not value:
        raise ValueError(f"{setting}: the environment variable {name} is not set")
    return value


__all__ = ["Push"]
