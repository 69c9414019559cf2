"""Where one server keeps its state, as its settings name it: the task store, the event bus, the API keys,
the push signing keys and the rate-limit counters, made once and sharing one PostgreSQL pool.

=====================  ==================================  =========================================
`db` / `bus`            store, keys, signing keys            bus, rate-limit counters
=====================  ==================================  =========================================
memory                  this process's memory                in process
a file (default)        SQLite file (one process)            in process
postgresql://...        PostgreSQL (replicas share it)       PostgreSQL LISTEN/NOTIFY; counters per process
+ bus = redis://...     PostgreSQL                           Redis Streams and Pub/Sub; counters in Redis
=====================  ==================================  =========================================
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from parley.postgres import Postgres, PostgresError, is_postgres_url
from parley.security.keys import PEPPER_ENV
from parley.settings import MEMORY, Settings, is_redis_url
from parley.tasks.bus import EventBus, LocalBus
from parley.tasks.open import open_store
from parley.tasks.store import StoreError, TaskStore

if TYPE_CHECKING:
    from parley.push.secrets import SecretBox
    from parley.push.signing import SigningKeys
    from parley.security.keys import KeyStore
    from parley.security.ratelimit import RateCounters

class Backends:
    """The state components `settings` name (the runtime opens them at start; PostgreSQL migrations run then).

    Args:
        settings: `db` (memory, a SQLite file, or postgresql://...), `bus` (None, "postgres" or redis://...)
            and `namespace` (the prefix of the bus's Redis keys and PostgreSQL channels).
        env: where PARLEY_KEY_PEPPER is read (default: os.environ).
    """

    def __init__(self, settings: Settings, env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.env = os.environ if env is None else env
        self.postgres = Postgres(settings.db) if is_postgres_url(settings.db) else None
        self.bus_kind = bus_kind(settings)

    def store(self) -> TaskStore:
        """The task store of `settings.db`."""
        if self.postgres is not None:
            from parley.tasks.postgres_store import PostgresTaskStore

            # A notification handed to a dispatcher stays its own for two delivery attempts' time: a replica that
            # dies mid-delivery has its notifications sent by another that soon after.
            return PostgresTaskStore(self.postgres, claim_seconds=max(2 * self.settings.push.timeout_seconds, 5.0))
        return open_store(self.settings.db, group_commit_seconds=self.settings.group_commit_seconds)

    def bus(self) -> EventBus:
        """The event bus: in process, or shared by the replicas (Redis, PostgreSQL)."""
        if self.bus_kind == "redis":
            from parley.tasks.redis_bus import RedisBus

            assert self.settings.bus is not None
            return RedisBus(self.settings.bus, namespace=self.settings.namespace)
        if self.bus_kind == "postgres":
            from parley.tasks.pg_bus import PostgresBus

            assert self.postgres is not None
            return PostgresBus(self.postgres, namespace=self.settings.namespace)
        return LocalBus()

    @staticmethod
    def link(store: TaskStore, bus: EventBus) -> None:
        """A PostgreSQL store and a PostgreSQL bus on the same server: the store sends each commit's bus
        notification inside the commit's own statement (one transaction instead of two; issue 25)."""
        from parley.tasks.pg_bus import PostgresBus
        from parley.tasks.postgres_store import PostgresTaskStore

        if isinstance(store, PostgresTaskStore) and isinstance(bus, PostgresBus) and store.postgres is bus.postgres:
            store.notice = bus.notice
            bus.published_in_commit = True

    def keys(self) -> KeyStore:
        """The API key store beside the tasks."""
        from parley.security.keys import open_keys

        if self.postgres is not None:
            from parley.security.pg_keys import PostgresKeyStore

            return PostgresKeyStore(self.postgres, self.pepper())
        return open_keys(self.settings.db)

    def signing_keys(self, box: SecretBox) -> SigningKeys:
        """The push signing keys beside the tasks, sealed with `box`."""
        if self.postgres is not None:
            from parley.push.pg_signing import PostgresSigningKeys

            return PostgresSigningKeys(self.postgres, seal=box.seal_key, open_=box.open_key)
        from parley.push.setup import signing_keys

        return signing_keys(self.settings, box)

    def card_keys(self) -> SigningKeys:
        """The agent-card signing keys beside the tasks (table `card_signing_keys`), sealed like the push keys."""
        from parley.push.setup import secret_box
        from parley.push.signing import MemorySigningKeys, SqliteSigningKeys
        from parley.server.card_signing import TABLE

        box = secret_box(self.settings)
        if self.postgres is not None:
            from parley.push.pg_signing import PostgresCardKeys

            return PostgresCardKeys(self.postgres, seal=box.seal_card_key, open_=box.open_card_key)
        db = self.settings.db
        if db is None or db == MEMORY:
            return MemorySigningKeys()
        return SqliteSigningKeys(db, seal=box.seal_card_key, open_=box.open_card_key, table=TABLE)

    def counters(self) -> RateCounters | None:
        """Shared rate-limit counters (Redis), or None: each process counts for itself."""
        if self.bus_kind != "redis":
            return None
        from parley.security.redis_counters import RedisCounters

        assert self.settings.bus is not None
        return RedisCounters(self.settings.bus, namespace=self.settings.namespace)

    def pepper(self) -> bytes:
        """The API keys' pepper for a shared database: every replica must have the same, from the environment."""
        value = self.env.get(PEPPER_ENV)
        if not value:
            raise StoreError(f"a PostgreSQL database needs the API keys' pepper in {PEPPER_ENV} (the same on every "
                             "replica; for example the output of: python -c 'import secrets; "
                             "print(secrets.token_urlsafe(32))')")
        return value.encode()

    @property
    def shared(self) -> bool:
        """Whether other processes may share this state (replicas)."""
        return self.postgres is not None


def bus_kind(settings: Settings) -> str:
    """"redis", "postgres" or "local": the bus `settings.bus` names (a PostgreSQL db defaults to postgres)."""
    if is_redis_url(settings.bus):
        return "redis"
    if settings.bus == "postgres" or (settings.bus is None and is_postgres_url(settings.db)):
        return "postgres"
    return "local"


__all__ = ["Backends", "PostgresError", "bus_kind"]
