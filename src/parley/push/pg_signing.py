"""Push signing keys in PostgreSQL, shared by every replica of a server (needs parley-a2a[postgres]: asyncpg).

:class:`PostgresSigningKeys` is :class:`~parley.push.signing.SqliteSigningKeys` on the server's shared
:class:`~parley.postgres.Postgres` pool (table `push_signing_keys`, the same columns, private keys
sealed). Every replica signs with the same key and publishes the same JWKS:

* At most one key is active: a partial unique index over the rows with no `retired_at` refuses a second.
* Making the first key and rotating take a transaction-scoped advisory lock, then look again: of two
  replicas that find no active key at the same moment, the first makes one and the second finds it
  and uses it. Two rotations at once run one after the other (the second retires the first's key).
"""

from __future__ import annotations

import time
from typing import Any

from parley.postgres import Postgres, PostgresTables
from parley.push.signing import KeySealer, SigningKey, SigningKeys, new_key


def key_table_steps(table: str) -> list[str]:
    """The migration of a signing-key table: the push keys' and the card keys' have the same shape."""
    return [
        f"""
    CREATE TABLE {table} (
        kid TEXT PRIMARY KEY,
        private_pem TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        retired_at DOUBLE PRECISION
    );
    CREATE UNIQUE INDEX {table}_one_active ON {table} ((true)) WHERE retired_at IS NULL;
    """,
    ]


COMPONENT = "signing_keys"
STEPS = key_table_steps("push_signing_keys")
KEYS_LOCK = 0x70617273  # pg_advisory_xact_lock key of making and rotating signing keys ("pars")


class PostgresSigningKeys(PostgresTables, SigningKeys):
    """Signing keys in PostgreSQL (table `push_signing_keys`), private keys sealed with `seal`.

    Args:
        postgres: the server's pool holder.
        seal, open_: protect the private keys at rest (the push secret box's seal_key / open_key).

    Call :meth:`open` (creates or upgrades the table) before use and :meth:`close` after.
    """

    def __init__(self, postgres: Postgres, seal: KeySealer | None = None, open_: KeySealer | None = None) -> None:
        SigningKeys.__init__(self, seal, open_)
        self.attach(postgres)

    component, steps = COMPONENT, STEPS
    table = "push_signing_keys"  # a subclass with its own table sets component, steps and table

    @property
    def _select(self) -> str:
        return f"SELECT kid, private_pem, created_at, retired_at FROM {self.table}"

    async def active(self, now: float | None = None) -> SigningKey:
        """The key that signs now; the first replica to need one makes it, under the keys' lock."""
        row = await self.pool.fetchrow(f"{self._select} WHERE retired_at IS NULL")
        if row is not None:
            return self._key(row)
        now = time.time() if now is None else now
        async with self._lock, self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", KEYS_LOCK)
            row = await conn.fetchrow(f"{self._select} WHERE retired_at IS NULL")
            if row is not None:  # another replica (or task) made it meanwhile
                return self._key(row)
            key = new_key(now)
            await self._insert(conn, key)
            return key

    async def rotate(self, now: float | None = None) -> SigningKey:
        """Retire the signing key and make a new one, in one transaction under the keys' lock."""
        now = time.time() if now is None else now
        async with self._lock, self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", KEYS_LOCK)
            await conn.execute(f"UPDATE {self.table} SET retired_at=$1 WHERE retired_at IS NULL", now)
            key = new_key(now)
            await self._insert(conn, key)
            return key

    async def _all(self) -> list[SigningKey]:
        return [self._key(row) for row in await self.pool.fetch(self._select)]

    async def _put(self, key: SigningKey) -> None:
        await self.pool.execute(
            f"INSERT INTO {self.table} (kid, private_pem, created_at, retired_at) VALUES ($1,$2,$3,$4) "
            "ON CONFLICT (kid) DO UPDATE SET private_pem=EXCLUDED.private_pem, created_at=EXCLUDED.created_at, "
            "retired_at=EXCLUDED.retired_at",
            key.kid, self._seal(key.kid, key.private_pem), key.created_at, key.retired_at)

    async def _insert(self, conn: Any, key: SigningKey) -> None:
        await conn.execute(f"INSERT INTO {self.table} (kid, private_pem, created_at, retired_at) "
                           "VALUES ($1,$2,$3,$4)", key.kid, self._seal(key.kid, key.private_pem), key.created_at, key.retired_at)

    def _key(self, row: Any) -> SigningKey:
        return SigningKey(row["kid"], self._open(row["kid"], row["private_pem"]), row["created_at"], row["retired_at"])


__all__ = ["COMPONENT", "KEYS_LOCK", "STEPS", "PostgresSigningKeys"]


CARD_COMPONENT = "card_signing_keys"
CARD_STEPS = key_table_steps("card_signing_keys")


class PostgresCardKeys(PostgresSigningKeys):
    """The agent-card signing keys (parley.server.card_signing) in PostgreSQL: every replica signs with one key."""

    component, steps, table = CARD_COMPONENT, CARD_STEPS, "card_signing_keys"


__all__ += ["CARD_COMPONENT", "CARD_STEPS", "PostgresCardKeys"]
