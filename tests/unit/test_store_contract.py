"""The TaskStore contract (parley.tasks.store), run against every store: memory, SQLite and PostgreSQL.

A commit appends entries after an expected sequence number (compare-and-set) together with its
side effects (idempotency key, checkpoint, links, lease) and one change-feed row, atomically:
a refused commit leaves no trace of any part of it.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import os
import random
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from parley.protocol import models as m
from parley.tasks.log import Entry, apply, fold
from parley.tasks.log_packing import unpack_log_row
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.sqlite_store import SCHEMA_VERSION, SqliteTaskStore
from parley.tasks.store import (
    CHANGES_KEPT_SECONDS,
    SNAPSHOT_EVERY,
    Commit,
    DeliveryAttempt,
    DuplicateMessage,
    Lease,
    MessageKey,
    Retention,
    SequenceConflict,
    StoredPushConfig,
    StoreError,
    TaskLink,
    TaskRecord,
    TaskStore,
    encode_cursor,
    fingerprint,
    make_query,
    snapshot_phase,
    stores_snapshot,
)

S = m.TaskState


def msg(mid: str, text: str, role: m.Role = m.Role.USER, task_id: str = "t1") -> m.Message:
    return m.Message(message_id=mid, role=role, parts=[m.Part(text=text)], task_id=task_id, context_id="c1")


def status(state: m.TaskState, text: str | None = None, *, task_id: str = "t1",
           ts: str | None = None) -> m.TaskStatusUpdateEvent:
    message = msg(f"agent-{text}", text, m.Role.AGENT, task_id) if text is not None else None
    return m.TaskStatusUpdateEvent(task_id=task_id, context_id="c1",
                                   status=m.TaskStatus(state=state, message=message, timestamp=ts))


def art(aid: str, text: str, *, task_id: str = "t1") -> m.TaskArtifactUpdateEvent:
    return m.TaskArtifactUpdateEvent(task_id=task_id, context_id="c1",
                                     artifact=m.Artifact(artifact_id=aid, parts=[m.Part(text=text)]))


def new_task(task_id: str = "t1", *, context_id: str = "c1", state: m.TaskState = S.SUBMITTED,
             ts: str | None = "2025-01-01T00:00:00.000Z") -> m.Task:
    return m.Task(id=task_id, context_id=context_id, status=m.TaskStatus(state=state, timestamp=ts),
                  history=[msg("u1", "hello", task_id=task_id)])


def key(mid: str = "m-1", *, agent: str = "echo", owner: str = "alice", content: str = "hello") -> MessageKey:
    return MessageKey(agent, owner, mid, fingerprint(msg(mid, content)))


def record(task: m.Task, *, agent: str = "echo", owner: str = "alice", updated: float = 1000.0,
           created: float = 1000.0, parent: str | None = None) -> TaskRecord:
    return TaskRecord(task=task, agent_id=agent, owner=owner, seq=1, updated_at=updated, created_at=created,
                      parent_task_id=parent)


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres-lagging"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TaskStore]:
    s: TaskStore
    if request.param == "memory":
        s = MemoryTaskStore()
    elif request.param == "sqlite":
        s = SqliteTaskStore(tmp_path / "sub" / "t.db")
    else:
        from parley.postgres import Postgres
        from parley.tasks.postgres_store import PostgresTaskStore

        s = PostgresTaskStore(Postgres(request.getfixturevalue("postgres_url")),
                              lagging_snapshots=request.param == "postgres-lagging")
    await s.open()
    yield s
    await s.close()


async def put(store: TaskStore, task: m.Task, *, message: MessageKey | None = None, lease: Lease | None = None,
              **kw: object) -> TaskRecord:
    rec = record(task, **kw)  # type: ignore[arg-type]
    await store.create(rec, Entry(1, task), message or key(f"msg-{task.id}"), lease=lease)
    return rec


async def advance(store: TaskStore, task_id: str, *events: object, at: float = 2000.0, **effects: object) -> None:
    """Append `events` after the stored end of the log, with `effects` in the same commit."""
    rec = await store.get(task_id)
    assert rec is not None
    entries = [Entry(rec.seq + i, ev) for i, ev in enumerate(events, 1)]
    snapshot = fold(rec.task, events)  # type: ignore[arg-type]
    await store.commit(Commit(task_id=task_id, expected_seq=rec.seq, entries=entries, snapshot=snapshot,
                                     updated_at=at, **effects))  # type: ignore[arg-type]


def query(req: m.ListTasksRequest | None = None, *, agent: str = "echo", owner: str = "alice"):
    return make_query(agent, owner, req or m.ListTasksRequest())


async def listed_ids(store: TaskStore, page_size: int = 2) -> list[str]:
    """The ids ListTasks gives (echo, alice), page after page, in the order given."""
    seen: list[str] = []
    token = None
    while True:
        page = await store.list(query(m.ListTasksRequest(page_size=page_size, page_token=token)))
        seen += [r.task.id for r in page.records]
        token = encode_cursor(page.next_cursor) or None
        if token is None:
            return seen


# --- tasks and logs ------------------------------------------------------------------------------------------------


async def test_create_and_get(store: TaskStore) -> None:
    task = new_task()
    await put(store, task, updated=1234.5, created=1200.25, parent="p0")
    got = await store.get("t1")
    assert got is not None
    assert got.task == task
    assert (got.agent_id, got.owner, got.seq, got.updated_at, got.created_at, got.parent_task_id) == (
        "echo", "alice", 1, 1234.5, 1200.25, "p0")
    assert await store.get("nope") is None
    log = await store.events_after("t1", 0)
    assert [e.seq for e in log] == [1] and log[0].event == task


async def test_reads_scoped_by_agent_and_owner(store: TaskStore) -> None:
    await put(store, new_task(), agent="echo", owner="alice")
    assert (await store.get("t1", agent_id="echo", owner="alice")) is not None
    assert (await store.get("t1", owner="alice")) is not None
    assert await store.get("t1", owner="bob") is None
    assert await store.get("t1", agent_id="interviewer") is None
    assert await store.get("t1", agent_id="interviewer", owner="alice") is None


async def test_append_and_events_after(store: TaskStore) -> None:
    await put(store, new_task())
    events = [status(S.WORKING, ts="2025-01-01T00:00:01.000Z"), art("a1", "chunk"),
              status(S.INPUT_REQUIRED, "why?", ts="2025-01-01T00:00:02.000Z")]
    await advance(store, "t1", events[0], at=2000.0)
    await advance(store, "t1", *events[1:], at=2001.5)
    answer = msg("u2", "because")
    await advance(store, "t1", answer, at=2002.0)

    got = await store.get("t1")
    assert got is not None
    expected = fold(new_task(), [*events, answer])
    assert got.task == expected and got.seq == 5 and got.updated_at == 2002.0
    log = await store.events_after("t1", 0)
    assert [e.seq for e in log] == [1, 2, 3, 4, 5]
    assert [e.kind for e in log] == ["task", "status", "artifact", "status", "message"]
    assert [e.event for e in log[1:]] == [*events, answer]
    assert [e.seq for e in await store.events_after("t1", 3)] == [4, 5]
    assert await store.events_after("t1", 5) == []
    assert await store.events_after("unknown", 0) == []


async def test_the_committed_snapshot_is_what_get_returns_whatever_the_caller_does_next(store: TaskStore) -> None:
    """The engine folds into a new copy after a commit; what was committed stays as it was."""
    await put(store, new_task())
    rec = await store.get("t1")
    assert rec is not None
    working = fold(rec.task, [status(S.WORKING)])
    await store.append("t1", 1, [Entry(2, status(S.WORKING))], working, 5.0)
    later = fold(working, [art("a", "more")])  # folding on does not touch the committed snapshot
    assert later is not working and working.artifacts is None
    got = await store.get("t1")
    assert got is not None and got.task.artifacts is None and got.task.status.state is S.WORKING


def chunk(i: int, *, task_id: str = "t1") -> m.TaskArtifactUpdateEvent:
    """The i-th piece of a streamed answer: one artifact, appended to from the second piece on."""
    return m.TaskArtifactUpdateEvent(task_id=task_id, context_id="c1", append=i > 0,
                                     artifact=m.Artifact(artifact_id="answer", parts=[m.Part(text=f"w{i} ")]))


STREAMED = SNAPSHOT_EVERY * 2 + 5  # chunks: past two multiples of SNAPSHOT_EVERY, and a lagging tail after them


async def test_a_streamed_answer_reads_whole_after_every_commit(store: TaskStore) -> None:
    """An agent streaming its answer commits one artifact update at a time; stores keep the snapshot of such
    commits only now and then (store.stores_snapshot). GetTask answers with the task's current state and
    artifacts all the same (A2A 1.0 section 3.1.3), and ListTasks with the same task, after every commit; so
    does the status that ends the answer, with every chunk in the one text part they make."""
    await put(store, new_task(state=S.WORKING))
    got = await store.get("t1")
    assert got is not None
    expected = got.task
    for i in range(STREAMED):
        expected = fold(expected, [chunk(i)])
        await advance(store, "t1", chunk(i))
        got = await store.get("t1")
        assert got is not None and (got.task, got.seq) == (expected, i + 2), i
        if i % 7 == 0:
            assert [r.task for r in (await store.list(query())).records] == [expected], i
    await advance(store, "t1", status(S.COMPLETED))
    got = await store.get("t1")
    assert got is not None and got.task == fold(expected, [status(S.COMPLETED)]) and got.seq == STREAMED + 2
    assert got.task.artifacts is not None and got.task.artifacts[0].parts == [
        m.Part(text="".join(f"w{i} " for i in range(STREAMED)))]
    assert [e.seq for e in await store.events_after("t1", 0)] == list(range(1, STREAMED + 3))


async def test_an_orphan_claimed_mid_answer_comes_with_every_chunk(store: TaskStore) -> None:
    """A process that takes over a task left working (its run's process died mid-answer) gets the task as far
    as it was committed, every chunk of it, to resume or fail it from there."""
    await put(store, new_task(state=S.WORKING), lease=Lease("A", 10.0))
    got = await store.get("t1")
    assert got is not None
    expected = fold(got.task, [chunk(i) for i in range(SNAPSHOT_EVERY + 3)])
    for i in range(SNAPSHOT_EVERY + 3):
        await advance(store, "t1", chunk(i))
    claimed = await store.claim_orphans("B", now=50.0, expires_at=80.0)
    assert [(r.task, r.seq) for r in claimed] == [(expected, SNAPSHOT_EVERY + 4)]


def test_which_commits_store_their_snapshot() -> None:
    """store.stores_snapshot: a creation, anything but artifact updates, or entries reaching the task's next
    rewrite point (every SNAPSHOT_EVERY entries, at its own snapshot_phase) store the snapshot; artifact updates
    between two rewrite points, or no entries at all (a lease or a checkpoint alone), leave the stored one as it
    was."""
    task = new_task(state=S.WORKING)

    def commit(after: int, *events: object, **kw: object) -> Commit:
        entries = [Entry(after + i, ev) for i, ev in enumerate(events, 1)]  # type: ignore[arg-type]
        return Commit(task_id="t1", expected_seq=after, entries=entries, snapshot=task, updated_at=1.0,
                      **kw)  # type: ignore[arg-type]

    n = SNAPSHOT_EVERY
    b = 2 * n - snapshot_phase("t1")  # a rewrite point of t1's (n + 1 to 2n)
    assert stores_snapshot(commit(0, task, record=record(task)))
    assert not stores_snapshot(commit(b - n, chunk(0)))
    assert not stores_snapshot(commit(b - 3, chunk(0), chunk(1)))  # up to b - 1
    assert stores_snapshot(commit(b - 2, chunk(0), chunk(1)))  # reaches b
    assert stores_snapshot(commit(b - 1, chunk(0)))
    assert not stores_snapshot(commit(b, chunk(0)))
    assert stores_snapshot(commit(b + n - 1, chunk(0), chunk(1)))  # passes the next one
    assert stores_snapshot(commit(5, chunk(0), status(S.WORKING)))
    assert stores_snapshot(commit(5, msg("m2", "more")))
    assert not stores_snapshot(commit(5, lease=Lease("A", 9.0)))


def test_tasks_streaming_in_step_rewrite_their_snapshots_at_different_entries() -> None:
    """Answers that start together stream in step. With one rewrite point for all, 1,000 of them rewrote their
    snapshots (and the SQLite store moved their tails into the log) within 200 ms, holding every stream's tokens
    back up to half a second (bench/RESULTS.md, 2026-11-28 evening). Each task rewrites at its own phase: the
    first rewrites of 1,000 tasks spread over the whole stretch of SNAPSHOT_EVERY entries, and none lets its
    stored snapshot lag by SNAPSHOT_EVERY entries or more."""
    n = SNAPSHOT_EVERY
    task = new_task(state=S.WORKING)
    firsts: list[int] = []
    for i in range(1000):
        task_id = str(uuid.UUID(int=random.Random(i).getrandbits(128), version=4))
        stored_at, rewrites = 1, []
        for seq in range(2, 4 * n):  # one token a commit, as a model streams; the engine says where it stands
            c = Commit(task_id=task_id, expected_seq=seq - 1, entries=[Entry(seq, chunk(seq))], snapshot=task,
                       updated_at=1.0, snapshot_at=stored_at)
            if stores_snapshot(c):
                rewrites.append(seq)
                stored_at = seq
            assert seq - stored_at < n, (task_id, seq, stored_at)
        assert all(b - a == n for a, b in itertools.pairwise(rewrites)), rewrites
        firsts.append(rewrites[0])
    assert len(set(firsts)) == n  # every entry of the stretch is some task's first rewrite point
    assert max(collections.Counter(firsts).values()) < 40  # about 1,000 / 64 each, not all at one


async def stored_snapshot(store: TaskStore, task_id: str) -> tuple[bytes, int | None]:
    """The snapshot bytes a durable store holds for a task, and the seq it lags at (None: it is whole)."""
    if isinstance(store, SqliteTaskStore):
        row = store._db.execute("SELECT snapshot, snapshot_seq, seq FROM tasks WHERE id=?", (task_id,)).fetchone()
        tail_end = store._seq(task_id)  # past the row's seq: a tail of artifact updates not in the row yet
        return bytes(row[0]), row[1] if row[1] is not None or tail_end == row[2] else row[2]
    else:
        row = await store.pool.fetchrow("SELECT snapshot, snapshot_seq FROM tasks WHERE id=$1", task_id)  # type: ignore[attr-defined]
    return bytes(row[0]), row[1]


@pytest.mark.parametrize("store", ["sqlite", "postgres-lagging"], indirect=True)
async def test_chunks_of_an_answer_do_not_rewrite_the_stored_snapshot(store: TaskStore) -> None:
    """Rewriting the whole task for every chunk made a streamed answer's writes grow with the square of its
    length (bench/RESULTS.md). The durable stores write the snapshot when a commit reaches the task's next rewrite
    point (every SNAPSHOT_EVERY entries, at its snapshot_phase), and whenever anything but artifact updates is
    appended (a status: whole again)."""
    await put(store, new_task(state=S.WORKING))
    rewrites, previous = [], (await stored_snapshot(store, "t1"))[0]
    for i in range(STREAMED):
        await advance(store, "t1", chunk(i))
        current, lags_at = await stored_snapshot(store, "t1")
        seq = i + 2
        if current != previous:
            rewrites.append(seq)
            assert lags_at is None, seq
        else:
            assert lags_at is not None and lags_at < seq and seq - lags_at < SNAPSHOT_EVERY, (seq, lags_at)
        previous = current
    phase = snapshot_phase("t1")
    assert rewrites == [n for n in range(2, STREAMED + 2) if (n + phase) % SNAPSHOT_EVERY == 0]
    await advance(store, "t1", status(S.COMPLETED))
    current, lags_at = await stored_snapshot(store, "t1")
    got = await store.get("t1")
    assert lags_at is None and got is not None and msgspec.json.decode(current, type=m.Task) == got.task


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
async def test_postgres_stores_every_snapshot_whole_unless_told(store: TaskStore) -> None:
    """By default the PostgreSQL store writes every commit's snapshot whole, as releases before its tasks
    schema 4 did and still read it: during a rolling upgrade an older replica may read or take over any task."""
    await put(store, new_task(state=S.WORKING))
    for i in range(5):
        await advance(store, "t1", chunk(i))
        current, lags_at = await stored_snapshot(store, "t1")
        got = await store.get("t1")
        assert lags_at is None and got is not None and msgspec.json.decode(current, type=m.Task) == got.task


async def test_logs_are_per_task(store: TaskStore) -> None:
    await put(store, new_task("t1"))
    await put(store, new_task("t2"))
    await advance(store, "t2", status(S.WORKING, task_id="t2"))
    assert [e.seq for e in await store.events_after("t1", 0)] == [1]
    assert [e.seq for e in await store.events_after("t2", 0)] == [1, 2]


# --- compare-and-set -----------------------------------------------------------------------------------------------


async def test_append_with_a_stale_sequence_number_is_a_conflict_and_writes_nothing(store: TaskStore) -> None:
    await put(store, new_task())
    await advance(store, "t1", status(S.WORKING))
    before = await store.get("t1")
    changes = await store.changes_after(0)
    # A second writer that read the task at seq 1 tries to append its own entry 2.
    stale = fold(new_task(), [status(S.CANCELED)])
    with pytest.raises(SequenceConflict) as info:
        await store.commit(Commit(task_id="t1", expected_seq=1, entries=[Entry(2, status(S.CANCELED))],
                                  snapshot=stale, updated_at=9.0, checkpoint={"x": 1},
                                  links=[TaskLink("t1", "http://x/a2a/y", "c9", "y", 1.0)], release_lease=True,
                                  message=key("m-late")))
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert await store.get("t1") == before
    assert [e.event for e in await store.events_after("t1", 1)] == [status(S.WORKING)]
    assert await store.get_checkpoint("t1") is None
    assert await store.links("t1") == []
    assert await store.find_message(key("m-late")) is None
    assert await store.changes_after(0) == changes


async def test_concurrent_commits_each_succeed_or_fail_alone(store: TaskStore) -> None:
    """Commits made at once (the SQLite store writes them in one transaction) are each written or refused on
    their own: a stale one and a duplicate key leave no trace, the others are all there."""
    import asyncio

    for i in range(3):
        await put(store, new_task(f"c{i}"))
    await put(store, new_task("dup-owner"), message=key("m-taken"))
    stale = fold(new_task("c1"), [status(S.CANCELED, task_id="c1")])
    dup = new_task("c9")
    results = await asyncio.gather(
        advance(store, "c0", status(S.WORKING, task_id="c0"), at=10.0),
        store.commit(Commit(task_id="c1", expected_seq=7, entries=[Entry(8, status(S.CANCELED, task_id="c1"))],
                            snapshot=stale, updated_at=11.0, checkpoint={"x": 1})),
        store.create(record(dup), Entry(1, dup), key("m-taken")),
        advance(store, "c2", status(S.COMPLETED, task_id="c2"), at=12.0, checkpoint={"step": 2}),
        return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["NoneType", "SequenceConflict", "DuplicateMessage", "NoneType"]
    assert (await store.get("c0")).task.status.state is S.WORKING  # type: ignore[union-attr]
    assert (await store.get("c1")).seq == 1 and await store.get_checkpoint("c1") is None  # type: ignore[union-attr]
    assert await store.get("c9") is None and await store.find_message(key("m-taken")) == "dup-owner"
    assert (await store.get("c2")).task.status.state is S.COMPLETED  # type: ignore[union-attr]
    assert await store.get_checkpoint("c2") == {"step": 2}
    assert sorted((c.task_id, c.seq) for c in await store.changes_after(0) if c.seq > 1) == [("c0", 2), ("c2", 2)]


async def test_appending_to_a_task_that_does_not_exist_is_a_conflict(store: TaskStore) -> None:
    with pytest.raises(SequenceConflict) as info:
        await store.append("ghost", 1, [Entry(2, status(S.WORKING, task_id="ghost"))], new_task("ghost"), 1.0)
    assert info.value.actual is None
    assert await store.get("ghost") is None and await store.events_after("ghost", 0) == []


async def test_creating_a_task_twice_is_a_conflict(store: TaskStore) -> None:
    await put(store, new_task(), message=key("m-1"))
    with pytest.raises(SequenceConflict):
        await put(store, new_task(state=S.WORKING), message=key("m-2"))
    got = await store.get("t1")
    assert got is not None and got.task.status.state is S.SUBMITTED
    assert await store.find_message(key("m-2")) is None


async def test_a_commit_with_a_gap_in_its_sequence_numbers_is_refused(store: TaskStore) -> None:
    await put(store, new_task())
    with pytest.raises(ValueError, match="does not follow"):
        await store.commit(Commit(task_id="t1", expected_seq=1, entries=[Entry(3, status(S.WORKING))],
                                  snapshot=new_task(), updated_at=1.0))
    assert [e.seq for e in await store.events_after("t1", 0)] == [1]


# --- idempotency keys ----------------------------------------------------------------------------------------------


async def test_a_message_key_is_insert_if_absent(store: TaskStore) -> None:
    await put(store, new_task("t1"), message=key("m-1"))
    assert await store.find_message(key("m-1")) == "t1"
    with pytest.raises(DuplicateMessage) as info:
        await put(store, new_task("t2"), message=key("m-1"))
    assert info.value.task_id == "t1"
    assert await store.get("t2") is None and await store.events_after("t2", 0) == []
    assert [c.task_id for c in await store.changes_after(0)] == ["t1"]


async def test_message_keys_are_scoped_and_content_aware(store: TaskStore) -> None:
    await put(store, new_task("t1"), message=key("m-1"))
    assert await store.find_message(key("m-1", owner="bob")) is None
    assert await store.find_message(key("m-1", agent="interviewer")) is None
    assert await store.find_message(key("m-1", content="something else")) is None  # not a retry
    await put(store, new_task("t2"), message=key("m-1", content="something else"))
    assert await store.find_message(key("m-1", content="something else")) == "t2"
    assert await store.find_message(key("m-1")) == "t1"


async def test_a_continuation_records_its_message_key_with_its_entries(store: TaskStore) -> None:
    await put(store, new_task(state=S.INPUT_REQUIRED))
    answer = msg("m-2", "because")
    await advance(store, "t1", answer, status(S.WORKING), message=key("m-2", content="because"))
    assert await store.find_message(key("m-2", content="because")) == "t1"
    with pytest.raises(DuplicateMessage):  # the same answer again, by another writer
        await advance(store, "t1", answer, status(S.WORKING), message=key("m-2", content="because"))
    assert [e.seq for e in await store.events_after("t1", 0)] == [1, 2, 3]


def test_fingerprints_tell_messages_apart() -> None:
    a = msg("m-1", "hello")
    assert fingerprint(a) == fingerprint(msg("m-1", "hello"))
    assert fingerprint(a) != fingerprint(msg("m-1", "hello!"))
    assert fingerprint(a) != fingerprint(msg("m-1", "hello", task_id="t2"))


# --- checkpoints and links -------------------------------------------------------------------------------------------


async def test_checkpoints_are_written_and_dropped_with_commits(store: TaskStore) -> None:
    await put(store, new_task())
    assert await store.get_checkpoint("t1") is None
    await advance(store, "t1", status(S.WORKING), checkpoint={"step": 1, "nested": {"a": [1, 2]}})
    assert await store.get_checkpoint("t1") == {"step": 1, "nested": {"a": [1, 2]}}
    await advance(store, "t1", art("a", "x"), checkpoint={"step": 2})
    assert await store.get_checkpoint("t1") == {"step": 2}
    await advance(store, "t1", art("a", "y"))  # a commit without a checkpoint keeps the last one
    assert await store.get_checkpoint("t1") == {"step": 2}
    await advance(store, "t1", status(S.COMPLETED), drop_checkpoint=True)
    assert await store.get_checkpoint("t1") is None


async def test_links_are_kept_once_and_in_order(store: TaskStore) -> None:
    await put(store, new_task("p"))
    await put(store, new_task("q"))
    await advance(store, "p", status(S.WORKING, task_id="p"), links=[
        TaskLink("p", "http://a/a2a/x", "c1", "x", 1.0), TaskLink("p", "http://b/a2a/y", "c2", None, 2.0)])
    await advance(store, "p", art("z", "x", task_id="p"),
                  links=[TaskLink("p", "http://a/a2a/x", "c1", "x", 3.0)])  # announced again on a later turn
    await advance(store, "q", status(S.WORKING, task_id="q"), links=[TaskLink("q", "http://a/a2a/x", "c3", "x", 1.0)])
    links = await store.links("p")
    assert [(k.child_url, k.child_task_id, k.agent) for k in links] == [
        ("http://a/a2a/x", "c1", "x"), ("http://b/a2a/y", "c2", None)]
    assert all(k.parent_task_id == "p" and k.created_at > 0 for k in links)
    assert await store.links("nope") == []


# --- leases --------------------------------------------------------------------------------------------------------


async def test_a_lease_is_taken_renewed_and_released_with_commits(store: TaskStore) -> None:
    await put(store, new_task(), lease=Lease("A", 100.0))
    assert await store.lease("t1") == Lease("A", 100.0)
    assert await store.renew_leases("A", ["t1", "nope"], 200.0) == {"t1"}
    assert await store.lease("t1") == Lease("A", 200.0)
    assert await store.renew_leases("B", ["t1"], 900.0) == set()  # not B's
    assert await store.lease("t1") == Lease("A", 200.0)
    await advance(store, "t1", status(S.INPUT_REQUIRED, "?"), release_lease=True)  # settled: nobody runs it
    assert await store.lease("t1") is None
    await advance(store, "t1", msg("u2", "x"), status(S.WORKING), lease=Lease("B", 300.0))  # continued by B
    assert await store.lease("t1") == Lease("B", 300.0)
    await store.release_leases("A", ["t1"])  # A has nothing to give back
    assert await store.lease("t1") == Lease("B", 300.0)
    await store.release_leases("B", ["t1"])
    assert await store.lease("t1") is None


async def test_only_orphaned_unfinished_tasks_are_claimed(store: TaskStore) -> None:
    await put(store, new_task("live", state=S.WORKING), lease=Lease("A", 100.0))
    await put(store, new_task("expired", state=S.WORKING), lease=Lease("A", 10.0))
    await put(store, new_task("unleased", state=S.SUBMITTED))
    await put(store, new_task("done", state=S.COMPLETED), lease=Lease("A", 10.0))
    await put(store, new_task("asking", state=S.INPUT_REQUIRED))
    claimed = await store.claim_orphans("B", now=50.0, expires_at=80.0)
    assert sorted(r.task.id for r in claimed) == ["expired", "unleased"]
    assert await store.lease("expired") == Lease("B", 80.0) and await store.lease("unleased") == Lease("B", 80.0)
    assert await store.lease("live") == Lease("A", 100.0)
    assert await store.claim_orphans("C", now=60.0, expires_at=90.0) == []  # B's leases are live now
    # On a store no other process writes, every lease but ours belongs to a dead process.
    taken = await store.claim_orphans("C", now=60.0, expires_at=90.0, any_other_holder=True)
    assert sorted(r.task.id for r in taken) == ["expired", "live", "unleased"]
    assert {(await store.lease(t)) for t in ("expired", "live", "unleased")} == {Lease("C", 90.0)}
    assert await store.claim_orphans("C", now=60.0, expires_at=95.0, any_other_holder=True) == []


# --- the change feed -------------------------------------------------------------------------------------------------


async def test_every_commit_adds_one_change_in_global_order(store: TaskStore) -> None:
    p1 = await put(store, new_task("a"), owner="alice")
    pos_a = (await store.changes_after(0))[-1].position
    await put(store, new_task("b"), agent="interviewer", owner="bob")
    await advance(store, "a", status(S.WORKING, task_id="a"), art("x", "y", task_id="a"), at=3000.0)
    await store.renew_leases("nobody", ["a"], 1.0)  # lease bookkeeping is not a change of the task
    changes = await store.changes_after(0)
    pos = changes[-1].position
    assert [(c.task_id, c.agent_id, c.owner, c.seq, c.state) for c in changes] == [
        ("a", "echo", "alice", 1, S.SUBMITTED), ("b", "interviewer", "bob", 1, S.SUBMITTED),
        ("a", "echo", "alice", 3, S.WORKING)]
    assert [c.position for c in changes] == sorted({c.position for c in changes})
    assert changes[-1].position == pos and changes[-1].at == 3000.0
    assert [c.task_id for c in await store.changes_after(pos_a)] == ["b", "a"]
    assert [c.task_id for c in await store.changes_after(pos_a, limit=1)] == ["b"]
    assert await store.changes_after(pos) == []
    assert p1.task.id == "a"


# --- ListTasks -------------------------------------------------------------------------------------------------------


async def test_list_filters(store: TaskStore) -> None:
    await put(store, new_task("a", context_id="c1", state=S.COMPLETED), updated=10)
    await put(store, new_task("b", context_id="c2", state=S.WORKING), updated=20)
    await put(store, new_task("c", context_id="c1", state=S.WORKING), updated=30)
    await put(store, new_task("d", context_id="c1", state=S.WORKING), owner="bob", updated=40)
    await put(store, new_task("e", context_id="c1", state=S.WORKING), agent="interviewer", updated=50)

    page = await store.list(query())
    assert [r.task.id for r in page.records] == ["c", "b", "a"]  # newest update first
    assert page.total == 3 and page.next_cursor is None
    page = await store.list(query(m.ListTasksRequest(context_id="c1")))
    assert [r.task.id for r in page.records] == ["c", "a"] and page.total == 2
    page = await store.list(query(m.ListTasksRequest(status=S.WORKING)))
    assert [r.task.id for r in page.records] == ["c", "b"]
    page = await store.list(query(m.ListTasksRequest(context_id="c1", status=S.COMPLETED)))
    assert [r.task.id for r in page.records] == ["a"]
    page = await store.list(query(m.ListTasksRequest(status=S.REJECTED)))
    assert page.records == [] and page.total == 0 and page.next_cursor is None
    assert [r.task.id for r in (await store.list(query(owner="bob"))).records] == ["d"]
    assert [r.task.id for r in (await store.list(query(agent="interviewer"))).records] == ["e"]
    assert (await store.list(query(owner="carol"))).records == []


async def test_list_sees_appended_state(store: TaskStore) -> None:
    await put(store, new_task("a", state=S.WORKING), updated=10)
    await advance(store, "a", status(S.COMPLETED, task_id="a", ts="2025-01-02T00:00:00.000Z"), at=99.0)
    assert [r.task.id for r in (await store.list(query(m.ListTasksRequest(status=S.COMPLETED)))).records] == ["a"]
    assert (await store.list(query(m.ListTasksRequest(status=S.WORKING)))).records == []
    page = await store.list(query(m.ListTasksRequest(status_timestamp_after="2025-01-02T00:00:00Z")))
    assert [r.task.id for r in page.records] == ["a"]
    assert page.records[0].updated_at == 99.0


@pytest.mark.parametrize("page_size", [1, 2, 3, 7, 100])
async def test_pagination_has_no_duplicates_or_gaps(store: TaskStore, page_size: int) -> None:
    # Many tasks share one updated_at: the task id breaks ties, so pages neither repeat nor skip.
    stamps = [1717171717.123456] * 6 + [1717171718.5, 1717171716.25, 1717171716.25, 0.1 + 0.2]
    for i, ts in enumerate(stamps):
        await put(store, new_task(f"task-{i:02d}"), updated=ts)
    await put(store, new_task("other-owner"), owner="bob", updated=1717171717.123456)
    expected = [f"task-{i:02d}" for i in sorted(range(len(stamps)), key=lambda i: (stamps[i], f"task-{i:02d}"),
                                                    reverse=True)]
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await store.list(query(m.ListTasksRequest(page_size=page_size, page_token=token or None)))
        pages += 1
        assert page.total == len(stamps)
        assert 0 < len(page.records) <= page_size
        seen.extend(r.task.id for r in page.records)
        token = encode_cursor(page.next_cursor)
        if not token:
            break
        assert pages <= len(stamps)
    assert seen == expected
    assert pages == -(-len(stamps) // page_size)


async def test_exact_page_has_no_next_cursor(store: TaskStore) -> None:
    for i in range(4):
        await put(store, new_task(f"t{i}"), updated=float(i))
    page = await store.list(query(m.ListTasksRequest(page_size=4)))
    assert len(page.records) == 4 and page.next_cursor is None
    page = await store.list(query(m.ListTasksRequest(page_size=3)))
    assert page.next_cursor == (1.0, "t1")


async def test_status_timestamp_after_is_inclusive(store: TaskStore) -> None:
    await put(store, new_task("t0", ts="2025-01-01T00:00:00.000Z"), updated=1)
    await put(store, new_task("t1", ts="2025-01-01T00:00:01.000Z"), updated=2)
    await put(store, new_task("t2", ts="2025-01-01T00:00:02.000Z"), updated=3)
    await put(store, new_task("tn", ts=None), updated=4)

    async def after(value: str) -> list[str]:
        return sorted(r.task.id for r in (await store.list(query(m.ListTasksRequest(status_timestamp_after=value))))
                      .records)

    assert await after("2025-01-01T00:00:01.000Z") == ["t1", "t2"]
    assert await after("2025-01-01T01:00:01+01:00") == ["t1", "t2"]
    assert await after("2025-01-01T00:00:01.001Z") == ["t2"]
    assert await after("2025-01-01T00:00:03Z") == []


# --- push configs ----------------------------------------------------------------------------------------------------


async def test_push_config_crud(store: TaskStore) -> None:
    cfg1 = m.TaskPushNotificationConfig(url="https://a", task_id="t1", id="p1", token="tok",
                                        authentication=m.AuthenticationInfo(scheme="Bearer", credentials="c"))
    cfg2 = m.TaskPushNotificationConfig(url="https://b", task_id="t1", id="p2")
    other = m.TaskPushNotificationConfig(url="https://c", task_id="t2", id="p1")
    for cfg in (cfg1, cfg2, other):
        await store.put_push_config(cfg)
    assert await store.get_push_config("t1", "p1") == cfg1
    assert await store.get_push_config("t2", "p1") == other
    assert await store.get_push_config("t1", "nope") is None
    assert sorted(await store.list_push_configs("t1"), key=lambda c: c.id) == [cfg1, cfg2]
    replaced = m.TaskPushNotificationConfig(url="https://a2", task_id="t1", id="p1")
    await store.put_push_config(replaced)
    assert await store.get_push_config("t1", "p1") == replaced
    assert await store.delete_push_config("t1", "p1") is True
    assert await store.delete_push_config("t1", "p1") is False
    assert await store.list_push_configs("t1") == [cfg2]


# --- the push outbox: filled in the commit that appends the entries ------------------------------------------


def hook(config_id: str, *, task_id: str = "t1", artifacts: bool = False, version: str = "1.0") -> StoredPushConfig:
    return StoredPushConfig(m.TaskPushNotificationConfig(url=f"https://hooks.example.com/{config_id}",
                                                         task_id=task_id, id=config_id),
                            version=version, artifacts=artifacts, created_at=1.0)


async def test_outbox_rows_come_with_the_commit_that_appends_status_entries(store: TaskStore) -> None:
    """A status update of a task with two webhooks enqueues one notification for each, in the same commit;
    an artifact update only for the config that asks for artifacts; the creation entry for none."""
    await put(store, new_task())
    await advance(store, "t1", status(S.WORKING), push_configs=[hook("a"), hook("b", artifacts=True)])
    await advance(store, "t1", art("x", "chunk"), status(S.COMPLETED))
    notes, attempts = await store.push_log("t1")
    assert [(n.config_id, n.seq, n.kind, n.state, n.attempts) for n in notes] == [
        ("a", 2, "status", "pending", 0), ("b", 2, "status", "pending", 0),
        ("b", 3, "artifact", "pending", 0),
        ("a", 4, "status", "pending", 0), ("b", 4, "status", "pending", 0)]
    assert attempts == []
    assert (await store.push_target("t1", "b")).artifacts is True  # type: ignore[union-attr]
    assert [c.id for c in await store.list_push_configs("t1")] == ["a", "b"]


async def test_the_first_event_after_the_task_is_stamped_once(store: TaskStore) -> None:
    """`first_event_at` is the time of the commit that wrote the task's first event after the Task itself (seq 2,
    the first a stream shows after the Task: A2A 1.0 section 3.1.2), set once: later commits leave it. A task
    created with its first events (one pass) has it from its creation; a task with only the Task has none."""
    await put(store, new_task("t1"), created=1000.0)
    assert (await store.get("t1")).first_event_at is None  # type: ignore[union-attr]
    await advance(store, "t1", status(S.WORKING, task_id="t1"), at=1000.25)
    await advance(store, "t1", art("a", "x", task_id="t1"), at=1001.0)
    await advance(store, "t1", status(S.COMPLETED, task_id="t1"), at=1002.0)
    got = await store.get("t1")
    assert got is not None and got.first_event_at == 1000.25 and got.created_at == 1000.0
    t2 = new_task("t2")
    await store.commit(Commit(task_id="t2", expected_seq=0, entries=[Entry(1, t2), Entry(2, status(S.WORKING,
                       task_id="t2"))], snapshot=fold(t2, [status(S.WORKING, task_id="t2")]), updated_at=1003.5,
                       record=record(t2, created=1003.0), message=key("msg-t2")))
    listed = {r.task.id: r.first_event_at for r in (await store.list(query())).records}
    assert listed == {"t1": 1000.25, "t2": 1003.5}


async def test_a_first_event_that_is_an_artifact_update_is_stamped_too(store: TaskStore) -> None:
    """An agent that answers with an artifact before any status (seq 2 an artifact update): that commit stamps
    `first_event_at` as well, though it is a streamed token's commit (SQLite writes those to its tail)."""
    await put(store, new_task("t1"), created=1000.0)
    await advance(store, "t1", art("a", "x", task_id="t1"), at=1000.5)
    await advance(store, "t1", art("a", "y", task_id="t1"), at=1000.75)
    got = await store.get("t1")
    assert got is not None and got.first_event_at == 1000.5


async def test_recent_attempts_are_the_agents_newest_since_a_time(store: TaskStore) -> None:
    """The delivery attempts of one agent's tasks at or after `since`, newest first, at most `limit`: the
    dashboard's push chart (another agent's attempts and older ones are not among them)."""
    await put(store, new_task("t1"))
    await put(store, new_task("t2"), agent="other")
    await advance(store, "t1", status(S.WORKING, task_id="t1"), push_configs=[hook("a", task_id="t1")])
    await advance(store, "t2", status(S.WORKING, task_id="t2"), push_configs=[hook("b", task_id="t2")])
    mine = (await store.push_log("t1"))[0][0]
    theirs = (await store.push_log("t2"))[0][0]
    for attempt, at, code, outcome in [(1, 90.0, 500, "retry"), (2, 100.0, 500, "retry"), (3, 110.0, 200, "delivered")]:
        mine.attempts = attempt
        mine.state = "delivered" if outcome == "delivered" else "pending"
        await store.record_attempt(DeliveryAttempt(mine.id, attempt, at, code, None, 0.01, outcome), mine)
    theirs.attempts, theirs.state = 1, "disabled"
    await store.record_attempt(DeliveryAttempt(theirs.id, 1, 105.0, 410, None, 0.01, "disabled"), theirs)
    got = await store.recent_attempts("echo", since=100.0, limit=10)
    assert [(a.attempt, a.at, a.status, a.outcome) for a in got] == [(3, 110.0, 200, "delivered"),
                                                                     (2, 100.0, 500, "retry")]
    assert [a.attempt for a in await store.recent_attempts("echo", since=0.0, limit=2)] == [3, 2]
    assert [a.outcome for a in await store.recent_attempts("other", since=0.0, limit=10)] == ["disabled"]


async def test_may_notify_names_the_tasks_with_webhooks(store: TaskStore) -> None:
    """A commit of a task with a webhook may queue notifications (the push dispatcher is woken for it); on a
    store only this process writes, a task without one may not (its commits never wake the dispatcher)."""
    await put(store, new_task("t1"))
    await put(store, new_task("t2"))
    await put(store, new_task("t3"))
    await store.put_push_config(hook("a", task_id="t1"))
    await advance(store, "t2", status(S.WORKING), push_configs=[hook("b", task_id="t2")])
    assert store.may_notify("t1") and store.may_notify("t2")
    if store.exclusive:
        assert not store.may_notify("t3")
    if isinstance(store, SqliteTaskStore):  # remembered across a restart
        path = store.path
        await store.close()
        reopened = SqliteTaskStore(path)
        try:
            assert reopened.may_notify("t1") and reopened.may_notify("t2") and not reopened.may_notify("t3")
        finally:
            await reopened.close()


async def test_a_refused_commit_enqueues_nothing(store: TaskStore) -> None:
    await put(store, new_task())
    await store.put_push_config(hook("a"))
    with pytest.raises(SequenceConflict):
        await store.commit(Commit(task_id="t1", expected_seq=5, entries=[Entry(6, status(S.WORKING))],
                                  snapshot=new_task(), updated_at=3.0))
    assert (await store.push_log("t1"))[0] == []


async def test_due_notifications_keep_each_webhook_in_order(store: TaskStore) -> None:
    """Only the oldest pending notification of a (task, webhook) lane is due; lanes in flight are skipped;
    a retried one waits for its next_at, and its successors wait for it."""
    await put(store, new_task())
    await advance(store, "t1", status(S.WORKING), push_configs=[hook("a"), hook("b")])
    await advance(store, "t1", status(S.COMPLETED))
    due = await store.due_notifications(now=1e12, limit=10, busy=set())
    assert [(n.config_id, n.seq) for n in due] == [("a", 2), ("b", 2)]
    assert [(n.config_id, n.seq) for n in await store.due_notifications(1e12, 10, {("t1", "a")})] == [("b", 2)]
    first = due[0]
    retry_at = 5e12
    first.attempts, first.next_at, first.last_status, first.last_error = 1, retry_at, 503, "HTTP 503"
    await store.record_attempt(DeliveryAttempt(first.id, 1, 10.0, 503, "HTTP 503", 0.1, "retry", retry_at), first)
    assert [(n.config_id, n.seq) for n in await store.due_notifications(1e12, 10, set())] == [("b", 2)]
    # What the dispatcher waits for: the retried head of lane a, not the row queued behind it (due long ago),
    # and nothing of lane b while it is in flight.
    assert await store.next_notification_at({("t1", "b")}) == retry_at
    assert await store.next_notification_at({("t1", "a"), ("t1", "b")}) is None
    assert [(n.config_id, n.seq, n.attempts) for n in await store.due_notifications(retry_at, 10, set())] == [
        ("b", 2, 0), ("a", 2, 1)]  # the longest-due first
    first.attempts, first.state, first.done_at = 2, "delivered", 11.0
    await store.record_attempt(DeliveryAttempt(first.id, 2, 11.0, 200, None, 0.1, "delivered"), first)
    assert [(n.config_id, n.seq) for n in await store.due_notifications(retry_at, 10, {("t1", "b")})] == [("a", 3)]
    notes, attempts = await store.push_log("t1")
    assert [(a.notification_id, a.attempt, a.status, a.outcome) for a in attempts] == [
        (first.id, 1, 503, "retry"), (first.id, 2, 200, "delivered")]
    assert notes[0].state == "delivered" and notes[0].attempts == 2
    assert await store.next_notification_at(set()) is not None


async def test_due_notifications_skip_the_owners_asked(store: TaskStore) -> None:
    """The push dispatcher's fair share per owner (docs/push.md, "Fair between owners"): the lanes of the tasks of
    an owner in `skip_owners` are neither due nor waited for; the other owners' are."""
    await put(store, new_task("t1"), owner="mallory")
    await put(store, new_task("t2"), owner="alice")
    await advance(store, "t1", status(S.WORKING, task_id="t1"), push_configs=[hook("a", task_id="t1")])
    await advance(store, "t2", status(S.WORKING, task_id="t2"), push_configs=[hook("b", task_id="t2")])
    everyone = await store.due_notifications(1e12, 10, set())
    assert sorted(n.task_id for n in everyone) == ["t1", "t2"]
    for n in everyone:  # handed out, as a dispatcher would have them (PostgreSQL claims them)
        n.next_at = 3e12
        await store.record_attempt(DeliveryAttempt(n.id, 1, 10.0, 503, "HTTP 503", 0.1, "retry", 3e12), n)
    assert [n.task_id for n in await store.due_notifications(4e12, 10, set(), {"mallory"})] == ["t2"]
    assert [n.task_id for n in await store.due_notifications(4e12, 10, set(), {"alice"})] == ["t1"]
    assert await store.due_notifications(4e12, 10, set(), {"alice", "mallory"}) == []
    assert await store.next_notification_at(set(), {"alice", "mallory"}) is None
    assert await store.next_notification_at(set(), {"mallory"}) == 3e12


async def test_disabled_and_deleted_configs_stop_their_notifications(store: TaskStore) -> None:
    """410 Gone disables a webhook (pending rows become `disabled`, later entries enqueue nothing for it);
    deleting a config drops its pending rows."""
    await put(store, new_task())
    await advance(store, "t1", status(S.WORKING), push_configs=[hook("a"), hook("b")])
    await store.disable_push_config("t1", "a", at=50.0)
    await store.delete_push_config("t1", "b")
    await advance(store, "t1", status(S.COMPLETED))
    notes, _ = await store.push_log("t1")
    assert [(n.config_id, n.seq, n.state) for n in notes] == [("a", 2, "disabled"), ("b", 2, "dropped")]
    assert await store.due_notifications(1e12, 10, set()) == []
    assert await store.next_notification_at(set()) is None
    assert (await store.push_target("t1", "a")).disabled_at == 50.0  # type: ignore[union-attr]


# --- retention: finished tasks go with everything kept for them --------------------------------------------------


async def finished_task(store: TaskStore, task_id: str, at: float, *, end: m.TaskState = S.COMPLETED) -> None:
    """A task that ran (checkpoint, a child link, a webhook with a delivered notification) and ended at `at`."""
    await put(store, new_task(task_id), message=key(f"m-{task_id}"), updated=at - 2)
    await advance(store, task_id, status(S.WORKING, task_id=task_id), at=at - 1, checkpoint={"step": 1},
                  links=[TaskLink(task_id, "http://x/a2a/y", f"child-of-{task_id}", "y", at - 1)],
                  push_configs=[hook("h", task_id=task_id)])
    due = await store.due_notifications(now=1e12, limit=10, busy=set())
    for n in due:
        n.attempts, n.state, n.done_at = 1, "delivered", at
        await store.record_attempt(DeliveryAttempt(n.id, 1, at, 200, None, 0.1, "delivered"), n)
    await advance(store, task_id, status(end, task_id=task_id), at=at)


async def kept_for(store: TaskStore, task_id: str) -> dict[str, object]:
    """Everything the store keeps for one task, by what it is."""
    notes, attempts = await store.push_log(task_id)
    return {"task": await store.get(task_id) is not None, "log": len(await store.events_after(task_id, 0)),
            "key": await store.find_message(key(f"m-{task_id}")), "checkpoint": await store.get_checkpoint(task_id),
            "links": len(await store.links(task_id)), "push": len(await store.list_push_configs(task_id)),
            "notifications": len(notes), "attempts": len(attempts)}


NOTHING = {"task": False, "log": 0, "key": None, "checkpoint": None, "links": 0, "push": 0, "notifications": 0,
           "attempts": 0}


async def test_prune_by_age_removes_old_finished_tasks_with_everything_kept_for_them(store: TaskStore) -> None:
    """docs/operations.md, "Retention": a finished task older than the age limit goes with its log, idempotency
    key, checkpoint, links, push configs, notifications and attempts; newer ones and unfinished ones stay."""
    await finished_task(store, "old1", 1000.0)
    await finished_task(store, "old2", 1100.0, end=S.FAILED)
    await finished_task(store, "new", 3000.0)
    await put(store, new_task("running"), updated=500.0)  # older, but not finished
    await advance(store, "running", status(S.WORKING, task_id="running"), at=600.0)
    await put(store, new_task("waiting"), updated=500.0)
    await advance(store, "waiting", status(S.INPUT_REQUIRED, "why?", task_id="waiting"), at=600.0)
    before_new = await kept_for(store, "new")
    assert before_new["notifications"] == 2 and before_new["attempts"] == 1 and before_new["checkpoint"]

    removed = await store.prune(Retention(finished_before=2000.0), now=3001.0)

    assert removed == 2
    assert await kept_for(store, "old1") == NOTHING
    assert await kept_for(store, "old2") == NOTHING
    assert await kept_for(store, "new") == before_new
    assert {r.task.id for r in (await store.list(query())).records} == {"new", "running", "waiting"}
    assert await store.prune(Retention(finished_before=2000.0), now=3001.0) == 0
    # The idempotency key went too: the same messageId may start a new task now.
    await put(store, new_task("again"), message=key("m-old1"))
    assert await store.find_message(key("m-old1")) == "again"


async def test_prune_by_count_keeps_the_newest_finished_tasks_in_batches(store: TaskStore) -> None:
    for i in range(5):
        await finished_task(store, f"f{i}", 1000.0 + i)
    await put(store, new_task("running"), updated=10.0)
    await advance(store, "running", status(S.WORKING, task_id="running"), at=11.0)

    assert await store.prune(Retention(keep_finished=2), now=2000.0, limit=2) == 2  # the oldest two first
    assert [await store.get(f"f{i}") is not None for i in range(5)] == [False, False, True, True, True]
    assert await store.prune(Retention(keep_finished=2), now=2000.0, limit=2) == 1
    assert await store.prune(Retention(keep_finished=2), now=2000.0, limit=2) == 0
    assert sorted(r.task.id for r in (await store.list(query())).records) == ["f3", "f4", "running"]
    assert await store.prune(Retention(), now=2000.0) == 0  # no limits: nothing goes


async def test_prune_trims_the_change_feed_and_positions_keep_growing(store: TaskStore) -> None:
    """The change feed keeps CHANGES_KEPT_SECONDS of rows (and always its newest row): positions given after a
    prune are larger than every position given before it."""
    await finished_task(store, "a", 1000.0)
    await finished_task(store, "b", 5000.0)
    before = await store.changes_after(0)
    assert len(before) == 6
    await store.prune(Retention(), now=4998.0 + CHANGES_KEPT_SECONDS)  # "b"'s rows are recent enough
    assert [(c.task_id, c.seq) for c in await store.changes_after(0)] == [("b", 1), ("b", 2), ("b", 3)]
    await store.prune(Retention(), now=1e9)  # all old: the newest row stays
    kept = await store.changes_after(0)
    assert [(c.position, c.task_id, c.seq) for c in kept] == [(before[-1].position, "b", 3)]
    await finished_task(store, "c", 1e9)
    assert all(c.position > before[-1].position for c in await store.changes_after(before[-1].position))
    assert [c.task_id for c in await store.changes_after(before[-1].position)] == ["c", "c", "c"]


async def test_prune_keeps_the_change_feed_as_long_as_retention_says(store: TaskStore) -> None:
    """`[server.retention] changes_minutes` (Retention.changes_before) replaces the default hour: rows before it
    go, later ones stay, and the newest row always stays."""
    await finished_task(store, "a", 1000.0)
    await finished_task(store, "b", 5000.0)
    await store.prune(Retention(changes_before=4998.0), now=5001.0)  # an hour would keep "a" too
    assert [(c.task_id, c.seq) for c in await store.changes_after(0)] == [("b", 1), ("b", 2), ("b", 3)]
    await store.prune(Retention(changes_before=1e9), now=5001.0)
    assert [(c.task_id, c.seq) for c in await store.changes_after(0)] == [("b", 3)]


# --- SQLite: one process, reopening, migrations ------------------------------------------------------------------------


async def test_sqlite_keeps_everything_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    first = SqliteTaskStore(path)
    await put(first, new_task(), message=key("m-1"), lease=Lease("A", 50.0), parent="up")
    await advance(first, "t1", status(S.WORKING), checkpoint={"k": 1},
                  links=[TaskLink("t1", "http://a/a2a/x", "c1", "x", 1.0)])
    config = m.TaskPushNotificationConfig(url="https://hooks.example.com/a2a?x=1", task_id="t1", id="p", tenant="ten",
                                          token="tok-1", authentication=m.AuthenticationInfo(scheme="Bearer",
                                                                                             credentials="secret"))
    plain = m.TaskPushNotificationConfig(url="https://hooks.example.com/plain", task_id="t1", id="q")
    await first.put_push_config(StoredPushConfig(config, version="0.3", artifacts=True, created_at=12.5))
    await first.put_push_config(plain)
    await first.disable_push_config("t1", "q", at=40.0)
    await first.close()
    second = SqliteTaskStore(path)
    try:
        got = await second.get("t1")
        assert got is not None and got.task.status.state is S.WORKING and got.parent_task_id == "up"
        assert await second.find_message(key("m-1")) == "t1"
        assert await second.get_checkpoint("t1") == {"k": 1}
        assert [k.child_task_id for k in await second.links("t1")] == ["c1"]
        assert await second.lease("t1") == Lease("A", 50.0)
        assert [c.seq for c in await second.changes_after(0)] == [1, 2]
        assert await second.get_push_config("t1", "p") == config
        assert await second.list_push_configs("t1") == [config, plain]
        assert await second.push_target("t1", "p") == StoredPushConfig(config, version="0.3", artifacts=True,
                                                                        created_at=12.5)
        assert await second.push_target("t1", "q") == StoredPushConfig(plain, disabled_at=40.0)
    finally:
        await second.close()


async def test_a_second_process_on_the_same_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    first = SqliteTaskStore(path)
    try:
        with pytest.raises(StoreError) as info:
            SqliteTaskStore(path)
        assert str(path) in str(info.value) and f"pid {os.getpid()}" in str(info.value)
    finally:
        await first.close()
    again = SqliteTaskStore(path)  # released on close: the next one opens it
    await again.close()


async def test_an_older_sqlite_schema_is_migrated(tmp_path: Path) -> None:
    """A database written before leases and the change feed (schema 1) opens, keeps its tasks and works on."""
    path = tmp_path / "old.db"
    task = new_task(state=S.WORKING)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE tasks (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, owner TEXT NOT NULL,
            context_id TEXT NOT NULL, state TEXT NOT NULL, status_ts TEXT, snapshot BLOB NOT NULL,
            seq INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, parent_task_id TEXT);
        CREATE TABLE events (task_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, payload BLOB NOT NULL,
            PRIMARY KEY (task_id, seq)) WITHOUT ROWID;
        CREATE TABLE message_ids (agent_id TEXT NOT NULL, owner TEXT NOT NULL, message_id TEXT NOT NULL,
            task_id TEXT NOT NULL, PRIMARY KEY (agent_id, owner, message_id)) WITHOUT ROWID;
        CREATE TABLE checkpoints (task_id TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE task_links (parent_task_id TEXT NOT NULL, child_url TEXT NOT NULL, child_task_id TEXT NOT NULL,
            agent TEXT, created_at REAL NOT NULL, PRIMARY KEY (parent_task_id, child_url, child_task_id)) WITHOUT ROWID;
        CREATE TABLE push_configs (task_id TEXT NOT NULL, id TEXT NOT NULL, config BLOB NOT NULL,
            PRIMARY KEY (task_id, id)) WITHOUT ROWID;
    """)
    import msgspec

    db.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?)",
               ("t1", "echo", "alice", "c1", S.WORKING.value, None, msgspec.json.encode(task), 2, 1.0, 2.0, None))
    db.execute("INSERT INTO events VALUES (?,?,?,?)", ("t1", 1, "task", msgspec.json.encode(new_task())))
    db.execute("INSERT INTO events VALUES (?,?,?,?)", ("t1", 2, "status", msgspec.json.encode(status(S.WORKING))))
    db.execute("INSERT INTO message_ids VALUES (?,?,?,?)", ("echo", "alice", "m-1", "t1"))
    old_config = m.TaskPushNotificationConfig(url="https://hooks.example.com/a2a", task_id="t1", id="p1", token="tok")
    db.execute("INSERT INTO push_configs VALUES (?,?,?)", ("t1", "p1", msgspec.json.encode(old_config)))
    db.commit()
    db.close()
    store = SqliteTaskStore(path)
    try:
        kept = await store.push_target("t1", "p1")  # schema 3 gave push configs a version and options
        assert kept is not None and (kept.config, kept.version, kept.artifacts, kept.disabled_at) == (
            old_config, "1.0", False, None)
        got = await store.get("t1")
        assert got is not None and got.task == task and got.seq == 2
        assert await store.lease("t1") is None
        claimed = await store.claim_orphans("me", now=5.0, expires_at=9.0)  # left working: an orphan now
        assert [r.task.id for r in claimed] == ["t1"]
        await advance(store, "t1", status(S.COMPLETED), release_lease=True)
        assert [e.seq for e in await store.events_after("t1", 0)] == [1, 2, 3]
        assert [c.seq for c in await store.changes_after(0)] == [3]
    finally:
        await store.close()
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == SCHEMA_VERSION == 11


async def test_schema_4_gets_the_ascending_owner_index_and_lists_as_before(tmp_path: Path) -> None:
    """Schema 5 keeps `tasks_by_owner` in ascending order (a commit adds at its right edge); a schema-4
    database, whose index was descending, gets it rebuilt on open, and ListTasks still answers newest update
    first, page after page (A2A 1.0 section 3.1.4: tasks/list)."""
    path = tmp_path / "v4.db"
    store = SqliteTaskStore(path)
    try:
        for i in range(5):
            t = new_task(f"t{i}", state=S.COMPLETED)
            await store.create(record(t, updated=1000.0 + i), Entry(1, t))
    finally:
        await store.close()
    as_schema_7(path)
    db = sqlite3.connect(path)
    db.executescript("""
        DROP INDEX tasks_by_owner;
        CREATE INDEX tasks_by_owner ON tasks (agent_id, owner, updated_at DESC, id DESC);
        PRAGMA user_version=4;
    """)
    db.close()
    store = SqliteTaskStore(path)
    try:
        assert await listed_ids(store) == ["t4", "t3", "t2", "t1", "t0"]
    finally:
        await store.close()
    db = sqlite3.connect(path)
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name='tasks_by_owner'").fetchone()[0]
    assert "DESC" not in sql and db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    plan = " ".join(r[3] for r in db.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM tasks WHERE agent_id='echo' AND owner='alice' "
        "ORDER BY updated_at DESC, id DESC LIMIT 3"))
    assert "tasks_by_owner" in plan and "TEMP B-TREE" not in plan, plan  # read backwards, not sorted
    db.close()


def as_schema_8(path: Path) -> None:
    """Rewrite a closed current database (no tails: closing moved them) in schema 8's layout: no
    `tasks.tail_after` nor `tasks.first_event_at`, no `changes.entries`, no push attempts by time, the
    change-feed trigger on UPDATE OF seq."""
    db = sqlite3.connect(path)
    db.executescript("""
        ALTER TABLE tasks DROP COLUMN tail_after;
        ALTER TABLE tasks DROP COLUMN first_event_at;
        DROP INDEX push_attempts_by_at;
        ALTER TABLE changes DROP COLUMN entries;
        CREATE TRIGGER task_changed AFTER UPDATE OF seq ON tasks BEGIN
            INSERT INTO changes (task_id, agent_id, owner, seq, state, at)
            VALUES (NEW.id, NEW.agent_id, NEW.owner, NEW.seq, NEW.state, NEW.updated_at);
        END;
        PRAGMA user_version=8;
    """)
    db.commit()
    db.close()


def as_schema_7(path: Path) -> None:
    """Rewrite a current database in schema 7's layout: every snapshot whole (the log's artifact updates since
    a lagging one folded in), no `tasks.snapshot_seq`."""
    import msgspec

    from parley.tasks.entry_codec import decode_entries
    from parley.tasks.log import fold

    as_schema_8(path)
    db = sqlite3.connect(path)
    lagging = db.execute("SELECT id, snapshot, snapshot_seq FROM tasks WHERE snapshot_seq IS NOT NULL").fetchall()
    for task_id, snapshot, since in lagging:
        later = [e.event for (blob,) in db.execute("SELECT entries FROM entry_batches WHERE task_id=? "
                                                    "ORDER BY last_seq", (task_id,))
                 for e in decode_entries(unpack_log_row(blob)) if e.seq > since]
        whole = fold(msgspec.json.decode(snapshot, type=m.Task), later)
        db.execute("UPDATE tasks SET snapshot=? WHERE id=?", (msgspec.json.encode(whole), task_id))
    db.executescript("ALTER TABLE tasks DROP COLUMN snapshot_seq; PRAGMA user_version=7;")
    db.commit()
    db.close()


async def test_schema_7_gets_lagging_snapshots_and_reads_as_before(tmp_path: Path) -> None:
    """Schema 8 lets a stored snapshot lag behind artifact updates (`tasks.snapshot_seq`). A schema-7 database
    (every snapshot whole, no such column) opens with its tasks reading the same (A2A 1.0 section 3.1.3), and
    a task streaming on after the migration reads whole after each chunk."""
    path = tmp_path / "v7.db"
    store = SqliteTaskStore(path)
    try:
        await put(store, new_task(state=S.WORKING))
        for i in range(SNAPSHOT_EVERY + 3):
            await advance(store, "t1", chunk(i))
        before = await store.get("t1")
    finally:
        await store.close()
    as_schema_7(path)
    db = sqlite3.connect(path)
    assert "snapshot_seq" not in [c[1] for c in db.execute("PRAGMA table_info(tasks)")]
    db.close()
    store = SqliteTaskStore(path)
    try:
        assert await store.get("t1") == msgspec.structs.replace(before, first_event_at=None)  # not kept before 9
        expected = before.task if before is not None else None
        for i in range(SNAPSHOT_EVERY + 3, SNAPSHOT_EVERY + 6):
            expected = fold(expected, [chunk(i)])  # type: ignore[arg-type]
            await advance(store, "t1", chunk(i))
            got = await store.get("t1")
            assert got is not None and got.task == expected
            assert (await stored_snapshot(store, "t1"))[1] is not None  # lagging again, as new commits make it
    finally:
        await store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 11
    db.close()


def as_schema_6(path: Path) -> None:
    """Rewrite a current database in schema 6's layout: one `events` row per entry, no `entry_batches`."""
    from parley.tasks.entry_codec import decode_entries

    as_schema_7(path)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE events (task_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
            payload BLOB NOT NULL, PRIMARY KEY (task_id, seq)) WITHOUT ROWID;
    """)
    import msgspec

    for task_id, blob in db.execute("SELECT task_id, entries FROM entry_batches").fetchall():
        db.executemany("INSERT INTO events VALUES (?,?,?,?)",
                       [(task_id, e.seq, e.kind, msgspec.json.encode(e.event))
                        for e in decode_entries(unpack_log_row(blob))])
    db.executescript("DROP TABLE entry_batches; PRAGMA user_version=6;")
    db.commit()
    db.close()


async def test_schema_6_entries_become_one_row_per_task_and_read_back_the_same(tmp_path: Path) -> None:
    """Until schema 6 the log was one `events` row per entry; schema 7 stores a commit's entries as one row.
    A schema-6 database opens with every entry of every task readable as before, in order, from any point and
    with any limit (what resubscribe reads: A2A 1.0 section 3.1.6), and takes new commits after them."""
    path = tmp_path / "v6.db"
    store = SqliteTaskStore(path)
    try:
        for tid in ("t1", "t2"):
            await put(store, new_task(tid))
            await advance(store, tid, status(S.WORKING, task_id=tid), art("a", "x", task_id=tid))
            await advance(store, tid, art("b", "y", task_id=tid))
        before = {tid: await store.events_after(tid, 0) for tid in ("t1", "t2")}
    finally:
        await store.close()
    as_schema_6(path)
    store = SqliteTaskStore(path)
    try:
        for tid in ("t1", "t2"):
            assert await store.events_after(tid, 0) == before[tid]
            assert [e.seq for e in before[tid]] == [1, 2, 3, 4]
            assert await store.events_after(tid, 1, limit=2) == before[tid][1:3]
            assert await store.events_after(tid, 4) == []
        await advance(store, "t1", status(S.COMPLETED))
        assert [e.seq for e in await store.events_after("t1", 2)] == [3, 4, 5]
    finally:
        await store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name='events'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM entry_batches").fetchone()[0] == 3  # one per migrated task, one new
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


async def test_a_commit_s_entries_are_one_row_read_from_any_point(tmp_path: Path) -> None:
    """Schema 7 writes one row per commit however many entries it has; a reader starting in the middle of a
    row, or asking for fewer entries than a row holds, gets exactly the entries after its point."""
    store = SqliteTaskStore(tmp_path / "log.db")
    try:
        await put(store, new_task())
        await advance(store, "t1", status(S.WORKING), art("a", "x"), art("b", "y"))
        await advance(store, "t1", art("c", "z"), status(S.COMPLETED))
        everything = await store.events_after("t1", 0)
        assert [e.seq for e in everything] == [1, 2, 3, 4, 5, 6]
        for start in range(7):
            for limit in (None, 1, 2, 3, 10):
                want = everything[start:] if limit is None else everything[start:start + limit]
                assert await store.events_after("t1", start, limit) == want, (start, limit)
    finally:
        await store.close()
    db = sqlite3.connect(tmp_path / "log.db")
    assert [r[0] for r in db.execute("SELECT last_seq FROM entry_batches ORDER BY id")] == [1, 4, 6]
    db.close()


async def test_a_long_commit_and_a_long_migrated_log_are_cut_into_rows(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A row holds ROW_ENTRIES entries at most, whether one commit brings more (an agent yielding many events
    in one loop turn) or a schema-6 log is regrouped: a reader paging through a long log (resubscribe, A2A 1.0
    section 3.1.6) decodes about what it asked for, and reads every entry once, in order, from any point."""
    from parley.tasks import sqlite_store

    monkeypatch.setattr(sqlite_store, "ROW_ENTRIES", 3)
    path = tmp_path / "long.db"
    store = SqliteTaskStore(path)
    try:
        await put(store, new_task())
        await advance(store, "t1", status(S.WORKING), *[art(f"a{i}", "x") for i in range(6)])  # seqs 2-8
        everything = await store.events_after("t1", 0)
        assert [e.seq for e in everything] == list(range(1, 9))
        for start in range(9):
            for limit in (None, 1, 2, 3, 4, 10):
                want = everything[start:] if limit is None else everything[start:start + limit]
                assert await store.events_after("t1", start, limit) == want, (start, limit)
    finally:
        await store.close()
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT last_seq FROM entry_batches ORDER BY id")] == [1, 4, 7, 8]
    db.close()
    as_schema_6(path)  # the same log, one row per entry: regrouped when opened
    store = SqliteTaskStore(path)
    try:
        assert await store.events_after("t1", 0) == everything
        assert await store.events_after("t1", 2, 4) == everything[2:6]
    finally:
        await store.close()
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT last_seq FROM entry_batches ORDER BY id")] == [3, 6, 8]
    db.close()


async def test_schema_5_loses_its_outbox_trigger_and_each_webhook_hears_once(tmp_path: Path) -> None:
    """Up to schema 5 a trigger on the events table filled the push outbox; since schema 6 the commit does
    (only for tasks with webhooks). A schema-5 database drops the trigger when opened, so an entry is
    enqueued once per webhook, not twice."""
    path = tmp_path / "v5.db"
    store = SqliteTaskStore(path)
    try:
        await put(store, new_task())
        await advance(store, "t1", status(S.WORKING), push_configs=[hook("a")])
    finally:
        await store.close()
    as_schema_6(path)
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TRIGGER push_enqueue AFTER INSERT ON events WHEN NEW.kind IN ('status', 'artifact') BEGIN
            INSERT INTO push_outbox (task_id, config_id, seq, kind, created_at, next_at)
            SELECT NEW.task_id, c.id, NEW.seq, NEW.kind, 0, 0 FROM push_configs c
            WHERE c.task_id = NEW.task_id AND c.disabled_at IS NULL AND (NEW.kind = 'status' OR c.artifacts = 1);
        END;
        PRAGMA user_version=5;
    """)
    db.close()
    store = SqliteTaskStore(path)
    try:
        await advance(store, "t1", status(S.COMPLETED))
        notes, _ = await store.push_log("t1")
        assert [(n.config_id, n.seq, n.kind) for n in notes] == [("a", 2, "status"), ("a", 3, "status")]
    finally:
        await store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE type='trigger' AND name='push_enqueue'").fetchone()[0] == 0
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


async def test_a_newer_sqlite_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.close()
    for _ in range(2):  # the refused open gave its lock back: the second one fails the same way
        with pytest.raises(StoreError, match="newer Parley"):
            SqliteTaskStore(path)


def test_apply_is_what_fold_uses() -> None:
    task = new_task()
    assert fold(task, [status(S.WORKING)]) == apply(new_task(), status(S.WORKING))


async def test_list_across_agents_and_principals(store: TaskStore) -> None:
    """The dashboard's task table lists every agent's and every principal's tasks (TaskQuery with agent_id and
    owner None), newest update first with ties broken by task id as ListTasks does (A2A 1.0 section 3.1.4);
    an agent or a principal narrows it; pages follow each other across agents and owners without a gap or a
    repeat, and every page counts the whole match."""
    from parley.tasks.store import TaskQuery, decode_cursor

    made = [("a", "echo", "alice", 10.0, S.COMPLETED), ("b", "interviewer", "bob", 20.0, S.WORKING),
            ("c", "echo", "bob", 30.0, S.WORKING), ("d", "interviewer", "alice", 40.0, S.COMPLETED),
            ("e", "echo", "alice", 50.0, S.WORKING), ("f", "interviewer", "carol", 60.0, S.INPUT_REQUIRED),
            ("g", "echo", "carol", 25.0, S.WORKING), ("h", "interviewer", "alice", 25.0, S.WORKING)]
    for task_id, agent, owner, updated, state in made:
        await put(store, new_task(task_id, state=state), agent=agent, owner=owner, updated=updated)

    def newest_first(keep) -> list[str]:  # type: ignore[no-untyped-def]
        return [t for t, *_ in sorted((row for row in made if keep(row)), key=lambda r: (r[3], r[0]), reverse=True)]

    async def listed(**query: object) -> tuple[list[tuple[str, str, str]], int]:
        page = await store.list(TaskQuery(**query))  # type: ignore[arg-type]
        return [(r.task.id, r.agent_id, r.owner) for r in page.records], page.total

    rows, total = await listed(agent_id=None, owner=None)
    assert [r[0] for r in rows] == newest_first(lambda r: True) == ["f", "e", "d", "c", "h", "g", "b", "a"]
    assert total == 8
    assert {(t, a, o) for t, a, o, *_ in made} == set(rows)  # each with its own agent and owner

    rows, total = await listed(agent_id="echo", owner=None)
    assert [r[0] for r in rows] == newest_first(lambda r: r[1] == "echo") and total == 4
    rows, total = await listed(agent_id=None, owner="alice")
    assert [r[0] for r in rows] == newest_first(lambda r: r[2] == "alice") and total == 4
    rows, total = await listed(agent_id="interviewer", owner="alice")
    assert [r[0] for r in rows] == ["d", "h"] and total == 2
    rows, total = await listed(agent_id=None, owner=None, state=S.WORKING)
    assert [r[0] for r in rows] == ["e", "c", "h", "g", "b"] and total == 5
    assert await listed(agent_id="nobody", owner=None) == ([], 0)

    for agent, owner, size in [(None, None, 3), (None, None, 1), (None, "alice", 3), ("echo", None, 2)]:
        expected = newest_first(lambda r: agent in (None, r[1]) and owner in (None, r[2]))  # noqa: B023
        seen: list[str] = []
        cursor = None
        for _ in range(len(made) + 1):
            page = await store.list(TaskQuery(agent_id=agent, owner=owner, page_size=size, cursor=cursor))
            assert page.total == len(expected) and 0 < len(page.records) <= size
            seen.extend(r.task.id for r in page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
            assert decode_cursor(encode_cursor(cursor)) == cursor  # the page token the dashboard puts in its links
        assert seen == expected, (agent, owner, size)


async def test_list_orders_streaming_tasks_by_their_last_token_and_leaves_them_streaming(store: TaskStore) -> None:
    """ListTasks gives the newest update first (A2A 1.0 section 3.1.4): a task streaming an answer was last updated
    by its last token, though SQLite keeps a stream's tokens out of its task row for a while (its tail). Every page
    size, the byte bound, the filters and the agent-and-owner-wide view (the dashboard's) agree on that order, each
    task reads whole, and listing moves no tail (moving them all first held the event loop ~100-170 ms per call with
    1,000 streams open: bench/RESULTS.md)."""
    from parley.tasks.store import TaskQuery

    last: dict[str, float] = {}  # each task's last update
    seqs: dict[str, int] = {}
    texts: dict[str, str] = {}
    made = [(f"t{i}", "echo" if i != 8 else "interviewer", "c2" if i % 3 == 0 else "c1") for i in range(10)]
    for n, (task_id, agent, context) in enumerate(made):
        await put(store, new_task(task_id, context_id=context), agent=agent, updated=1000.0 + n)
        await advance(store, task_id, status(S.WORKING, task_id=task_id), at=1100.0 + n)
        last[task_id], seqs[task_id] = 1100.0 + n, 2
    streaming = ["t1", "t4", "t7", "t8"]
    at = 1200.0
    for i in range(5):  # the streams' tokens, and other tasks finishing between them
        for task_id in streaming:
            at += 1.0
            await advance(store, task_id, chunk(i, task_id=task_id), at=at)
            last[task_id], seqs[task_id] = at, seqs[task_id] + 1
            texts[task_id] = texts.get(task_id, "") + f"w{i} "
        done = f"t{(2, 3, 5, 6, 9)[i]}"
        at += 1.0
        await advance(store, done, status(S.COMPLETED, task_id=done), at=at)
        last[done], seqs[done] = at, 3
    at += 1.0
    await advance(store, "t4", chunk(5, task_id="t4"), at=at)  # t4 streams on: newest of all
    last["t4"], seqs["t4"] = at, seqs["t4"] + 1
    texts["t4"] += "w5 "
    tails = set(getattr(store, "_tails", {}))
    if isinstance(store, SqliteTaskStore):
        assert {"t1", "t4", "t7", "t8"} & tails, "the test must leave tails"

    def expected(agent: str | None = "echo", context: str | None = None, state: m.TaskState | None = None) -> list[str]:
        keep = [t for t, a, c in made if agent in (None, a) and context in (None, c)
                and state in (None, S.WORKING if t in streaming or t in ("t0",) else S.COMPLETED)]
        return sorted(keep, key=lambda t: (last[t], t), reverse=True)

    async def pages(size: int, **query: object) -> list[str]:
        seen: list[str] = []
        cursor = None
        for _ in range(len(made) + 1):
            page = await store.list(TaskQuery(**{"agent_id": "echo", "owner": "alice", **query},  # type: ignore[arg-type]
                                              page_size=size, cursor=cursor))
            for r in page.records:
                assert (r.seq, r.updated_at) == (seqs[r.task.id], last[r.task.id]), r.task.id
                if r.task.id in texts:
                    assert r.task.artifacts and r.task.artifacts[0].parts[0].text == texts[r.task.id]
            seen += [r.task.id for r in page.records]
            cursor = page.next_cursor
            if cursor is None:
                return seen
        raise AssertionError("the pages did not end")

    # the streams' tokens and the other tasks' ends interleave: in the rows' order the streams would come last
    assert expected()[:5] == ["t4", "t9", "t7", "t1", "t6"]
    for size in (1, 2, 3, 20):
        assert await pages(size) == expected(), size
        assert await pages(size, max_bytes=1) == expected(), size  # one task a page: at_least_one
    assert await pages(3, max_bytes=10**6) == expected()
    assert await pages(2, context_id="c2") == expected(context="c2")
    assert await pages(2, state=S.WORKING) == expected(state=S.WORKING) == ["t4", "t7", "t1", "t0"]
    assert await pages(3, agent_id=None, owner=None) == expected(agent=None)
    assert await pages(2, agent_id="interviewer") == ["t8"]
    assert [r.task.id for r in (await store.list(query())).records] == expected()  # ListTasks' default page
    assert set(getattr(store, "_tails", {})) == tails  # listing moved no tail


async def test_list_newest_created_first_pages_by_id_and_counts_on_demand(store: TaskStore) -> None:
    """The dashboard's order: newest task first by its id (Parley's ids are UUIDv7, so the order of creation),
    whatever each task's last update; pages follow each other by id; `count=False` skips the total (-1)."""
    from parley.tasks.store import TaskQuery

    made = [("01-a", "echo", 50.0), ("02-b", "interviewer", 10.0), ("03-c", "echo", 40.0), ("04-d", "echo", 20.0),
            ("05-e", "interviewer", 30.0)]
    for task_id, agent, updated in made:
        await put(store, new_task(task_id), agent=agent, updated=updated)
    page = await store.list(TaskQuery(agent_id=None, owner=None, order="created", count=False))
    assert [r.task.id for r in page.records] == ["05-e", "04-d", "03-c", "02-b", "01-a"] and page.total == -1
    seen, cursor = [], None
    for _ in range(4):
        page = await store.list(TaskQuery(agent_id="echo", owner=None, order="created", page_size=2, cursor=cursor))
        seen.extend(r.task.id for r in page.records)
        assert page.total == 3
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["04-d", "03-c", "01-a"]


async def test_a_page_bounded_in_bytes_ends_early_and_paging_goes_on(store: TaskStore) -> None:
    """TaskQuery.max_bytes (issue 28, item 6): a page holds the newest tasks whose stored bytes fit, at least one
    unless told otherwise; its cursor continues after the last one, so paging still reaches every task."""
    big = "z" * 10_000
    for i in range(6):
        task = new_task(f"t{i}")
        task.history = [msg(f"u{i}", big, task_id=task.id)]
        await put(store, task, updated=1000.0 + i, message=key(f"m{i}", content=big))
    bounded = dataclasses.replace(query(m.ListTasksRequest(page_size=100)), max_bytes=25_000)
    seen: list[str] = []
    while True:
        page = await store.list(bounded)
        assert 1 <= len(page.records) <= 2, [r.task.id for r in page.records]
        seen += [r.task.id for r in page.records]
        if page.next_cursor is None:
            break
        bounded = dataclasses.replace(bounded, cursor=page.next_cursor)
    assert seen == [f"t{i}" for i in reversed(range(6))]
    one = dataclasses.replace(query(m.ListTasksRequest(page_size=100)), max_bytes=100)
    assert len((await store.list(one)).records) == 1  # a task over the bound alone: still listed
    none = dataclasses.replace(one, at_least_one=False)
    page = await store.list(none)
    assert page.records == [] and page.next_cursor is None  # nothing fits, and nothing to continue from


# --- SQLite: a streamed token's commit is one change-feed row (schema 9) --------------------------------------------


def wal_pages(path: Path) -> list[int]:
    """The page number of each frame of a WAL that never started over (a frame: 24-byte header, then the page)."""
    import struct

    data = Path(str(path) + "-wal").read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    return [struct.unpack(">I", data[off:off + 4])[0] for off in range(32, len(data), 24 + page_size)]


async def test_a_streamed_tokens_commit_touches_only_the_change_feed(tmp_path: Path) -> None:
    """Issue 25: a commit of one artifact update writes the change feed's pages and nothing else: not the task row,
    its ListTasks entry or the log's index (those follow at the task's next other commit). Counted from the WAL's
    frame headers (the checkpointer held off), each page named by SQLite's dbstat. The task's snapshot rewrite
    points are past these tokens (its snapshot_phase is 0: every SNAPSHOT_EVERY-th entry)."""
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600.0)
    task_id = next(t for t in (f"t{i}" for i in itertools.count()) if snapshot_phase(t) == 0)
    try:
        await put(store, new_task(task_id, state=S.WORKING))
        await advance(store, task_id, chunk(0, task_id=task_id))
        written = []
        for i in range(1, 31):
            before = len(wal_pages(path))
            await advance(store, task_id, chunk(i, task_id=task_id))
            written.append(wal_pages(path)[before:])
        db = sqlite3.connect(path)
        owners = {pgno: name for name, pgno in db.execute("SELECT name, pageno FROM dbstat")}
        db.close()
        touched = {owners.get(p, "(free)") for pages in written for p in pages}
        assert touched <= {"changes", "sqlite_schema"}, touched  # page 1 when the file grows
        assert sum(map(len, written)) <= 3 * len(written)  # about one page each, a new leaf now and then
        rec = await store.get(task_id)
        assert rec is not None and rec.seq == 32 and "".join(
            p.text or "" for p in rec.task.artifacts[0].parts) == "".join(f"w{i} " for i in range(31))
    finally:
        await store.close()


def schema_9_elide(batch: bytes, first: bytes) -> bytes:
    """A tail row as schema 9 wrote it: `~seq,shared:rest` (what it shares with the first after the seq)."""
    i, j = batch.index(b","), first.index(b",")
    shared = len(os.path.commonprefix([batch[i:], first[j:]]))
    return batch if shared < 16 else b"~" + batch[2:i] + b"," + str(shared).encode() + b":" + batch[i + shared:]


def crash_copy(path: Path, to: Path) -> Path:
    """The files a SIGKILL of the open store would leave: the database, its WAL and its tail files (tail_file),
    copied while the store is open; the copy of the database."""
    import shutil

    to.mkdir()
    for f in path.parent.glob(path.name + "*"):
        if not f.name.endswith(".lock"):
            shutil.copy(f, to / f.name)
    return to / path.name


def as_feed_tails(path: Path) -> None:
    """Rewrite a crash copy's tails as schemas 9 and 10 kept them: change-feed rows carrying their entries after the
    task row's `tail_after`, and no tail files."""
    from parley.tasks.tail_file import TailFile

    records = list(TailFile(str(path)).recover())
    db = sqlite3.connect(path)
    end = db.execute("SELECT coalesce(max(pos), 0) FROM changes").fetchone()[0]
    db.execute("UPDATE tasks SET tail_after=?", (end,))
    for r in records:
        db.execute("INSERT INTO changes (task_id, agent_id, owner, seq, state, at, entries) "
                   "SELECT id, agent_id, owner, ?, state, ?, ? FROM tasks WHERE id=? AND seq<?",
                   (r.last_seq, r.at, r.entries, r.task_id, r.last_seq))
    db.commit()
    db.close()
    for f in path.parent.glob(path.name + "-tail.*"):
        f.unlink()


@pytest.mark.parametrize("schema", [SCHEMA_VERSION, 10, 9])
async def test_a_tail_left_by_a_crash_reads_the_same_after_restart(tmp_path: Path, schema: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A process killed mid-stream leaves acknowledged artifact updates only in its tail file (schemas 9 and 10:
    as change-feed rows): the next open finds them, moves them into the log, and the task and its log from any
    point read as they did (A2A 1.0 section 3.1.3 GetTask, 3.1.6 resubscribe); the feed has the rows it had and
    each task's newest change. The "crash" is the store's files copied while it is open, as a SIGKILL would leave
    them. A tail schema 9 or 10 left (its rows in that schema's form) reads the same under this one."""
    from parley.tasks import sqlite_store
    from parley.tasks.tail_file import TailFile

    if schema == 9:
        monkeypatch.setattr(sqlite_store, "elide", schema_9_elide)
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600.0)
    try:
        await put(store, new_task(state=S.WORKING))
        await put(store, new_task("t2", state=S.WORKING))
        for i in range(SNAPSHOT_EVERY + 9):  # past a snapshot rewrite, then a tail
            await advance(store, "t1", chunk(i))
            if i % 3 == 0:
                await advance(store, "t2", chunk(i, task_id="t2"))
        live = [await store.get(t) for t in ("t1", "t2")]
        logs = [await store.events_after(t, since) for t in ("t1", "t2") for since in (0, 5, SNAPSHOT_EVERY + 2)]
        rows = store._db.execute("SELECT pos, task_id, seq FROM changes ORDER BY pos").fetchall()
        newest = {c.task_id: c.seq for c in await store.changes_after(0)}
        assert store._tails, "the test must leave a tail"
        assert not store._db.execute("SELECT 1 FROM changes WHERE entries IS NOT NULL").fetchall()  # not in the feed
        crashed = crash_copy(path, tmp_path / "crashed")
    finally:
        await store.close()
    forms = {r.entries[:1] for r in TailFile(str(crashed)).recover()}
    assert forms == {b"[", b"~" if schema == 9 else b"="}  # each tail's first record whole, the others relative to it
    if schema < SCHEMA_VERSION:
        as_feed_tails(crashed)
        db = sqlite3.connect(crashed)
        db.execute(f"PRAGMA user_version={schema}")
        db.close()
        monkeypatch.undo()
    again = SqliteTaskStore(crashed)
    try:
        assert not again._tails  # moved into the log at open
        assert [await again.get(t) for t in ("t1", "t2")] == live
        assert [await again.events_after(t, since) for t in ("t1", "t2")
                for since in (0, 5, SNAPSHOT_EVERY + 2)] == logs
        feed = await again.changes_after(0)
        assert [(c.position, c.task_id, c.seq) for c in feed][:len(rows)] == rows  # the rows as they were
        assert {c.task_id: c.seq for c in feed} == newest  # and each task's newest change
        await advance(again, "t1", chunk(SNAPSHOT_EVERY + 9))  # and the stream goes on after it
        rec = await again.get("t1")
        assert rec is not None and rec.seq == live[0].seq + 1  # type: ignore[union-attr]
        assert again._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        await again.close()
    assert not list(tmp_path.glob("crashed/t.db-tail.*"))  # closed with every tail moved: no tail file left


async def test_retention_leaves_a_live_tail(tmp_path: Path) -> None:
    """A prune pass (every minute by default) leaves a streaming task's tail where it is (moving every tail first held
    the event loop ~100-170 ms with 1,000 streams open: bench/RESULTS.md) and trims the change feed, which holds no
    tail: the task and its log read the same (A2A 1.0 section 3.1.3 GetTask, 3.1.6 resubscribe), its stream goes
    on, and a crash after the prune still finds the tail."""
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600.0)
    try:
        await finished_task(store, "old", 1000.0)
        await put(store, new_task("s", state=S.WORKING), updated=1001.0)
        for i in range(6):
            await advance(store, "s", chunk(i, task_id="s"), at=1002.0 + i)
        tail = store._tails["s"]
        live, log = await store.get("s"), await store.events_after("s", 0)
        feed = await store.changes_after(0)
        assert await store.prune(Retention(keep_finished=0), now=1e9) == 1  # "old" goes; every row is old
        assert store._tails["s"] is tail  # not moved
        assert await store.changes_after(0) == feed[-2:]  # the feed's last row (kept), and the tail's change
        assert [c.task_id for c in feed[:-2]].count("old") == 3  # its rows were trimmed
        assert await store.get("s") == live and await store.events_after("s", 0) == log
        crashed = crash_copy(path, tmp_path / "crashed")
        await advance(store, "s", chunk(6, task_id="s"), at=1010.0)
        assert (await store.get("s")).seq == live.seq + 1  # type: ignore[union-attr]
    finally:
        await store.close()
    again = SqliteTaskStore(crashed)
    try:
        assert not again._tails  # moved into the log at open
        assert await again.get("s") == live and await again.events_after("s", 0) == log
    finally:
        await again.close()


async def test_a_refused_token_commit_leaves_the_tail_as_it_was(tmp_path: Path) -> None:
    """Two writers' token commits in one group write: the stale one is refused (SequenceConflict) and leaves no
    trace, the other is written; the task reads as after the one that won."""
    import asyncio

    store = SqliteTaskStore(tmp_path / "t.db")
    try:
        await put(store, new_task(state=S.WORKING))
        await advance(store, "t1", chunk(0))
        await advance(store, "t1", chunk(1))  # a tail now
        rec = await store.get("t1")
        assert rec is not None
        feed = await store.changes_after(0)
        mine = Commit(task_id="t1", expected_seq=rec.seq, entries=[Entry(rec.seq + 1, chunk(2))],
                      snapshot=fold(rec.task, [chunk(2)]), updated_at=3000.0)
        stale = Commit(task_id="t1", expected_seq=rec.seq - 1, entries=[Entry(rec.seq, chunk(9))],
                       snapshot=rec.task, updated_at=3001.0)
        got = await asyncio.gather(store.commit(mine), store.commit(stale), return_exceptions=True)
        assert got[0] is None and isinstance(got[1], SequenceConflict) and got[1].actual == rec.seq + 1
        after = await store.get("t1")
        assert after is not None and after.seq == rec.seq + 1 and after.task == fold(rec.task, [chunk(2)])
        assert [c.seq for c in await store.changes_after(feed[-1].position)] == [rec.seq + 1]
    finally:
        await store.close()


async def test_an_artifact_update_moves_its_task_to_the_top_of_list_tasks(store: TaskStore) -> None:
    """ListTasks is sorted by last update time, newest first (A2A 1.0 section 3.1.4): a chunk of an answer is an
    update, even where the store keeps it out of the task row for a while (SQLite's tail)."""
    await put(store, new_task("a", state=S.WORKING), updated=1000.0)
    await put(store, new_task("b", state=S.WORKING), updated=2000.0)
    await advance(store, "a", chunk(0, task_id="a"), at=3000.0)
    await advance(store, "a", chunk(1, task_id="a"), at=3001.0)
    page = await store.list(query(m.ListTasksRequest()))
    assert [(r.task.id, r.seq, r.updated_at) for r in page.records] == [("a", 3, 3001.0), ("b", 1, 2000.0)]


async def test_schema_8_opens_reads_the_same_and_streams_into_a_tail(tmp_path: Path) -> None:
    """Schema 9 adds the tail (`changes.entries`, `tasks.tail_after`) and drops the feed trigger on UPDATE. A
    schema-8 database with a task mid-answer opens with its task, log and feed reading the same (A2A 1.0 sections
    3.1.3, 3.1.6); the answer streams on into a tail, and after a restart the task reads whole."""
    path = tmp_path / "v8.db"
    store = SqliteTaskStore(path)
    try:
        await put(store, new_task(state=S.WORKING))
        for i in range(SNAPSHOT_EVERY + 3):
            await advance(store, "t1", chunk(i))
        before = await store.get("t1")
        log = await store.events_after("t1", 0)
    finally:
        await store.close()
    as_schema_8(path)
    db = sqlite3.connect(path)
    feed = db.execute("SELECT pos, task_id, seq FROM changes ORDER BY pos").fetchall()
    db.close()
    store = SqliteTaskStore(path)
    try:
        before = msgspec.structs.replace(before, first_event_at=None)  # not kept before schema 9
        assert await store.get("t1") == before and await store.events_after("t1", 0) == log
        assert [(c.position, c.task_id, c.seq) for c in await store.changes_after(0)] == feed
        expected = before.task if before is not None else None
        for i in range(SNAPSHOT_EVERY + 3, SNAPSHOT_EVERY + 6):
            expected = fold(expected, [chunk(i)])  # type: ignore[arg-type]
            await advance(store, "t1", chunk(i))
        assert store._tails and (await store.get("t1")).task == expected  # type: ignore[union-attr]
        # the tail's commits stand as one change, its newest (tail_file)
        assert [c.seq for c in (await store.changes_after(feed[-1][0]))] == [SNAPSHOT_EVERY + 7]
    finally:
        await store.close()
    store = SqliteTaskStore(path)
    try:
        got = await store.get("t1")
        assert got is not None and got.task == expected and got.seq == SNAPSHOT_EVERY + 7
        assert [e.seq for e in await store.events_after("t1", 0)] == list(range(1, SNAPSHOT_EVERY + 8))
        # moving the tail (at close) added no feed row: no trigger on UPDATE OF seq is left
        # the tail's commits stand as one change, its newest (tail_file)
        assert [c.seq for c in await store.changes_after(feed[-1][0])] == [SNAPSHOT_EVERY + 7]
    finally:
        await store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 11
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name='task_changed'").fetchone()[0] == 0
    db.close()
