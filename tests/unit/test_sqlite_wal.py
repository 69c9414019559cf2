"""The SQLite store keeps its WAL bounded (docs/operations.md, "Storage and restarts").

Under steady writes a PASSIVE checkpoint never reaches the end of the WAL, so SQLite never starts it
over and the file grows without bound (issue "bounded resources": 4 GB after 51,000 sends). Each
checkpoint round therefore makes the WAL start over (RESTART; the file is reused) once it
holds more than its limit, and empties it (TRUNCATE) when the writer was idle for a round. The rounds are driven
by hand here (the store's own thread waits an hour).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

from parley.protocol import models as m
from parley.tasks.log import Entry
from parley.tasks.sqlite_store import PAGE_SIZE, SqliteTaskStore, WalCheckpointer
from parley.tasks.store import Retention, TaskRecord

LIMIT = 2 * 1024 * 1024  # a commit here writes about 40 KB of WAL pages


def task(i: int) -> m.Task:
    text = f"task {i} " + "x" * 2000  # about a page of WAL per commit
    return m.Task(id=f"t{i}", context_id="c", status=m.TaskStatus(state=m.TaskState.COMPLETED),
                  history=[m.Message(message_id=f"m{i}", role=m.Role.USER, parts=[m.Part(text=text)])])


async def write(store: SqliteTaskStore, start: int, n: int) -> None:
    for i in range(start, start + n):
        t = task(i)
        await store.create(TaskRecord(task=t, agent_id="echo", owner="alice", seq=1, created_at=1.0,
                                      updated_at=1.0), Entry(1, t))


@contextlib.asynccontextmanager
async def driven(path: Path) -> AsyncIterator[tuple[SqliteTaskStore, WalCheckpointer, sqlite3.Connection]]:
    """A store whose checkpoint rounds the test drives by hand (its own thread waits an hour), and the
    checkpointing connection to drive them with."""
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600, wal_limit_bytes=LIMIT)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    side = checkpointer.connect()
    try:
        checkpointer.round(side)  # the first round only learns the writer's version
        yield store, checkpointer, side
    finally:
        side.close()
        await store.close()


def wal_size(path: Path) -> int:
    wal = Path(str(path) + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def frames_in_wal(db: sqlite3.Connection) -> int:
    """The frames written to the WAL since it last started over (what a PASSIVE checkpoint reports)."""
    return db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]


async def test_a_wal_file_in_steady_use_is_reused_not_cut_back(tmp_path: Path) -> None:
    """Below twice the limit the file keeps its size when the WAL starts over: cutting it back and growing it
    again cost the writer 3-4 ms each time on the bench VM (bench/RESULTS.md). Its content, not its size,
    decides when a round starts it over."""
    path = tmp_path / "t.db"
    async with driven(path) as (store, checkpointer, side):
        n = 0
        while wal_size(path) <= LIMIT:  # just past the limit (no checkpoint meanwhile)
            await write(store, n, 1)
            n += 1
        size = wal_size(path)
        assert LIMIT < size < 2 * LIMIT
        checkpointer.round(side)
        assert checkpointer.restarts == 1
        await write(store, n, 5)
        assert wal_size(path) == size  # written from the file's start, and the file kept
        checkpointer.round(side)  # the file is past the limit, but what it holds is not: no new start-over
        assert checkpointer.restarts == 1


async def test_a_wal_past_its_limit_starts_over_is_emptied_when_idle_and_nothing_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    async with driven(path) as (store, checkpointer, side):
        n = 0
        while wal_size(path) <= 2 * LIMIT:  # writes the checkpoints did not keep up with: a burst past twice the limit
            await write(store, n, 1)
            n += 1
        checkpointer.round(side)  # past the limit: started over although the writer is busy ...
        assert (checkpointer.restarts, checkpointer.truncations) == (1, 0)
        await write(store, n, 10)  # ... so these are written from the WAL's start, the file cut to twice the limit
        assert wal_size(path) == 2 * LIMIT
        assert frames_in_wal(side) * (PAGE_SIZE + 24) < LIMIT // 4  # ten commits' frames, at the start of the file
        checkpointer.round(side)  # the writer wrote and the WAL holds less than its limit: left as it is ...
        assert wal_size(path) == 2 * LIMIT
        assert (checkpointer.restarts, checkpointer.truncations) == (1, 0)
        checkpointer.round(side)  # ... until a round finds the writer idle: then the WAL is emptied
        assert (wal_size(path), checkpointer.restarts, checkpointer.truncations) == (0, 1, 1)
    reopened = SqliteTaskStore(path)
    try:
        ids = (0, n // 2, n - 1, n + 9)
        got = [await reopened.get(f"t{i}") for i in ids]
        assert [g.task.history[0].parts[0].text.split(" x")[0] if g and g.task.history else None for g in got] == [
            f"task {i}" for i in ids]
    finally:
        await reopened.close()


async def test_a_write_under_way_for_a_whole_round_is_not_taken_for_an_idle_writer(tmp_path: Path) -> None:
    """A group write that outlasts a checkpoint round commits nothing meanwhile, so SQLite's data_version stays
    as it was. The round must still see the writer busy: taken for idle, the write was followed by a TRUNCATE
    holding the writer lock for 12-73 ms while 1,000 streams waited (bench/RESULTS.md, 2026-11-28 evening). Once
    the writer is idle for a round, the WAL is emptied as before."""
    path = tmp_path / "t.db"
    async with driven(path) as (store, checkpointer, side):
        await write(store, 0, 3)
        checkpointer.round(side)  # the writer wrote since the last round: busy, the WAL stays
        size = wal_size(path)
        assert size > 0
        checkpointer.gate.acquire()  # a write under way (what the store's writer holds while it writes)
        try:  # on a thread, as the checkpointer's own: a round taking the writer for idle would wait for the gate
            await asyncio.wait_for(asyncio.to_thread(checkpointer.round, side), 10)
            assert (wal_size(path), checkpointer.truncations) == (size, 0)
        finally:
            checkpointer.gate.release()
        assert checkpointer.gate.writer_enters()  # a write begins and ends between two rounds, committing nothing
        checkpointer.gate.release()
        checkpointer.round(side)
        assert (wal_size(path), checkpointer.truncations) == (size, 0)
        checkpointer.round(side)  # a round with no write at all: idle, the WAL is emptied
        assert (wal_size(path), checkpointer.truncations) == (0, 1)


async def test_commits_wait_for_a_checkpoint_holding_the_writer_lock_and_the_loop_goes_on(tmp_path: Path) -> None:
    """A RESTART or TRUNCATE checkpoint holds SQLite's writer lock. A commit arriving meanwhile stays queued
    instead of waiting inside SQLite (whose busy handler would sleep 1, 2, 5 ms... on the event loop): reads
    are served meanwhile, and the commit is written as soon as the checkpointer lets go."""
    store = SqliteTaskStore(tmp_path / "t.db", wal_checkpoint_seconds=3600)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    try:
        await write(store, 0, 1)
        checkpointer.gate.acquire()  # what the checkpointer's thread does around such a checkpoint
        try:
            pending = asyncio.ensure_future(write(store, 1, 1))
            for _ in range(5):  # let the commit be queued and its group write be tried
                await asyncio.sleep(0)
            assert not pending.done()
            assert (await store.get("t0")) is not None  # the loop serves a read meanwhile
            assert await store.get("t1") is None
        finally:
            checkpointer.gate.release()
        await asyncio.to_thread(checkpointer.after_hold)  # from the checkpointer's thread, after the checkpoint
        await asyncio.wait_for(pending, 10)
        got = await store.get("t1")
        assert got is not None and got.task.id == "t1"
    finally:
        await store.close()


async def test_other_writes_wait_for_a_checkpoint_holding_the_writer_lock_and_the_loop_goes_on(tmp_path: Path) -> None:
    """Leases, retention and push configs are written outside the group writes; they too wait for the
    checkpointer's lock without sleeping in SQLite's busy handler on the event loop, then are written."""
    store = SqliteTaskStore(tmp_path / "t.db", wal_checkpoint_seconds=3600)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    try:
        await write(store, 0, 3)
        config = m.TaskPushNotificationConfig(id="hook", task_id="t2", url="https://example.com/hook")
        checkpointer.gate.acquire()
        try:
            writes = [asyncio.ensure_future(store.prune(Retention(keep_finished=1), now=2.0)),
                      asyncio.ensure_future(store.put_push_config(config)),
                      asyncio.ensure_future(store.release_leases("nobody", ["t2"]))]
            for _ in range(5):
                await asyncio.sleep(0)
            assert not any(w.done() for w in writes)
            assert (await store.get("t0")) is not None  # nothing pruned yet, and reads are served
            assert await store.list_push_configs("t2") == []
        finally:
            checkpointer.gate.release()
        removed, _, _ = await asyncio.wait_for(asyncio.gather(*writes), 10)
        assert removed == 2
        assert await store.get("t0") is None and await store.get("t1") is None and await store.get("t2") is not None
        assert [c.id for c in await store.list_push_configs("t2")] == ["hook"]
    finally:
        await store.close()


async def test_a_real_start_over_with_commits_arriving_loses_nothing(tmp_path: Path) -> None:
    """The checkpointer's own thread starts the WAL over while commits keep arriving: every one is written."""
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, wal_checkpoint_seconds=0.001, wal_limit_bytes=LIMIT)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    try:
        n = 0
        while checkpointer.restarts < 3:  # until the thread started the WAL over three times
            await write(store, n, 10)
            n += 10
            assert n < 20_000, "the checkpointer never started the WAL over"
        got = [await store.get(f"t{i}") for i in range(n)]
        assert all(g is not None for g in got)
    finally:
        await store.close()
