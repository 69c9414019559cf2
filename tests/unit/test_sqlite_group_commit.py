"""The SQLite store's group writer (parley.tasks.sqlite_store): commits queued in one event-loop turn share a
transaction, and a commit behaves as if it had been written synchronously when its caller is cancelled:
cancelled while still queued, it is never written; cancelled after it was written, it stays written and the
caller hears of the cancellation at its next await (docs/architecture.md, "Running an agent": what the engine
committed is what it believes it committed). A busy store writes at most once per `group_commit_seconds`, so that
commits of concurrent tasks arriving in different loop turns share a transaction too; an idle one writes at once
(docs/operations.md, "Group commit"). Transactions are counted with SQLite's statement hook, nothing is timed."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest
from test_store_contract import advance, chunk, new_task, put, status

from parley.backends import Backends
from parley.protocol import models as m
from parley.serve import GC_THRESHOLDS, tune_gc
from parley.settings import Settings
from parley.tasks.log import Entry, fold
from parley.tasks.sqlite_store import GROUP_COMMIT_SECONDS, SqliteTaskStore
from parley.tasks.store import Commit, SequenceConflict

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
        loop = asyncio.get_running_loop()
        # the cancel runs after the group write (whenever its interval lets it run), before the job resumes
        store._db.set_trace_callback(lambda sql: loop.call_soon(job.cancel) if sql == "COMMIT" else None)
        await asyncio.gather(job, return_exceptions=True)
        store._db.set_trace_callback(None)
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


def count_commits(store: SqliteTaskStore) -> list[str]:
    """The transactions `store` commits from now on, one item each (SQLite's statement hook)."""
    commits: list[str] = []
    store._db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    return commits


async def turns(n: int) -> None:
    """Let the event loop run `n` turns (callbacks scheduled with call_soon run; timers not yet due do not)."""
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.mark.parametrize(("interval", "transactions"), [(0.0, 2), (0.5, 1)])
async def test_commits_of_two_tasks_within_the_interval_share_one_transaction(
        tmp_path: Path, interval: float, transactions: int) -> None:
    """Two tasks commit a few loop turns apart, right after another write (as tokens of two streams do): within
    the interval they share one transaction; with the interval off (0) each is a transaction of its own."""
    store = SqliteTaskStore(tmp_path / "t.db", group_commit_seconds=interval)
    try:
        await put(store, new_task("t1"))
        await put(store, new_task("t2"))
        commits = count_commits(store)
        first = asyncio.create_task(store.commit(working("t1")))
        await turns(3)  # t1's commit is queued, and written at once when the interval is off
        second = asyncio.create_task(store.commit(working("t2")))
        await asyncio.gather(first, second)
        assert len(commits) == transactions
        assert [(c.task_id, c.seq) for c in await store.changes_after(0) if c.seq == 2] == [("t1", 2), ("t2", 2)]
    finally:
        await store.close()


async def test_an_idle_store_writes_at_once_and_a_busy_one_waits_for_the_interval(tmp_path: Path) -> None:
    """A commit to a store that has not written for longer than the interval is written at the next loop turn, not
    the interval later (no delay for a lone request); one right after another write waits for the interval (an
    hour here: it is written at close, which writes what is queued at once)."""
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, group_commit_seconds=0.05)
    try:
        await put(store, new_task("t1"))
        await put(store, new_task("t2"))
        await asyncio.sleep(0.1)  # longer than the interval: the store is idle (a lower bound, nothing raced)
        job = asyncio.create_task(store.commit(working("t1")))
        await turns(3)
        assert job.done() and job.exception() is None
        store.group_commit_seconds = 3600.0
        late = asyncio.create_task(store.commit(working("t2")))  # the last write was just now
        await turns(20)
        assert not late.done()
        assert (await store.get("t2")).seq == 1  # type: ignore[union-attr]
        await store.close()
        await asyncio.wait_for(late, 10)  # written by close: it returns (the bound only fails the test)
    finally:
        await store.close()
    reopened = SqliteTaskStore(path)
    try:
        assert [(await reopened.get(t)).seq for t in ("t1", "t2")] == [2, 2]  # type: ignore[union-attr]
    finally:
        await reopened.close()


async def test_a_commit_cancelled_while_it_waits_for_the_interval_is_not_written(tmp_path: Path) -> None:
    """Cancelled while its group write waits for the interval, a commit is never written, and the store goes on:
    the same commit made again is written (here at close)."""
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, group_commit_seconds=3600.0)
    try:
        await put(store, new_task())
        job = asyncio.create_task(store.commit(working()))
        await turns(3)
        assert not job.done()
        job.cancel()
        results = await asyncio.gather(job, return_exceptions=True)
        assert isinstance(results[0], asyncio.CancelledError)
        again = asyncio.create_task(store.commit(working()))
        await turns(3)
        await store.close()
        await asyncio.wait_for(again, 10)  # written by close: it returns (the bound only fails the test)
    finally:
        await store.close()
    reopened = SqliteTaskStore(path)
    try:
        got = await reopened.get("t1")
        assert got is not None and got.seq == 2 and got.task.status.state is S.WORKING
    finally:
        await reopened.close()


async def test_a_delayed_group_write_waits_for_a_checkpoint_holding_the_writer_lock(tmp_path: Path) -> None:
    """The interval ends while a checkpoint holds SQLite's writer lock: the commit stays queued (the loop goes
    on), and is written when the checkpointer lets go (WalCheckpointer.after_hold)."""
    store = SqliteTaskStore(tmp_path / "t.db", wal_checkpoint_seconds=3600, group_commit_seconds=0.05)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    try:
        await put(store, new_task())
        checkpointer.gate.acquire()  # what the checkpointer's thread does around a RESTART or TRUNCATE
        try:
            job = asyncio.create_task(store.commit(working()))
            await asyncio.sleep(0.1)  # past the interval: the delayed group write was tried, and found the lock
            assert store._timer is None and not job.done()
            assert (await store.get("t1")).seq == 1  # type: ignore[union-attr]
        finally:
            checkpointer.gate.release()
        await asyncio.to_thread(checkpointer.after_hold)  # from the checkpointer's thread, after the checkpoint
        await asyncio.wait_for(job, 10)
        assert (await store.get("t1")).seq == 2  # type: ignore[union-attr]
    finally:
        await store.close()


def test_the_interval_is_a_server_setting(tmp_path: Path) -> None:
    """`group_commit_seconds` ([server] in parley.toml, `parley serve --group-commit-seconds`) reaches the SQLite
    store; 0 turns it off, and a negative or long one is refused."""
    assert Settings().group_commit_seconds == GROUP_COMMIT_SECONDS
    store = Backends(Settings(db=str(tmp_path / "t.db"), group_commit_seconds=0.25)).store()
    try:
        assert isinstance(store, SqliteTaskStore) and store.group_commit_seconds == 0.25
    finally:
        asyncio.run(store.close())
    assert Settings(group_commit_seconds=0).problems() == []
    assert [k for k, _ in Settings(group_commit_seconds=-0.001).problems()] == ["group_commit_seconds"]
    assert [k for k, _ in Settings(group_commit_seconds=5).problems()] == ["group_commit_seconds"]


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


def test_parley_serve_takes_the_interval_and_refuses_a_bad_one(tmp_path: Path) -> None:
    """`parley serve --group-commit-seconds` as users type it (a subprocess): a value out of range is refused
    before the server starts, naming the flag."""
    import subprocess

    from support import PARLEY

    done = subprocess.run([*PARLEY, "serve", "--db", str(tmp_path / "t.db"), "--group-commit-seconds", "5"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == "error: --group-commit-seconds: must be between 0 (off) and 1 second", done.stderr


async def test_streamed_tokens_sharing_a_write_take_no_savepoints_and_a_refused_one_leaves_no_trace(
        tmp_path: Path) -> None:
    """Token commits of three streams in one group write (and a stale one from a second writer) are written without
    a database statement (their records go to the tail file) and a refused one is refused before anything of it is
    staged, so there is nothing to undo. A commit
    written whole in a shared transaction still has its savepoint, and is undone alone when refused."""
    store = SqliteTaskStore(tmp_path / "t.db")
    try:
        records = {}
        for name in ("a", "b", "c"):
            await put(store, new_task(name, state=S.WORKING))
            await advance(store, name, chunk(0, task_id=name))
            await advance(store, name, chunk(1, task_id=name))  # a tail now
            records[name] = await store.get(name)
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)

        def token(name: str, i: int, *, stale: bool = False) -> Commit:
            rec = records[name]
            seq = rec.seq - 1 if stale else rec.seq
            return Commit(task_id=name, expected_seq=seq, entries=[Entry(seq + 1, chunk(i, task_id=name))],
                          snapshot=fold(rec.task, [chunk(i, task_id=name)]), updated_at=3000.0 + i)

        got = await asyncio.gather(store.commit(token("a", 2)), store.commit(token("b", 2)),
                                   store.commit(token("b", 9, stale=True)), store.commit(token("c", 2)),
                                   return_exceptions=True)
        assert got[:2] == [None, None] and got[3] is None
        assert isinstance(got[2], SequenceConflict) and got[2].actual == records["b"].seq + 1
        assert not statements  # no database statement at all: the tokens are records of the tail file
        for name in ("a", "b", "c"):
            rec = await store.get(name)
            assert rec is not None and rec.seq == records[name].seq + 1
            assert rec.task == fold(records[name].task, [chunk(2, task_id=name)])

        # A finishing commit (written whole) beside a token in one write: savepoints, and the refused one undone.
        statements.clear()
        done = status(S.COMPLETED, task_id="a")
        rec_a = await store.get("a")
        rec_c = await store.get("c")
        finish_stale = Commit(task_id="a", expected_seq=rec_a.seq - 1, entries=[Entry(rec_a.seq, done)],
                              snapshot=fold(rec_a.task, [done]), updated_at=4000.0)
        token_c = Commit(task_id="c", expected_seq=rec_c.seq, entries=[Entry(rec_c.seq + 1, chunk(3, task_id="c"))],
                         snapshot=fold(rec_c.task, [chunk(3, task_id="c")]), updated_at=4001.0)
        got = await asyncio.gather(store.commit(finish_stale), store.commit(token_c), return_exceptions=True)
        assert isinstance(got[0], SequenceConflict) and got[1] is None
        assert statements.count("SAVEPOINT one") == 1 and statements.count("ROLLBACK TO one") == 1
        store._db.set_trace_callback(None)
        after_a = await store.get("a")
        assert after_a is not None and after_a.seq == rec_a.seq and after_a.task.status.state is S.WORKING
        assert [e.seq for e in await store.events_after("a", 0)] == list(range(1, rec_a.seq + 1))
        assert (await store.get("c")).seq == rec_c.seq + 1  # type: ignore[union-attr]
    finally:
        await store.close()
