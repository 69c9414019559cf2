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
from parley.settings import MEMORY, PushSettings, Settings
from parley.tasks.log import Entry
from parley.tasks.store import TaskRecord, TaskStore


class Push:
    """Push notifications of one server.

    Args:
        settings: `settings.push` and the database the signing keys live beside.
        store: the task store whose outbox is delivered.
        issuer: the server's public base URL (signatures' `iss`).
        env: where `encryption_key_env` and `webhook_secret_env` are read (default: os.environ).
        keys: makes the signing keys, sealed with the box (default: beside `settings.db`).

    Raises:
        ValueError: a variable the settings name is not set, or holds an unusable key.
    """

    def __init__(self, settings: Settings, store: TaskStore, issuer: Callable[[], str],
                 env: Mapping[str, str] | None = None,
                 keys: Callable[[SecretBox], SigningKeys] | None = None) -> None:
        env = os.environ if env is None else env
        push = settings.push
        self.box = secret_box(settings, env)
        webhook_secret = _variable(env, push.webhook_secret_env, "push.webhook_secret_env")
        self.guard = UrlGuard(parse_allow(push.allow))
        self.configs = PushConfigs(push, self.guard, self.box)
        self.keys: SigningKeys = keys(self.box) if keys is not None else signing_keys(settings, self.box)
        self.signer = PushSigner(self.keys, keep_seconds=key_lifetime(push))
        self.dispatcher = PushDispatcher(store, push, guard=self.guard, box=self.box,
                                         signer=self.signer, issuer=issuer,
                                         webhook_secret=webhook_secret)

    def on_commit(self, record: TaskRecord, entries: list[Entry]) -> None:
        """An engine listener: entries that may have queued notifications wake the dispatcher (not those of
        tasks without a webhook: most tasks, whose commits would each cost two outbox reads)."""
        if self.dispatcher.store.may_notify(record.task.id) and any(e.kind in ("status", "artifact") for e in entries):
            self.dispatcher.wake()

    async def open(self) -> None:
        """Connect the signing keys (a shared database creates their tables)."""
        await self.keys.open()

    def start(self) -> None:
        self.dispatcher.start()

    async def stop(self) -> None:
        await self.dispatcher.stop()
        await self.keys.close()


def secret_box(settings: Settings, env: Mapping[str, str] | None = None) -> SecretBox:
    """The box of `push.encryption_key_env` (a box that stores as given when none is named)."""
    push = settings.push
    key = _variable(os.environ if env is None else env, push.encryption_key_env, "push.encryption_key_env")
    try:
        return SecretBox(key)
    except ValueError:
        raise ValueError(f"push.encryption_key_env: {push.encryption_key_env} does not hold a Fernet key "
                         "(32 url-safe base64-encoded bytes)") from None


def signing_keys(settings: Settings, box: SecretBox | None = None) -> SigningKeys:
    """The signing keys beside the server's database (in memory for `--memory`), sealed with `box`."""
    db = settings.db
    if db is None or db == MEMORY:
        return MemorySigningKeys()
    box = box if box is not None else secret_box(settings)
    return SqliteSigningKeys(db, seal=box.seal_key, open_=box.open_key)


def key_lifetime(push: PushSettings) -> float:
    """How long a retired key stays published: as long as a notification signed with it may be retried."""
    return push.max_age_seconds + push.max_backoff_seconds + push.timeout_seconds


def _variable(env: Mapping[str, str], name: str | None, setting: str) -> str | None:
    if not name:
        return None
    value = env.get(name)
    if not value:
        raise ValueError(f"{setting}: the environment variable {name} is not set")
    return value


__all__ = ["Push", "key_lifetime", "secret_box", "signing_keys"]
