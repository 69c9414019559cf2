"""What a streamed token costs the SQLite store's disk (issue 25: at most 1 KiB per token is the target): a commit
writes every page it touches to the WAL whole, so the page size of a new database is small
(sqlite_store.PAGE_SIZE); counted from the WAL's frames with the checkpointer held off, nothing timed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from test_store_contract import advance, chunk, new_task, put, status

from parley.protocol import models as m
from parley.tasks.sqlite_store import PAGE_SIZE, SqliteTaskStore

S = m.TaskState
TOKENS = 200


def wal_bytes(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


async def test_a_streamed_token_writes_a_few_small_pages(tmp_path: Path) -> None:
    """Each artifact update committed alone (an agent streaming an answer, A2A 1.0 section 3.1.3's
    TaskArtifactUpdateEvent) adds at most 8 KiB to the WAL: about six pages of 1 KiB, where SQLite's default
    4 KiB pages made it about 20 KiB. The answer reads back whole."""
    db = tmp_path / "t.db"
    store = SqliteTaskStore(db, wal_checkpoint_seconds=3600.0)  # no checkpoint: the WAL keeps every frame
    try:
        await put(store, new_task(state=S.WORKING))
        before = wal_bytes(db)
        for i in range(TOKENS):
            await advance(store, "t1", chunk(i))
        per_token = (wal_bytes(db) - before) / TOKENS
        got = await store.get("t1")
    finally:
        await store.close()
    assert per_token <= 8 * 1024, per_token
    assert got is not None and got.task.artifacts is not None
    assert got.task.artifacts[0].parts == [m.Part(text="".join(f"w{i} " for i in range(TOKENS)))]


async def test_a_database_made_with_another_page_size_keeps_it(tmp_path: Path) -> None:
    """A database created by an earlier Parley (SQLite's default 4 KiB pages) opens, keeps its page size
    (SQLite cannot change it in WAL mode) and reads and writes as before."""
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA page_size=4096")
    con.execute("CREATE TABLE unrelated (x)")  # the page size is fixed once the file has a page
    con.commit()
    con.close()
    store = SqliteTaskStore(db)
    try:
        await put(store, new_task(state=S.WORKING))
        await advance(store, "t1", chunk(0), status(S.COMPLETED))
    finally:
        await store.close()
    store = SqliteTaskStore(db)
    try:
        got = await store.get("t1")
        assert got is not None and got.task.status.state is S.COMPLETED and got.seq == 3
    finally:
        await store.close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA page_size").fetchone()[0] == 4096 != PAGE_SIZE
    con.close()
    fresh = tmp_path / "new.db"
    await SqliteTaskStore(fresh).close()
    con = sqlite3.connect(fresh)
    assert con.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    con.close()
