"""What the PostgreSQL task store must do beyond the shared contract (tests/unit/test_store_contract.py runs
that against it too): two store instances stand for two replicas sharing one database."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from parley.postgres import Postgres, PostgresError
from parley.protocol import models as m
from parley.tasks.log import Entry, fold
from parley.tasks.postgres_store import MIGRATIONS, PostgresTaskStore
from parley.tasks.store import Lease, SequenceConflict, snapshot_phase

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from test_store_contract import (
    SNAPSHOT_EVERY,
    advance,
    chunk,
    hook,
    listed_ids,
    new_task,
    put,
    record,
    status,
    stored_snapshot,
)

S = m.TaskState


@pytest.fixture
async def pair(postgres_url: str) -> AsyncIterator[tuple[PostgresTaskStore, PostgresTaskStore]]:
    a = PostgresTaskStore(Postgres(postgres_url), claim_seconds=30.0)
    b = PostgresTaskStore(Postgres(postgres_url), claim_seconds=30.0)
    await a.open()
    await b.open()
    yield a, b
    await a.close()
    await b.close()


async def test_two_replicas_claim_disjoint_orphans(pair: tuple[PostgresTaskStore, PostgresTaskStore]) -> None:
    a, b = pair
    for i in range(40):
        await put(a, new_task(f"t{i}", state=S.WORKING), lease=Lease("dead-replica", 100.0))
    got_a, got_b = await asyncio.gather(a.claim_orphans("A", 200.0, 500.0), b.claim_orphans("B", 200.0, 500.0))
    ids_a, ids_b = {r.task.id for r in got_a}, {r.task.id for r in got_b}
    assert not ids_a & ids_b  # no task taken twice
    assert ids_a | ids_b == {f"t{i}" for i in range(40)}
    for task_id in ids_a:
        assert (await b.lease(task_id)) == Lease("A", 500.0)


async def test_a_live_lease_is_not_taken(pair: tuple[PostgresTaskStore, PostgresTaskStore]) -> None:
    a, b = pair
    await put(a, new_task("alive", state=S.WORKING), lease=Lease("A", 1000.0))
    assert await b.claim_orphans("B", 999.0, 2000.0) == []
    assert [r.task.id for r in await b.claim_orphans("B", 1000.0, 2000.0)] == ["alive"]  # expired at 1000


async def test_one_of_two_concurrent_appends_wins(pair: tuple[PostgresTaskStore, PostgresTaskStore]) -> None:
    a, b = pair
    await put(a, new_task(state=S.WORKING))
    results = await asyncio.gather(advance(a, "t1", status(S.COMPLETED, "a")), advance(b, "t1", status(S.FAILED, "b")),
                                   return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["NoneType", "SequenceConflict"]
    assert [e.seq for e in await a.events_after("t1", 0)] == [1, 2]
    assert isinstance(next(r for r in results if r is not None), SequenceConflict)


async def test_a_notification_handed_to_one_replica_is_not_handed_to_the_other(
        pair: tuple[PostgresTaskStore, PostgresTaskStore]) -> None:
    a, b = pair
    await put(a, new_task(state=S.WORKING))
    await advance(a, "t1", status(S.WORKING, "x"), push_configs=[hook("h1")])
    now = 1e12
    mine = await a.due_notifications(now, 10, set())
    assert [(n.config_id, n.seq) for n in mine] == [("h1", 2)]
    assert await b.due_notifications(now, 10, set()) == []  # claimed by a
    assert await b.next_notification_at(set()) == pytest.approx(now + 30.0)  # due for b when the claim lapses
    assert [n.id for n in await a.due_notifications(now, 10, set())] == [mine[0].id]  # a still sees its own
    # a dies without recording an attempt: once the claim lapses, b takes it
    assert [n.id for n in await b.due_notifications(now + 31, 10, set())] == [mine[0].id]
    assert await a.due_notifications(now + 31, 10, set()) == []


async def test_the_change_feed_waits_for_a_position_an_open_transaction_holds(postgres_url: str) -> None:
    store = PostgresTaskStore(Postgres(postgres_url), gap_seconds=60.0)
    await store.open()
    try:
        await put(store, new_task("first"))
        await put(store, new_task("slow"))
        start = (await store.changes_after(0))[-1].position
        conn = await asyncpg.connect(postgres_url)
        try:
            tx = conn.transaction()
            await tx.start()
            # A commit in flight: its feed row's position is taken, not yet visible.
            await conn.execute("UPDATE tasks SET seq = seq + 1 WHERE id = 'slow'")
            await put(store, new_task("fast"))  # commits after it, with a larger position
            assert await store.changes_after(start) == []  # stops at the gap: nothing is skipped for good
            await tx.commit()
        finally:
            await conn.close()
        assert [c.task_id for c in await store.changes_after(start)] == ["slow", "fast"]
    finally:
        await store.close()


async def test_a_rolled_back_gap_is_passed_after_gap_seconds(postgres_url: str) -> None:
    store = PostgresTaskStore(Postgres(postgres_url), gap_seconds=0.0)
    await store.open()
    try:
        await put(store, new_task("first"))
        start = (await store.changes_after(0))[-1].position
        conn = await asyncpg.connect(postgres_url)
        try:
            tx = conn.transaction()
            await tx.start()
            await conn.execute("UPDATE tasks SET seq = seq + 1 WHERE id = 'first'")
            await tx.rollback()  # its position is never used
        finally:
            await conn.close()
        await put(store, new_task("after"))
        assert [c.task_id for c in await store.changes_after(start)] == ["after"]
    finally:
        await store.close()


async def test_opening_again_migrates_nothing_and_a_newer_schema_is_refused(postgres_url: str) -> None:
    pg = Postgres(postgres_url)
    try:
        assert await pg.migrate("tasks", MIGRATIONS) == 0  # created now
        assert await pg.migrate("tasks", MIGRATIONS) == len(MIGRATIONS)  # already there: nothing run
        pool = await pg.pool()
        await pool.execute("UPDATE parley_schema SET version = version + 1 WHERE component = 'tasks'")
        store = PostgresTaskStore(Postgres(postgres_url))
        with pytest.raises(PostgresError, match="written by a newer Parley"):
            await store.open()
        await store.postgres.close()
    finally:
        await pg.close()


async def test_schema_3_gets_lagging_snapshots_and_reads_as_before(postgres_url: str) -> None:
    """Schema 4 adds `tasks.snapshot_seq`: a commit of artifact updates only leaves the stored snapshot behind.
    A task written by schema 3 (a whole snapshot, no such column) reads the same after the migration (A2A 1.0
    section 3.1.3: GetTask gives the task's current state) and streams on, reading whole after every chunk."""
    pg = Postgres(postgres_url)
    try:
        assert await pg.migrate("tasks", MIGRATIONS[:3]) == 0  # a database as schema 3 left it
    finally:
        await pg.close()
    task = new_task(state=S.WORKING)
    conn = await asyncpg.connect(postgres_url)
    try:
        import msgspec

        await conn.execute("INSERT INTO tasks VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)",
                           "t1", "echo", "alice", "c1", S.WORKING.value, None, msgspec.json.encode(task), 1, 1.0, 1.0,
                           None, None, None)
        await conn.execute("INSERT INTO events VALUES ($1,$2,$3,$4)", "t1", 1, "task", msgspec.json.encode(task))
    finally:
        await conn.close()
    store = PostgresTaskStore(Postgres(postgres_url), lagging_snapshots=True)
    await store.open()  # migrates to schema 4
    try:
        got = await store.get("t1")
        assert got is not None and (got.task, got.seq) == (task, 1)
        expected = task
        for i in range(SNAPSHOT_EVERY + 3):
            expected = fold(expected, [chunk(i)])
            await advance(store, "t1", chunk(i))
        got = await store.get("t1")
        assert got is not None and (got.task, got.seq) == (expected, SNAPSHOT_EVERY + 4)
        phase = snapshot_phase("t1")  # stored whole at t1's last rewrite point, lagging since
        assert (await stored_snapshot(store, "t1"))[1] == max(
            n for n in range(2, SNAPSHOT_EVERY + 5) if (n + phase) % SNAPSHOT_EVERY == 0)
    finally:
        await store.close()


async def test_schema_2_gets_the_ascending_owner_index_and_lists_as_before(postgres_url: str) -> None:
    """Schema 3 keeps `tasks_by_owner` ascending (a commit adds at the right edge of its range); a schema-2
    database, whose index was descending, gets it rebuilt on open, and ListTasks still answers newest update
    first, page after page (A2A 1.0 section 3.1.4: tasks/list), reading the index backwards, not sorting."""
    pg = Postgres(postgres_url)
    try:
        assert await pg.migrate("tasks", MIGRATIONS[:2]) == 0  # a database as schema 2 left it
    finally:
        await pg.close()
    store = PostgresTaskStore(Postgres(postgres_url))
    await store.open()  # migrates to schema 3
    try:
        for i in range(5):
            t = new_task(f"t{i}", state=S.COMPLETED)
            await store.create(record(t, updated=1000.0 + i), Entry(1, t))
        assert await listed_ids(store) == ["t4", "t3", "t2", "t1", "t0"]
    finally:
        await store.close()
    conn = await asyncpg.connect(postgres_url)
    try:
        definition = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'tasks_by_owner' "
                                         "AND schemaname = current_schema()")
        assert "DESC" not in definition, definition
        assert await conn.fetchval("SELECT version FROM parley_schema WHERE component = 'tasks'") == len(MIGRATIONS) == 5
        await conn.execute("SET enable_seqscan = off")  # 5 rows: the planner would scan the table otherwise
        plan = " ".join(r[0] for r in await conn.fetch(
            "EXPLAIN SELECT id FROM tasks WHERE agent_id = 'echo' AND owner = 'alice' "
            "ORDER BY updated_at DESC, id DESC LIMIT 3"))
        assert "Scan Backward using tasks_by_owner" in plan and "Sort" not in plan, plan
    finally:
        await conn.close()
