"""The SQLite store keeps its WAL bounded (docs/operations.md, "Storage and restarts").

Under steady writes a PASSIVE checkpoint never reaches the end of the WAL, so SQLite never starts it
over and the file grows without bound (issue "bounded resources": 4 GB after 51,000 sends). Each
checkpoint round therefore makes the WAL start over (RESTART, the file cut back to the limit) once it
passes its limit, and empties it (TRUNCATE) when the writer was idle for a round. The rounds are driven
by hand here (the store's own thread waits an hour).
"""

from __future__ import annotations

from pathlib import Path

from parley.protocol import models as m
from parley.tasks.log import Entry
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import TaskRecord

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


def wal_size(path: Path) -> int:
    wal = Path(str(path) + "-wal")
    return wal.stat().st_size if wal.exists() else 0


async def test_a_wal_past_its_limit_starts_over_is_emptied_when_idle_and_nothing_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600, wal_limit_bytes=LIMIT)
    checkpointer = store._checkpointer
    assert checkpointer is not None
    side = checkpointer.connect()
    try:
        checkpointer.round(side)  # the first round only learns the writer's version
        await write(store, 0, 100)  # writes the checkpoints did not keep up with
        assert wal_size(path) > LIMIT
        checkpointer.round(side)  # past the limit: started over although the writer is busy ...
        assert (checkpointer.restarts, checkpointer.truncations) == (1, 0)
        await write(store, 100, 10)  # ... so these are written from the WAL's start, the file cut to the limit
        assert 0 < wal_size(path) <= LIMIT
        checkpointer.round(side)  # the writer wrote and the WAL is below its limit: left as it is ...
        assert 0 < wal_size(path) <= LIMIT
        assert (checkpointer.restarts, checkpointer.truncations) == (1, 0)
        checkpointer.round(side)  # ... until a round finds the writer idle: then the WAL is emptied
        assert (wal_size(path), checkpointer.restarts, checkpointer.truncations) == (0, 1, 1)
    finally:
        side.close()
        await store.close()
    reopened = SqliteTaskStore(path)
    try:
        got = [await reopened.get(f"t{i}") for i in (0, 50, 99, 109)]
        assert [g.task.history[0].parts[0].text.split(" x")[0] if g and g.task.history else None for g in got] == [
            "task 0", "task 50", "task 99", "task 109"]
    finally:
        await reopened.close()
