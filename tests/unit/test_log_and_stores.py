"""The event-log fold (`apply`), `trim_history`, and the TaskStore contract for both stores."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest

from parley.protocol import models as m
from parley.protocol.codec import copy
from parley.protocol.errors import InvalidParamsError
from parley.tasks.log import Entry, apply, now_iso, trim_history
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    TaskRecord,
    TaskStore,
    decode_cursor,
    encode_cursor,
    make_query,
)

S = m.TaskState


def msg(mid: str, text: str, role: m.Role = m.Role.USER) -> m.Message:
    return m.Message(message_id=mid, role=role, parts=[m.Part(text=text)], task_id="t1", context_id="c1")


def status(state: m.TaskState, text: str | None = None, *, task_id: str = "t1", ts: str | None = None,
           mid: str | None = None) -> m.TaskStatusUpdateEvent:
    message = msg(mid or f"agent-{text}", text, m.Role.AGENT) if text is not None else None
    return m.TaskStatusUpdateEvent(task_id=task_id, context_id="c1",
                                   status=m.TaskStatus(state=state, message=message, timestamp=ts))


def art(aid: str, *parts: m.Part, append: bool = False, last: bool = False, name: str | None = None,
        metadata: dict | None = None) -> m.TaskArtifactUpdateEvent:
    return m.TaskArtifactUpdateEvent(task_id="t1", context_id="c1",
                                     artifact=m.Artifact(artifact_id=aid, parts=list(parts), name=name,
                                                         metadata=metadata),
                                     append=append, last_chunk=last)


def new_task(task_id: str = "t1", *, context_id: str = "c1", state: m.TaskState = S.SUBMITTED,
             ts: str | None = "2025-01-01T00:00:00.000Z", first: m.Message | None = None) -> m.Task:
    return m.Task(id=task_id, context_id=context_id, status=m.TaskStatus(state=state, timestamp=ts),
                  history=[first or msg("u1", "hello")])


def fold(*events: object) -> m.Task:
    task = None
    for seq, ev in enumerate(events, 1):
        task = apply(task, Entry(seq, ev))  # type: ignore[arg-type]
    assert task is not None
    return task


def history_texts(task: m.Task) -> list[tuple[str, str]]:
    return [("user" if h.role is m.Role.USER else "agent", h.text()) for h in task.history or []]


# --- the fold --------------------------------------------------------------------------------------------------


def test_first_entry_is_a_copy_of_the_task() -> None:
    task = new_task()
    snap = apply(None, Entry(1, task))
    assert snap == task and snap is not task
    snap.history.append(msg("x", "x"))  # type: ignore[union-attr]
    assert len(task.history or []) == 1


def test_entry_kinds() -> None:
    assert Entry(1, new_task()).kind == "task"
    assert Entry(2, msg("u", "x")).kind == "message"
    assert Entry(3, status(S.WORKING)).kind == "status"
    assert Entry(4, art("a", m.Part(text="x"))).kind == "artifact"
    assert not Entry(2, msg("u", "x")).streamed
    assert Entry(3, status(S.WORKING)).streamed and Entry(1, new_task()).streamed


def test_status_message_moves_to_history_on_user_message() -> None:
    """A multi-turn exchange reads user, agent question, user answer in order."""
    task = fold(
        new_task(),
        status(S.WORKING),
        status(S.INPUT_REQUIRED, "why?"),
    )
    assert task.status.state is S.INPUT_REQUIRED and task.status.message is not None
    assert history_texts(task) == [("user", "hello")]
    answer = msg("u2", "because")
    task = apply(task, Entry(4, answer))
    assert history_texts(task) == [("user", "hello"), ("agent", "why?"), ("user", "because")]
    assert task.status.message is None and task.status.state is S.INPUT_REQUIRED
    task = apply(task, Entry(5, status(S.WORKING)))
    task = apply(task, Entry(6, status(S.COMPLETED, "done")))
    assert history_texts(task) == [("user", "hello"), ("agent", "why?"), ("user", "because")]
    assert task.status.message is not None and task.status.message.text() == "done"


def test_status_message_moves_to_history_on_new_status() -> None:
    task = fold(new_task(), status(S.WORKING, "thinking"), status(S.WORKING, "still thinking"),
                status(S.COMPLETED))
    assert history_texts(task) == [("user", "hello"), ("agent", "thinking"), ("agent", "still thinking")]
    assert task.status == m.TaskStatus(state=S.COMPLETED)


def test_user_message_without_pending_status_message() -> None:
    task = fold(new_task(), status(S.INPUT_REQUIRED, ts="x"))
    task = apply(task, msg("u2", "more"))
    assert history_texts(task) == [("user", "hello"), ("user", "more")]
    assert task.status.timestamp == "x"


def test_pending_status_keeps_its_state_and_timestamp_when_moved() -> None:
    task = fold(new_task(), status(S.INPUT_REQUIRED, "q", ts="2025-01-01T00:00:05.000Z"), msg("u2", "a"))
    assert task.status == m.TaskStatus(state=S.INPUT_REQUIRED, timestamp="2025-01-01T00:00:05.000Z")


def test_appended_text_chunks_join() -> None:
    task = fold(
        new_task(),
        status(S.WORKING),
        art("a1", m.Part(text="Hel"), name="response"),
        art("a1", m.Part(text="lo "), append=True),
        art("a1", m.Part(text="world"), append=True, last=True),
    )
    assert task.artifacts is not None and len(task.artifacts) == 1
    assert task.artifacts[0].parts == [m.Part(text="Hello world")]
    assert task.artifacts[0].name == "response"


def test_appended_non_text_parts_are_kept_separately() -> None:
    task = fold(
        new_task(),
        art("a1", m.Part(text="x")),
        art("a1", m.Part(data={"k": 1}), m.Part(text="y"), append=True),
        art("a1", m.Part(text="z"), append=True, last=True),
    )
    assert task.artifacts[0].parts == [m.Part(text="x"), m.Part(data={"k": 1}), m.Part(text="yz")]  # type: ignore[index]


def test_text_with_metadata_is_not_joined() -> None:
    task = fold(new_task(), art("a1", m.Part(text="x", metadata={"lang": "en"})), art("a1", m.Part(text="y"),
                                                                                    append=True))
    assert [p.text for p in task.artifacts[0].parts] == ["x", "y"]  # type: ignore[index]


def test_non_append_replaces_and_new_ids_add() -> None:
    task = fold(
        new_task(),
        art("a1", m.Part(text="draft"), last=True),
        art("a2", m.Part(text="other"), last=True),
        art("a1", m.Part(text="final"), last=True),
    )
    assert [(a.artifact_id, a.parts[0].text) for a in task.artifacts or []] == [("a1", "final"), ("a2", "other")]


def test_append_to_an_unknown_artifact_adds_it() -> None:
    task = fold(new_task(), art("a9", m.Part(text="x"), append=True, last=True))
    assert [a.artifact_id for a in task.artifacts or []] == ["a9"]


def test_lastchunk_then_new_artifact_starts_fresh() -> None:
    task = fold(
        new_task(),
        art("a1", m.Part(text="one"), last=False),
        art("a1", m.Part(text=" two"), append=True, last=True),
        art("b1", m.Part(text="three"), last=True),
    )
    assert [(a.artifact_id, a.parts) for a in task.artifacts or []] == [
        ("a1", [m.Part(text="one two")]),
        ("b1", [m.Part(text="three")]),
    ]


def test_append_keeps_first_name_and_fills_missing_metadata() -> None:
    task = fold(new_task(), art("a1", m.Part(text="x"), name="first"),
                art("a1", m.Part(text="y"), append=True, name="second", metadata={"k": 1}))
    a = task.artifacts[0]  # type: ignore[index]
    assert a.name == "first" and a.metadata == {"k": 1}


def test_fold_needs_a_task_first() -> None:
    with pytest.raises(AssertionError):
        apply(None, status(S.WORKING))


# --- trim_history ------------------------------------------------------------------------------------------------


def _task_with_history(n: int) -> m.Task:
    t = new_task()
    t.history = [msg(f"u{i}", f"m{i}") for i in range(n)]
    t.artifacts = [m.Artifact(artifact_id="a", parts=[m.Part(text="x")])]
    t.metadata = {"k": "v"}
    return t


def test_trim_history_none_returns_everything() -> None:
    t = _task_with_history(4)
    assert trim_history(t, None) is t


def test_trim_history_zero_omits_history() -> None:
    t = _task_with_history(4)
    trimmed = trim_history(t, 0)
    assert trimmed.history is None
    assert (trimmed.id, trimmed.context_id, trimmed.status, trimmed.artifacts, trimmed.metadata) == (
        t.id, t.context_id, t.status, t.artifacts, t.metadata)
    assert len(t.history or []) == 4  # the original is untouched


@pytest.mark.parametrize(("n", "expected"), [(1, ["m3"]), (2, ["m2", "m3"]), (4, ["m0", "m1", "m2", "m3"]),
                                             (10, ["m0", "m1", "m2", "m3"])])
def test_trim_history_keeps_the_most_recent(n: int, expected: list[str]) -> None:
    t = _task_with_history(4)
    assert [h.text() for h in trim_history(t, n).history or []] == expected
    assert len(t.history or []) == 4


def test_trim_history_without_history() -> None:
    t = new_task()
    t.history = None
    assert trim_history(t, 3) is t


def test_now_iso_format() -> None:
    ts = now_iso()
    assert ts.endswith("Z") and len(ts) == len("2025-01-01T00:00:00.000Z")


# --- the store contract ----------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[TaskStore]:
    s: TaskStore = MemoryTaskStore() if request.param == "memory" else SqliteTaskStore(tmp_path / "sub" / "t.db")
    yield s
    await s.close()


def record(task: m.Task, *, agent: str = "echo", owner: str = "alice", updated: float = 1000.0,
           created: float = 1000.0, parent: str | None = None) -> TaskRecord:
    return TaskRecord(task=task, agent_id=agent, owner=owner, seq=1, updated_at=updated, created_at=created,
                      parent_task_id=parent)


async def put(store: TaskStore, task: m.Task, *, message_id: str | None = None, **kw: object) -> TaskRecord:
    rec = record(task, **kw)  # type: ignore[arg-type]
    await store.create(rec, Entry(1, copy(task)), message_id or f"msg-{task.id}")
    return rec


def query(req: m.ListTasksRequest | None = None, *, agent: str = "echo", owner: str = "alice"):
    return make_query(agent, owner, req or m.ListTasksRequest())


async def test_create_and_get(store: TaskStore) -> None:
    task = new_task()
    await put(store, task, updated=1234.5, created=1200.25, parent="p0")
    got = await store.get("t1")
    assert got is not None
    assert got.task == task
    assert (got.agent_id, got.owner, got.seq, got.updated_at, got.created_at, got.parent_task_id) == (
        "echo", "alice", 1, 1234.5, 1200.25, "p0")
    assert await store.get("nope") is None
    assert [e.seq for e in await store.events_after("t1", 0)] == [1]
    assert (await store.events_after("t1", 0))[0].event == task


async def test_append_and_events_after(store: TaskStore) -> None:
    task = new_task()
    rec = await put(store, task)
    snapshot = copy(task)
    events = [
        status(S.WORKING, ts="2025-01-01T00:00:01.000Z"),
        art("a1", m.Part(text="chunk"), name="response"),
        status(S.INPUT_REQUIRED, "why?", ts="2025-01-01T00:00:02.000Z"),
    ]
    entries = []
    for i, ev in enumerate(events, 2):
        entries.append(Entry(i, ev))
        apply(snapshot, ev)
    await store.append("t1", entries[:1], copy(snapshot), 2000.0)
    await store.append("t1", entries[1:], snapshot, 2001.5)
    answer = msg("u2", "because")
    apply(snapshot, answer)
    await store.append("t1", [Entry(5, answer)], snapshot, 2002.0)

    got = await store.get("t1")
    assert got is not None and got.task == snapshot
    assert got.seq == 5 and got.updated_at == 2002.0
    assert got.task.status.state is S.INPUT_REQUIRED
    log = await store.events_after("t1", 0)
    assert [e.seq for e in log] == [1, 2, 3, 4, 5]
    assert [e.kind for e in log] == ["task", "status", "artifact", "status", "message"]
    assert [e.event for e in log[1:]] == [*events, answer]
    assert [e.seq for e in await store.events_after("t1", 3)] == [4, 5]
    assert await store.events_after("t1", 5) == []
    assert await store.events_after("unknown", 0) == []
    assert rec.task.id == "t1"


async def test_logs_are_per_task(store: TaskStore) -> None:
    await put(store, new_task("t1"))
    await put(store, new_task("t2"))
    await store.append("t2", [Entry(2, status(S.WORKING, task_id="t2"))], new_task("t2", state=S.WORKING), 5.0)
    assert [e.seq for e in await store.events_after("t1", 0)] == [1]
    assert [e.seq for e in await store.events_after("t2", 0)] == [1, 2]


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
    done = new_task("a", state=S.COMPLETED, ts="2025-01-02T00:00:00.000Z")
    await store.append("a", [Entry(2, status(S.COMPLETED, task_id="a", ts="2025-01-02T00:00:00.000Z"))], done, 99.0)
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
    assert len(set(seen)) == len(seen)
    assert pages == -(-len(stamps) // page_size)


async def test_pagination_with_filters(store: TaskStore) -> None:
    for i in range(5):
        await put(store, new_task(f"w{i}", state=S.WORKING), updated=50.0)
        await put(store, new_task(f"d{i}", state=S.COMPLETED), updated=50.0)
    seen: list[str] = []
    req = m.ListTasksRequest(status=S.WORKING, page_size=2)
    while True:
        page = await store.list(query(req))
        assert page.total == 5
        seen.extend(r.task.id for r in page.records)
        if page.next_cursor is None:
            break
        req = m.ListTasksRequest(status=S.WORKING, page_size=2, page_token=encode_cursor(page.next_cursor))
    assert seen == ["w4", "w3", "w2", "w1", "w0"]


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
    assert await after("2025-01-01T00:00:01Z") == ["t1", "t2"]
    assert await after("2025-01-01T01:00:01+01:00") == ["t1", "t2"]
    assert await after("2025-01-01T00:00:01") == ["t1", "t2"]  # no zone: UTC
    assert await after("2025-01-01T00:00:01.001Z") == ["t2"]
    assert await after("2024-12-31T23:59:59Z") == ["t0", "t1", "t2"]
    assert await after("2025-01-01T00:00:03Z") == []
    page = await store.list(query(m.ListTasksRequest(status_timestamp_after="2025-01-01T00:00:01Z")))
    assert page.total == 2


async def test_message_ids(store: TaskStore) -> None:
    await put(store, new_task("t1"), message_id="m-1")
    assert await store.find_message("echo", "alice", "m-1") == "t1"
    assert await store.find_message("echo", "bob", "m-1") is None
    assert await store.find_message("interviewer", "alice", "m-1") is None
    assert await store.find_message("echo", "alice", "m-2") is None
    await store.remember_message("echo", "alice", "m-2", "t1")
    assert await store.find_message("echo", "alice", "m-2") == "t1"
    await store.remember_message("echo", "bob", "m-1", "t-bob")
    assert await store.find_message("echo", "bob", "m-1") == "t-bob"
    assert await store.find_message("echo", "alice", "m-1") == "t1"


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
    assert await store.get_push_config("t9", "p1") is None
    assert sorted(await store.list_push_configs("t1"), key=lambda c: c.id) == [cfg1, cfg2]
    assert await store.list_push_configs("t9") == []

    replaced = m.TaskPushNotificationConfig(url="https://a2", task_id="t1", id="p1")
    await store.put_push_config(replaced)
    assert await store.get_push_config("t1", "p1") == replaced
    assert len(await store.list_push_configs("t1")) == 2

    assert await store.delete_push_config("t1", "p1") is True
    assert await store.delete_push_config("t1", "p1") is False
    assert await store.delete_push_config("t9", "p1") is False
    assert await store.get_push_config("t1", "p1") is None
    assert await store.list_push_configs("t1") == [cfg2]
    assert await store.get_push_config("t2", "p1") == other


async def test_unfinished(store: TaskStore) -> None:
    for state in S:
        await put(store, new_task(f"t-{state.name}", state=state))
    got = sorted(r.task.id for r in await store.unfinished())
    assert got == ["t-SUBMITTED", "t-WORKING"]
    await store.append("t-WORKING", [Entry(2, status(S.COMPLETED, task_id="t-WORKING"))],
                       new_task("t-WORKING", state=S.COMPLETED), 5.0)
    assert [r.task.id for r in await store.unfinished()] == ["t-SUBMITTED"]


async def test_sqlite_store_persists_across_connections(tmp_path) -> None:
    path = tmp_path / "p.db"
    first = SqliteTaskStore(path)
    task = new_task()
    await first.create(record(task), Entry(1, copy(task)), "m-1")
    await first.put_push_config(m.TaskPushNotificationConfig(url="u", task_id="t1", id="p"))
    await first.close()
    second = SqliteTaskStore(path)
    try:
        got = await second.get("t1")
        assert got is not None and got.task == task
        assert await second.find_message("echo", "alice", "m-1") == "t1"
        assert await second.get_push_config("t1", "p") is not None
    finally:
        await second.close()


# --- query checks and page tokens -------------------------------------------------------------------------------


def test_make_query_defaults_and_bounds() -> None:
    assert query().page_size == DEFAULT_PAGE_SIZE == 50
    assert query(m.ListTasksRequest(page_size=1)).page_size == 1
    assert query(m.ListTasksRequest(page_size=MAX_PAGE_SIZE)).page_size == 100
    for bad in (-1, 0, 101, 1000):  # the spec's minimum is 1, as in the official SDK
        with pytest.raises(InvalidParamsError, match="pageSize"):
            query(m.ListTasksRequest(page_size=bad))
    with pytest.raises(InvalidParamsError, match="historyLength"):
        query(m.ListTasksRequest(history_length=-1))
    with pytest.raises(InvalidParamsError, match="statusTimestampAfter"):
        query(m.ListTasksRequest(status_timestamp_after="yesterday"))
    assert query(m.ListTasksRequest(context_id="")).context_id is None


@pytest.mark.parametrize("cursor", [(0.0, "a"), (1717171717.123456, "task|with|bars"), (0.1 + 0.2, "ü-id"),
                                    (1e-300, "x"), (-5.5, "")])
def test_cursor_round_trip(cursor: tuple[float, str]) -> None:
    token = encode_cursor(cursor)
    assert "=" not in token
    assert decode_cursor(token) == cursor
    assert query(m.ListTasksRequest(page_token=token)).cursor == cursor


def test_last_page_token_is_empty() -> None:
    assert encode_cursor(None) == ""
    assert query(m.ListTasksRequest(page_token="")).cursor is None


@pytest.mark.parametrize(
    "token",
    [
        "not a token!",
        "%%%",
        base64.urlsafe_b64encode(b"no separator").decode(),
        base64.urlsafe_b64encode(b"abc|t1").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe|t1").decode(),
        "A",
    ],
)
def test_page_token_rejection(token: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        query(m.ListTasksRequest(page_token=token))
    assert info.value.code == -32602 and "pageToken" in info.value.message
