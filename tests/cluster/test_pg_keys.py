"""API keys in PostgreSQL (parley.security.pg_keys) against the real PostgreSQL of this machine.

Two `PostgresKeyStore`s, each on its own `Postgres` pool, over one database stand for two replicas: a
key made through one is checked, listed and revoked through the other. The behaviour of
`SqliteKeyStore` (two connections to one file play the replicas there) is the contract: the same tests
run over both. Then what is PostgreSQL's own: the migrations, a newer schema refused, the pool shares,
and last-used times that are not a write per request.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from parley.postgres import Postgres, PostgresError
from parley.security.keys import ADMIN, ANY_AGENT, TOUCH_EVERY, KeyProblem, KeyStore, SqliteKeyStore, parse
from parley.security.pg_keys import COMPONENT, STEPS, PostgresKeyStore
from support import free_port, needs

PEPPER = b"the-pepper-every-replica-shares"
T0 = 1_700_000_000.0
POSTGRES = needs("asyncpg", "postgres")

Make = Callable[[], Awaitable[KeyStore]]


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[Callable[[], Postgres]]:
    """Factory of Postgres pool holders on the test's schema (one per "replica"); closed afterwards."""
    made: list[Postgres] = []

    def factory() -> Postgres:
        postgres = Postgres(postgres_url, min_size=1, max_size=3)
        made.append(postgres)
        return postgres

    yield factory
    for postgres in made:
        if postgres._pool is not None:
            await postgres._pool.close()


@pytest.fixture
async def conn(postgres_url: str) -> AsyncIterator[Any]:
    """A plain asyncpg connection to the test's schema (to read the rows as stored)."""
    import asyncpg

    connection = await asyncpg.connect(postgres_url)
    yield connection
    await connection.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=POSTGRES)])
async def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Make]:
    """Factory of key stores sharing one database: each call is another replica."""
    made: list[KeyStore] = []
    if request.param == "sqlite":
        async def make() -> KeyStore:
            store = SqliteKeyStore(tmp_path / "parley.db", pepper=PEPPER)
            made.append(store)
            return store
    else:
        url = request.getfixturevalue("postgres_url")

        async def make() -> KeyStore:
            store = PostgresKeyStore(Postgres(url, min_size=1, max_size=3), PEPPER)
            made.append(store)
            await store.open()
            return store

    yield make
    for store in made:
        await store.close()


# --- the behaviour of SqliteKeyStore, over both ----------------------------------------------------------------


async def test_a_key_made_on_one_replica_is_checked_on_another(replicas: Make):
    one, two = await replicas(), await replicas()
    key, token = await one.create("echo", name="ci", principal="team-a", now=T0)
    seen = await two.check(token, now=T0 + 1)
    assert seen is not None
    assert (seen.id, seen.agent_id, seen.principal, seen.name, seen.scopes, seen.created_at, seen.expires_at,
            seen.revoked_at) == (key.id, "echo", "team-a", "ci", frozenset({"a2a"}), T0, None, None)
    assert seen.opens("echo") and not seen.opens("other")
    key_id, secret = parse(token) or ("", "")
    assert key_id == key.id
    assert await two.check(f"pk_{key.id}_{secret}x", now=T0 + 1) is None  # wrong secret
    assert await two.check(f"pk_{'0' * 16}_{secret}", now=T0 + 1) is None  # unknown id
    for malformed in ("", "pk_", f"pk_{key.id}", f"pk_{key.id}_", f"xx_{key.id}_{secret}", secret):
        assert await two.check(malformed, now=T0 + 1) is None, malformed


async def test_a_key_revoked_on_one_replica_is_refused_by_another(replicas: Make):
    one, two = await replicas(), await replicas()
    key, token = await one.create("echo", now=T0)
    assert await two.check(token, now=T0 + 1) is not None
    revoked = await one.revoke(key.id, now=T0 + 2)
    assert revoked is not None and revoked.id == key.id and revoked.revoked_at == T0 + 2
    assert await two.check(token, now=T0 + 3) is None
    again = await two.revoke(key.id, now=T0 + 9)  # revoking again keeps the first time
    assert again is not None and again.revoked_at == T0 + 2
    assert await two.revoke("no-such-key", now=T0) is None
    assert [k.revoked_at for k in await two.list()] == [T0 + 2]
    assert await two.has_keys()  # revoking the last key never opens the server


async def test_a_key_expires_at_its_expiry_on_every_replica(replicas: Make):
    one, two = await replicas(), await replicas()
    key, token = await one.create("echo", expires_at=T0 + 100, now=T0)
    assert key.expires_at == T0 + 100
    assert await two.check(token, now=T0 + 99.5) is not None
    assert await two.check(token, now=T0 + 100) is None
    assert await one.check(token, now=T0 + 1000) is None
    with pytest.raises(KeyProblem, match="^the expiry must be in the future$"):
        await one.create("echo", expires_at=T0, now=T0)
    with pytest.raises(KeyProblem, match="^the expiry must be in the future$"):
        await one.create("echo", expires_at=T0 - 1, now=T0)
    assert len(await two.list()) == 1  # the refused ones were not stored


async def test_scopes_principals_and_admin_keys_read_back_the_same(replicas: Make):
    one, two = await replicas(), await replicas()
    admin, admin_token = await one.create("echo", scopes=frozenset({ADMIN, "a2a"}), now=T0)
    _, plain_token = await one.create("echo", scopes=frozenset({"read", "a2a", "write"}), now=T0 + 1)
    default, _ = await one.create("echo", now=T0 + 2)
    assert admin.agent_id == ANY_AGENT and admin.principal == f"key:{admin.id}"
    seen_admin = await two.check(admin_token, now=T0 + 5)
    seen_plain = await two.check(plain_token, now=T0 + 5)
    assert seen_admin is not None and seen_admin.scopes == frozenset({ADMIN, "a2a"})
    assert seen_admin.agent_id == ANY_AGENT and seen_admin.opens("anything")
    assert seen_plain is not None and seen_plain.scopes == frozenset({"read", "a2a", "write"})
    assert {k.id: k.scopes for k in await two.list()}[default.id] == frozenset({"a2a"})
    assert (await two.list())[2].principal == f"key:{default.id}"


async def test_list_is_oldest_first_and_per_agent_includes_the_keys_of_every_agent(replicas: Make):
    one, two = await replicas(), await replicas()
    later, _ = await one.create("echo", name="later", now=T0 + 10)
    admin, _ = await two.create("echo", name="admin", scopes=frozenset({ADMIN}), now=T0 + 5)
    other, _ = await one.create("other", name="other", now=T0 + 1)
    same_time = [await two.create("echo", name=f"same{i}", now=T0 + 20) for i in range(3)]
    by_id = sorted(k.id for k, _ in same_time)
    for store in (one, two):
        assert [k.id for k in await store.list()] == [other.id, admin.id, later.id, *by_id]
        assert [k.id for k in await store.list("echo")] == [admin.id, later.id, *by_id]
        assert [k.id for k in await store.list("other")] == [other.id, admin.id]
        assert [k.id for k in await store.list("nobody")] == [admin.id]


async def test_has_keys_is_false_only_before_the_first_key(replicas: Make):
    one, two = await replicas(), await replicas()
    assert not await one.has_keys() and not await two.has_keys()
    await one.create("echo", now=T0)
    assert await two.has_keys()


async def test_purge_forgets_revoked_and_expired_keys_only(replicas: Make):
    """`parley keys purge` on PostgreSQL: revoked and expired keys go, an active one stays, on every replica;
    once none is left the store has no keys (the way back to development mode, issue 26)."""
    one, two = await replicas(), await replicas()
    active, _ = await one.create("echo", now=T0)
    revoked, _ = await one.create("echo", now=T0)
    expired, _ = await one.create("echo", now=T0, expires_at=T0 + 10)
    await two.revoke(revoked.id, now=T0 + 1)
    gone = await two.purge(now=T0 + 20)
    assert sorted(k.id for k in gone) == sorted([revoked.id, expired.id])
    assert [k.id for k in await one.list()] == [active.id]
    assert await one.has_keys()
    await one.revoke(active.id, now=T0 + 21)
    assert [k.id for k in await one.purge(now=T0 + 22)] == [active.id]
    assert not await two.has_keys()


async def test_the_last_use_is_written_at_most_once_a_minute_and_seen_everywhere(replicas: Make):
    one, two = await replicas(), await replicas()
    _, token = await one.create("echo", now=T0)
    assert (await one.list())[0].last_used_at is None
    assert await two.check(token, now=T0 + 1) is not None
    assert (await one.list())[0].last_used_at == T0 + 1
    assert await one.check(token, now=T0 + 1 + TOUCH_EVERY - 0.5) is not None
    assert (await two.list())[0].last_used_at == T0 + 1  # within a minute of the last write: not written
    assert await one.check(token, now=T0 + 1 + TOUCH_EVERY) is not None
    assert (await two.list())[0].last_used_at == T0 + 1 + TOUCH_EVERY


async def test_the_store_never_holds_the_secret(replicas: Make, request: pytest.FixtureRequest, tmp_path: Path):
    store = await replicas()
    _, token = await store.create("echo", name="ci", now=T0)
    _, secret = parse(token) or ("", "")
    if isinstance(store, PostgresKeyStore):
        import asyncpg

        connection = await asyncpg.connect(request.getfixturevalue("postgres_url"))
        try:
            rows = [dict(r) for r in await connection.fetch("SELECT * FROM api_keys")]
        finally:
            await connection.close()
    else:
        import sqlite3

        db = sqlite3.connect(tmp_path / "parley.db")
        db.row_factory = sqlite3.Row
        rows = [dict(r) for r in db.execute("SELECT * FROM api_keys")]
        db.close()
    assert len(rows) == 1
    row = rows[0]
    assert set(row) == {"id", "digest", "agent_id", "principal", "name", "scopes", "created_at", "expires_at",
                        "last_used_at", "revoked_at"}
    assert row["digest"] == hmac.new(PEPPER, secret.encode(), hashlib.sha256).hexdigest()
    assert all(secret not in str(value) for value in row.values())


# --- PostgreSQL's own -----------------------------------------------------------------------------------------


@POSTGRES
async def test_checks_within_a_minute_write_nothing_and_a_stale_touch_is_a_no_op(pg: Callable[[], Postgres],
                                                                                  conn: Any):
    """Under load a key is checked on every request: the row is written once a minute at most (its xmin,
    the transaction that wrote it, stays the same), and a replica that saw an older time writes nothing
    once another has written a newer one (nor moves the time back)."""
    one, two = PostgresKeyStore(pg(), PEPPER), PostgresKeyStore(pg(), PEPPER)
    await one.open()
    await two.open()
    try:
        key, token = await one.create("echo", now=T0)
        assert await one.check(token, now=T0) is not None  # the first use is written
        written = await conn.fetchval("SELECT xmin::text FROM api_keys WHERE id=$1", key.id)
        for i in range(20):
            assert await (one, two)[i % 2].check(token, now=T0 + i) is not None
        assert await conn.fetchval("SELECT xmin::text FROM api_keys WHERE id=$1", key.id) == written
        assert await one.check(token, now=T0 + TOUCH_EVERY) is not None
        touched = await conn.fetchrow("SELECT xmin::text AS x, last_used_at FROM api_keys WHERE id=$1", key.id)
        assert touched["x"] != written and touched["last_used_at"] == T0 + TOUCH_EVERY
        # what check() does on a replica that read the row before `one` wrote it: nothing is written
        await two._touch(key.id, T0 + TOUCH_EVERY + 1)
        await two._touch(key.id, T0 + 1)
        after = await conn.fetchrow("SELECT xmin::text AS x, last_used_at FROM api_keys WHERE id=$1", key.id)
        assert (after["x"], after["last_used_at"]) == (touched["x"], T0 + TOUCH_EVERY)
    finally:
        await one.close()
        await two.close()


@POSTGRES
async def test_a_second_migration_is_a_no_op_and_keeps_the_keys(pg: Callable[[], Postgres], conn: Any):
    postgres = pg()
    store = PostgresKeyStore(postgres, PEPPER)
    await store.open()
    try:
        key, token = await store.create("echo", now=T0)
        assert await postgres.migrate(COMPONENT, STEPS) == len(STEPS)  # found at the latest version
        assert await postgres.schema_versions() == {COMPONENT: len(STEPS)}
        again = PostgresKeyStore(pg(), PEPPER)
        await again.open()  # another replica starting on the migrated database
        try:
            assert [k.id for k in await again.list()] == [key.id]
            assert await again.check(token, now=T0 + 1) is not None
        finally:
            await again.close()
        assert await conn.fetchval("SELECT count(*) FROM parley_schema") == 1
    finally:
        await store.close()


@POSTGRES
async def test_two_replicas_starting_at_once_migrate_once(pg: Callable[[], Postgres], conn: Any):
    import asyncio

    stores = [PostgresKeyStore(pg(), PEPPER) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        assert await conn.fetchval("SELECT version FROM parley_schema WHERE component=$1", COMPONENT) == len(STEPS)
        _, token = await stores[0].create("echo", now=T0)
        assert all([await s.check(token, now=T0 + 1) is not None for s in stores])
    finally:
        for s in stores:
            await s.close()


@POSTGRES
async def test_a_database_of_a_newer_parley_is_refused(pg: Callable[[], Postgres], conn: Any):
    first = PostgresKeyStore(pg(), PEPPER)
    await first.open()
    await first.close()
    await conn.execute("UPDATE parley_schema SET version=99 WHERE component=$1", COMPONENT)
    postgres = pg()
    store = PostgresKeyStore(postgres, PEPPER)
    with pytest.raises(PostgresError, match=rf"^the api_keys tables in .* have schema 99, written by a newer Parley "
                                            rf"\(this one knows schema {len(STEPS)}\)$"):
        await store.open()
    assert postgres.users == 0 and postgres._pool is None  # the share it took is given back
    with pytest.raises(RuntimeError, match=r"^the PostgreSQL api_keys tables are not open: await open\(\) first$"):
        await store.has_keys()


@POSTGRES
async def test_open_and_close_take_and_give_back_one_share_of_the_pool(pg: Callable[[], Postgres]):
    postgres = pg()
    store = PostgresKeyStore(postgres, PEPPER)
    with pytest.raises(RuntimeError, match=r"^the PostgreSQL api_keys tables are not open: await open\(\) first$"):
        await store.list()
    await store.open()
    await store.open()  # already open: no second share
    assert postgres.users == 1
    other = await postgres.acquire_user()  # another component on the same pool
    await store.close()
    await store.close()
    assert postgres.users == 1 and postgres._pool is other  # the other component keeps the pool
    await postgres.release_user()
    assert postgres.users == 0 and postgres._pool is None


@POSTGRES
async def test_an_unreachable_database_is_one_line():
    postgres = Postgres(f"postgresql://parley:s3cret@127.0.0.1:{free_port()}/nothing")
    store = PostgresKeyStore(postgres, PEPPER)
    with pytest.raises(PostgresError, match=r"^cannot connect to PostgreSQL at postgresql://parley:\*\*\*@127\.0\.0\.1"):
        await store.open()
    assert postgres.users == 0


@pytest.mark.parametrize("pepper", [b"", "a-str-pepper", None])
def test_a_missing_or_non_bytes_pepper_is_refused(pepper: Any):
    with pytest.raises(ValueError, match=r"^the API key pepper must be non-empty bytes \(the same on every replica\)$"):
        PostgresKeyStore(Postgres("postgresql://127.0.0.1/test"), pepper)
