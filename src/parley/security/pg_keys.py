"""API keys in PostgreSQL, shared by every replica of a server (needs parley-a2a[postgres]: asyncpg).

:class:`PostgresKeyStore` is :class:`~parley.security.keys.SqliteKeyStore` on the server's shared
:class:`~parley.postgres.Postgres` pool: the same table (`api_keys`) with the same columns, so a key
made, listed or revoked through one replica is seen by every other at its next request (each check
reads the row; nothing is cached). Like SQLite, a key's `last_used_at` is written at most once a
minute (:data:`~parley.security.keys.TOUCH_EVERY`), and the write is conditional: when several
replicas see the same stale time at once, one row version is written, not one per replica.

Every replica must use the same pepper (`PARLEY_KEY_PEPPER`): the stored digests are HMACs under it.
"""

from __future__ import annotations

import time
from typing import Any

from parley.postgres import Postgres, PostgresTables
from parley.security.keys import ANY_AGENT, TOUCH_EVERY, ApiKey, KeyStore, _Stored

COMPONENT = "api_keys"
STEPS = [
    """
    CREATE TABLE api_keys (
        id TEXT COLLATE "C" PRIMARY KEY,  -- ordered by bytes, as SQLite orders it
        digest TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        principal TEXT NOT NULL,
        name TEXT NOT NULL,
        scopes TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION,
        last_used_at DOUBLE PRECISION,
        revoked_at DOUBLE PRECISION
    );
    CREATE INDEX api_keys_agent_created ON api_keys (agent_id, created_at, id);
    """,
]
_COLUMNS = "id, digest, agent_id, principal, name, scopes, created_at, expires_at, last_used_at, revoked_at"


class PostgresKeyStore(PostgresTables, KeyStore):
    """Keys in PostgreSQL (table `api_keys`), through the server's shared pool.

    Args:
        postgres: the server's pool holder.
        pepper: the key of the stored HMACs; the same on every replica.

    Call :meth:`open` (creates or upgrades the table) before use and :meth:`close` after.
    """

    def __init__(self, postgres: Postgres, pepper: bytes) -> None:
        if not isinstance(pepper, bytes) or not pepper:
            raise ValueError("the API key pepper must be non-empty bytes (the same on every replica)")
        KeyStore.__init__(self, pepper)
        self.attach(postgres)

    component, steps = COMPONENT, STEPS

    @staticmethod
    def _key(row: Any) -> tuple[ApiKey, str]:
        key = ApiKey(id=row["id"], agent_id=row["agent_id"], principal=row["principal"], name=row["name"],
                     scopes=frozenset(s for s in row["scopes"].split(" ") if s), created_at=row["created_at"],
                     expires_at=row["expires_at"], last_used_at=row["last_used_at"], revoked_at=row["revoked_at"])
        return key, row["digest"]

    async def _insert(self, key: ApiKey, digest: str) -> None:
        await self.pool.execute(
            f"INSERT INTO api_keys ({_COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
            key.id, digest, key.agent_id, key.principal, key.name, " ".join(sorted(key.scopes)), key.created_at,
            key.expires_at, key.last_used_at, key.revoked_at)

    async def _get(self, key_id: str) -> _Stored | None:
        row = await self.pool.fetchrow(f"SELECT {_COLUMNS} FROM api_keys WHERE id=$1", key_id)
        if row is None:
            return None
        key, dig = self._key(row)
        return _Stored(key, dig, touched=key.last_used_at or 0.0)

    async def _touch(self, key_id: str, at: float) -> None:
        # KeyStore.check calls this when the stored time is TOUCH_EVERY old; another replica may have written
        # a newer one meanwhile (then nothing is written, and the time never goes back).
        await self.pool.execute("UPDATE api_keys SET last_used_at=$1 WHERE id=$2 "
                                "AND (last_used_at IS NULL OR last_used_at <= $1 - $3::double precision)",
                                at, key_id, TOUCH_EVERY)

    async def list(self, agent_id: str | None = None) -> list[ApiKey]:
        if agent_id is None:
            rows = await self.pool.fetch(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id")
        else:
            rows = await self.pool.fetch(f"SELECT {_COLUMNS} FROM api_keys WHERE agent_id IN ($1, $2) "
                                         "ORDER BY created_at, id", agent_id, ANY_AGENT)
        return [self._key(r)[0] for r in rows]

    async def revoke(self, key_id: str, now: float | None = None) -> ApiKey | None:
        now = time.time() if now is None else now
        row = await self.pool.fetchrow(f"UPDATE api_keys SET revoked_at=COALESCE(revoked_at, $1) WHERE id=$2 "
                                       f"RETURNING {_COLUMNS}", now, key_id)
        self.revocations += 1
        return self._key(row)[0] if row is not None else None

    async def _delete(self, key_ids: list[str]) -> None:
        await self.pool.execute("DELETE FROM api_keys WHERE id = ANY($1::text[])", key_ids)

    async def has_keys(self) -> bool:
        return bool(await self.pool.fetchval("SELECT EXISTS (SELECT 1 FROM api_keys)"))


__all__ = ["COMPONENT", "STEPS", "PostgresKeyStore"]
