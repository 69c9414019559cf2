"""Push signing keys in PostgreSQL (parley.push.pg_signing) against the real PostgreSQL of this machine.

Several `PostgresSigningKeys`, each on its own `Postgres` pool, over one database stand for replicas.
Replicas that all need a first key at the same moment end up signing with ONE key (one row), a
rotation on one is what every other signs with next, the JWKS they publish is the same, and the private
keys are sealed at rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import jwt
import pytest
from cryptography.fernet import Fernet

from parley.postgres import Postgres, PostgresError
from parley.push.pg_signing import COMPONENT, STEPS, PostgresSigningKeys
from parley.push.secrets import PREFIX, SecretBox, SecretError
from parley.push.signing import PushSigner
from support import require

require("asyncpg", "postgres")

T0 = 1_700_000_000.0
KEEP = 3600.0  # how long a retired key stays published, in these tests

Make = Callable[..., Awaitable[PostgresSigningKeys]]


@pytest.fixture
async def conn(postgres_url: str) -> AsyncIterator[Any]:
    """A plain asyncpg connection to the test's schema (to read the rows as stored)."""
    import asyncpg

    connection = await asyncpg.connect(postgres_url)
    yield connection
    await connection.close()


@pytest.fixture
async def replicas(postgres_url: str) -> AsyncIterator[Make]:
    """Factory of opened PostgresSigningKeys on one database, each on its own pool; closed afterwards."""
    made: list[PostgresSigningKeys] = []

    async def make(box: SecretBox | None = None) -> PostgresSigningKeys:
        keys = PostgresSigningKeys(Postgres(postgres_url, min_size=1, max_size=3),
                                   seal=box.seal_key if box else None, open_=box.open_key if box else None)
        made.append(keys)
        await keys.open()
        return keys

    yield make
    for keys in made:
        await keys.close()


async def test_replicas_racing_for_the_first_key_end_with_one(replicas: Make, conn: Any):
    """Four replicas ask for the active key at once on an empty table, five times over: every time they
    all get the same kid and one row exists."""
    stores = [await replicas() for _ in range(4)]
    for round_ in range(5):
        await conn.execute("DELETE FROM push_signing_keys")
        keys = await asyncio.gather(*(s.active(now=T0 + round_) for s in stores))
        assert len({k.kid for k in keys}) == 1, [k.kid for k in keys]
        assert len({k.private_pem for k in keys}) == 1
        assert await conn.fetchval("SELECT count(*) FROM push_signing_keys") == 1
        assert {k.kid for s in stores for k in await s.published(KEEP, now=T0 + round_)} == {keys[0].kid}


async def test_a_rotation_on_one_replica_is_what_the_others_sign_with(replicas: Make):
    one, two = await replicas(), await replicas()
    first = await one.active(now=T0)
    assert (await two.active(now=T0 + 1)).kid == first.kid
    rotated = await two.rotate(now=T0 + 10)
    assert rotated.kid != first.kid
    assert (await one.active(now=T0 + 11)).kid == rotated.kid
    published = {k.kid: k.retired_at for k in await one.published(KEEP, now=T0 + 11)}
    assert published == {first.kid: T0 + 10, rotated.kid: None}  # the old key stays for retries
    assert [k.kid for k in await two.published(KEEP, now=T0 + 10 + KEEP)] == [rotated.kid]  # then it goes

    # a notification signed on one replica verifies against the JWKS the other publishes
    token = await PushSigner(one, KEEP).sign(b"{}", issuer="https://parley.test", url="https://hook.test/x",
                                             task_id="t1", event_id="e1", seq=1, attempt=1)
    assert jwt.get_unverified_header(token)["kid"] == rotated.kid
    jwks = jwt.PyJWKSet.from_dict(await PushSigner(two, KEEP).jwks())
    by_kid = {k.key_id: k for k in jwks.keys}
    claims = jwt.decode(token, by_kid[rotated.kid].key, algorithms=["ES256"], audience="https://hook.test/x")
    assert claims["taskId"] == "t1"


async def test_rotations_at_once_leave_one_active_key(replicas: Make, conn: Any):
    one, two = await replicas(), await replicas()
    first = await one.active(now=T0)
    made = await asyncio.gather(one.rotate(now=T0 + 5), two.rotate(now=T0 + 5))
    rows = await conn.fetch("SELECT kid, retired_at FROM push_signing_keys ORDER BY kid")
    active = [r["kid"] for r in rows if r["retired_at"] is None]
    assert len(rows) == 3 and len(active) == 1 and active[0] in {k.kid for k in made}
    assert (await one.active()).kid == (await two.active()).kid == active[0]
    assert first.kid not in active


async def test_the_database_refuses_a_second_active_key(replicas: Make, conn: Any):
    """The one-active-key rule is the database's, not only the lock's."""
    import asyncpg

    await (await replicas()).active(now=T0)
    with pytest.raises(asyncpg.UniqueViolationError, match="push_signing_keys_one_active"):
        await conn.execute("INSERT INTO push_signing_keys VALUES ('intruder', 'pem', $1, NULL)", T0)


async def test_sealed_private_keys_are_not_stored_in_plain_text(replicas: Make, conn: Any):
    box = SecretBox(Fernet.generate_key())
    one, two = await replicas(box), await replicas(box)
    key = await one.active(now=T0)
    assert "PRIVATE KEY" in key.private_pem
    stored = await conn.fetchval("SELECT private_pem FROM push_signing_keys WHERE kid=$1", key.kid)
    assert stored.startswith(PREFIX) and "PRIVATE KEY" not in stored and key.private_pem not in stored
    assert box.open_key(key.kid, stored) == key.private_pem
    assert (await two.active()).private_pem == key.private_pem  # the other replica opens it with the same box
    rotated = await two.rotate(now=T0 + 1)
    stored = await conn.fetchval("SELECT private_pem FROM push_signing_keys WHERE kid=$1", rotated.kid)
    assert stored.startswith(PREFIX) and "PRIVATE KEY" not in stored
    stranger = await replicas(SecretBox(Fernet.generate_key()))
    with pytest.raises(SecretError, match="does not open here"):
        await stranger.active()


async def test_without_a_box_the_key_is_stored_as_given(replicas: Make, conn: Any):
    key = await (await replicas()).active(now=T0)
    assert await conn.fetchval("SELECT private_pem FROM push_signing_keys") == key.private_pem


async def test_a_second_migration_is_a_no_op_and_keeps_the_keys(replicas: Make, postgres_url: str):
    key = await (await replicas()).active(now=T0)
    postgres = Postgres(postgres_url, min_size=1, max_size=2)
    try:
        assert await postgres.migrate(COMPONENT, STEPS) == len(STEPS)
        assert (await postgres.schema_versions())[COMPONENT] == len(STEPS)
    finally:
        await postgres.release_user()  # closes the pool it opened
    assert (await (await replicas()).active()).kid == key.kid


async def test_a_database_of_a_newer_parley_is_refused(replicas: Make, conn: Any, postgres_url: str):
    await replicas()
    await conn.execute("UPDATE parley_schema SET version=7 WHERE component=$1", COMPONENT)
    postgres = Postgres(postgres_url, min_size=1, max_size=2)
    keys = PostgresSigningKeys(postgres)
    with pytest.raises(PostgresError, match=rf"^the signing_keys tables in .* have schema 7, written by a newer "
                                            rf"Parley \(this one knows schema {len(STEPS)}\)$"):
        await keys.open()
    assert postgres.users == 0 and postgres._pool is None
    with pytest.raises(RuntimeError, match=r"^the PostgreSQL signing_keys tables are not open: await open\(\) first$"):
        await keys.active()


async def test_open_and_close_take_and_give_back_one_share_of_the_pool(postgres_url: str):
    postgres = Postgres(postgres_url, min_size=1, max_size=2)
    keys = PostgresSigningKeys(postgres)
    with pytest.raises(RuntimeError, match=r"^the PostgreSQL signing_keys tables are not open: await open\(\) first$"):
        await keys.published(KEEP)
    await keys.open()
    await keys.open()
    assert postgres.users == 1
    await keys.close()
    await keys.close()
    assert postgres.users == 0 and postgres._pool is None


async def test_a_sealed_key_moved_to_another_kid_does_not_open(replicas: Make, conn: Any):
    """Issue 28 item 1: a private key is sealed bound to its kid; its row moved under another kid in the database
    does not open on any replica (SecretError naming no key material)."""
    box = SecretBox(Fernet.generate_key())
    one = await replicas(box)
    key = await one.active(now=T0)
    await conn.execute("UPDATE push_signing_keys SET kid='parley-intruder' WHERE kid=$1", key.kid)
    with pytest.raises(SecretError, match="does not open here") as refused:
        await (await replicas(box)).active()
    assert "PRIVATE KEY" not in str(refused.value)
