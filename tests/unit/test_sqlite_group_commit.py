"""The SQLite store's group writer (parley.tasks.sqlite_store): commits queued in one event-loop turn share a
transaction, and a commit behaves as if it had been written synchronously when its caller is cancelled:
cancelled while still queued, it is never written; cancelled after it was written, it stays written and the
caller hears of the cancellation at its next await (docs/architecture.md, "Running an agent": what the engine
committed is what it believes it committed)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from test_store_contract import new_task, put, status

from parley.protocol import models as m
from parley.serve import GC_THRESHOLDS, tune_gc
from parley.tasks.log import Entry, fold
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import Commit

S = m.TaskState


def working(task_id: str = "t1") -> Commit:
    ev = status(S.WORKING, task_id=task_id)
    return Commit(task_id=task_id, expected_seq=1, entries=[Entry(2, ev)], snapshot=fold(new_task(task_id), [ev]),
                  updated_at=5.0)


async def test_a_commit_cancelled_while_queued_is_not_written(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "t.db")
    try:
        await put(store, new_task())
        job = asyncio.create_task(store.commit(working()))
        await asyncio.sleep(0)  # the job ran up to its wait: queued, the group write not yet run
        job.cancel()
        results = await asyncio.gather(job, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError)
        assert (await store.get("t1")).seq == 1  # type: ignore[union-attr]
        await store.commit(working())  # the queue is clean: the same commit goes through now
        assert (await store.get("t1")).seq == 2  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_a_commit_cancelled_after_it_was_written_stays_written(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "t.db")
    try:
        await put(store, new_task())
        job = asyncio.create_task(store.commit(working()))
        await asyncio.sleep(0)  # queued; the group write is the next callback
        asyncio.get_running_loop().call_soon(job.cancel)  # runs after the write, before the job resumes
        await asyncio.gather(job, return_exceptions=True)
        assert job.cancelled()
        got = await store.get("t1")
        assert got is not None and got.seq == 2 and got.task.status.state is S.WORKING
    finally:
        await store.close()


async def test_commits_of_one_turn_share_one_transaction(tmp_path: Path) -> None:
    """Eight tasks committing at once cost one transaction: SQLite's total_changes grows by their rows, and the
    change feed shows them in the order they were queued."""
    store = SqliteTaskStore(tmp_path / "t.db")
    try:
        for i in range(8):
            await put(store, new_task(f"t{i}"))
        writes: list[int] = []
        store._db.set_trace_callback(lambda sql: writes.append(1) if sql == "COMMIT" else None)
        await asyncio.gather(*(store.commit(working(f"t{i}")) for i in range(8)))
        store._db.set_trace_callback(None)
        assert len(writes) == 1
        assert [c.task_id for c in await store.changes_after(0) if c.seq == 2] == [f"t{i}" for i in range(8)]
    finally:
        await store.close()


def test_parley_serve_tunes_the_garbage_collector() -> None:
    """`parley serve` freezes what exists at start-up and collects the young generation less often
    (docs/operations.md, "Performance"); restored afterwards for the other tests."""
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 1000  # the modules, classes and functions loaded so far
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
