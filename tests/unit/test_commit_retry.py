"""tasks/commit_retry.py: a commit whose connection dropped has an unknown outcome; it is re-checked (written
already?) and tried again, never written twice, and given up only past its budget (issue 27 item 1).

The stores are real (SQLite and PostgreSQL); the fault is injected at the one place a real one cannot be timed:
the connection dropping right after the database committed, before Parley heard (`lost_reply`), or before it
committed (`lost_request`). tests/cluster/test_connection_drops.py drops real connections under real replicas.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_store_contract import art, key, new_task, put, status

from parley.log_throttle import Throttled
from parley.protocol import models as m
from parley.tasks.commit_retry import StoreUnreachable, commit_with_retry
from parley.tasks.log import Entry, fold
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import Commit, SequenceConflict, TaskStore

S = m.TaskState


class Faulty:
    """A real store whose next commits fail as a dropped connection makes them fail."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.faults: list[str] = []  # "lost_reply" | "lost_request" | "bug", one per commit
        self.commits = 0

    async def commit(self, commit: Commit) -> None:
        self.commits += 1
        fault = self.faults.pop(0) if self.faults else None
        if fault == "lost_request":
            raise ConnectionResetError("the connection dropped before the commit reached the database")
        if fault == "bug":
            raise ValueError("not a connection problem")
        await self.store.commit(commit)
        if fault == "lost_reply":
            raise ConnectionResetError("the connection dropped after the database committed")

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    s: TaskStore
    if request.param == "sqlite":
        s = SqliteTaskStore(tmp_path / "t.db")
    else:
        from parley.postgres import Postgres
        from parley.tasks.postgres_store import PostgresTaskStore

        s = PostgresTaskStore(Postgres(request.getfixturevalue("postgres_url")))
    await s.open()
    yield s
    await s.close()


def warnings() -> Throttled:
    return Throttled(logging.getLogger("test.commit_retry"), 10.0)


async def next_commit(store: TaskStore, *events: object) -> Commit:
    rec = await store.get("t1")
    assert rec is not None
    entries = [Entry(rec.seq + i, ev) for i, ev in enumerate(events, 1)]
    return Commit(task_id="t1", expected_seq=rec.seq, entries=entries,
                  snapshot=fold(rec.task, events), updated_at=2000.0)  # type: ignore[arg-type]


async def test_a_commit_whose_reply_was_lost_is_recognised_not_written_twice(store: TaskStore) -> None:
    await put(store, new_task(), message=key())
    faulty = Faulty(store)
    faulty.faults = ["lost_reply"]
    commit = await next_commit(store, status(S.WORKING), art("a1", "one"))
    await commit_with_retry(faulty, commit, budget=30, warnings=warnings())  # type: ignore[arg-type]
    log = await store.events_after("t1", 0)
    assert [e.seq for e in log] == [1, 2, 3]  # written once (a blind retry would be refused: SequenceConflict)
    assert faulty.commits == 1  # recognised by re-reading the log, not tried again


async def test_a_commit_that_never_arrived_is_written_by_the_retry(store: TaskStore) -> None:
    await put(store, new_task(), message=key())
    faulty = Faulty(store)
    faulty.faults = ["lost_request", "lost_request"]
    commit = await next_commit(store, status(S.WORKING))
    await commit_with_retry(faulty, commit, budget=30, warnings=warnings())  # type: ignore[arg-type]
    assert [e.seq for e in await store.events_after("t1", 0)] == [1, 2]
    assert faulty.commits == 3


async def test_a_commit_another_writer_beat_is_refused_not_taken_for_its_own(store: TaskStore) -> None:
    """The connection dropped before the commit arrived, and meanwhile another process appended at the same
    seq (it took the task over): the log's entries are not this commit's, so the retry is refused."""
    await put(store, new_task(), message=key())
    mine = await next_commit(store, status(S.WORKING, "mine"))
    await store.commit(await next_commit(store, status(S.WORKING, "theirs")))
    faulty = Faulty(store)
    faulty.faults = ["lost_request"]
    with pytest.raises(SequenceConflict):
        await commit_with_retry(faulty, mine, budget=30, warnings=warnings())  # type: ignore[arg-type]


async def test_past_the_budget_the_commit_gives_up_and_a_bug_is_not_retried(store: TaskStore) -> None:
    await put(store, new_task(), message=key())
    faulty = Faulty(store)
    faulty.faults = ["lost_request"] * 1000
    commit = await next_commit(store, status(S.WORKING))
    with pytest.raises(StoreUnreachable, match="could not be reached for 0.3 s"):
        await commit_with_retry(faulty, commit, budget=0.3, warnings=warnings())  # type: ignore[arg-type]
    assert 1 < faulty.commits < 1000
    faulty.faults, faulty.commits = ["bug"], 0
    with pytest.raises(ValueError):
        await commit_with_retry(faulty, commit, budget=30, warnings=warnings())  # type: ignore[arg-type]
    assert faulty.commits == 1
    assert [e.seq for e in await store.events_after("t1", 0)] == [1]
