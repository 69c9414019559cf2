"""The event-log fold (`apply`, `fold`), `trim_history`, ListTasks query checks and page tokens.

The store contract is tested in test_store_contract.py."""

from __future__ import annotations

import asyncio
import base64
import gc

import pytest

from parley.protocol import models as m
from parley.protocol.codec import copy
from parley.protocol.errors import InvalidParamsError
from parley.tasks.log import Entry, apply, counts, generation_of, now_iso, stamp, trim_history
from parley.tasks.log import fold as log_fold
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.store import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    Commit,
    MessageKey,
    TaskRecord,
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
    assert snap.generation == 1 and task.generation is None  # A2A 1.1 section 3.2.7: a task starts at 1
    snap.generation = None
    assert snap == task and snap is not task
    snap.history.append(msg("x", "x"))  # type: ignore[union-attr]
    assert len(task.history or []) == 1


def test_generation_counts_status_and_artifact_events_only() -> None:
    """A2A 1.1 section 3.2.7: 1 at creation, +1 per status or artifact update, user messages not counted; a
    task that says its generation keeps it; folding a run of appended chunks at once counts each chunk."""
    assert counts(status(S.WORKING)) and counts(art("a", m.Part(text="x")))
    assert not counts(msg("u", "x")) and not counts(new_task())
    assert generation_of(new_task()) == 1
    events = [status(S.WORKING), art("a", m.Part(text="x")), art("a", m.Part(text="y"), append=True),
              art("a", m.Part(text="z"), append=True), status(S.INPUT_REQUIRED), msg("u2", "more")]
    assert fold(new_task(), *events).generation == 6
    assert log_fold(apply(None, new_task()), events).generation == 6  # the chunks folded as one run
    started = new_task()
    started.generation = 7
    assert apply(None, started).generation == 7
    assert trim_history(fold(new_task(), status(S.WORKING)), 0).generation == 2


def test_stamp_writes_the_generation_after_each_counting_event() -> None:
    """Section 3.2.7: each event carries the task's generation after it, never two events with one."""
    task = fold(new_task(), status(S.WORKING))
    events = [art("a", m.Part(text="x")), msg("u2", "more"), status(S.COMPLETED)]
    stamp(task, events)
    assert [getattr(e, "generation", None) for e in events] == [3, None, 4]
    stamp(new_task(), events[2:])
    assert events[2].generation == 2


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


def test_fold_of_one_event_is_the_fold_of_a_run_of_one() -> None:
    """A task's snapshot is the same whether its streamed chunks were committed one at a time (log.fold of one
    event: a shortcut) or together (a run of chunks, joined once), generation included (A2A 1.1 section 3.2.7)."""
    chunks = [art("a1", m.Part(text="Hel"), name="response"), art("a1", m.Part(text="lo "), append=True),
              art("a1", m.Part(text="world"), append=True), art("a1", m.Part(text="!"), append=True, last=True)]
    one_by_one = log_fold(new_task(), [status(S.WORKING)])
    for chunk in chunks:
        one_by_one = log_fold(one_by_one, [chunk])
    together = log_fold(log_fold(new_task(), [status(S.WORKING)]), chunks)
    assert one_by_one == together
    assert one_by_one.artifacts == [m.Artifact(artifact_id="a1", name="response", parts=[m.Part(text="Hello world!")])]
    assert one_by_one.generation == 6


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


def test_task_without_history_gets_one() -> None:
    """A creation snapshot may have no history at all: the first moved or sent message starts it."""
    bare = m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=S.SUBMITTED))
    task = fold(bare, status(S.WORKING, "thinking"), status(S.COMPLETED))
    assert history_texts(task) == [("agent", "thinking")]
    task = fold(bare, msg("u2", "more"))
    assert history_texts(task) == [("user", "more")]


def test_appending_to_an_artifact_without_parts() -> None:
    task = fold(new_task(), art("a1"), art("a1", m.Part(text="x"), append=True))
    assert task.artifacts[0].parts == [m.Part(text="x")]  # type: ignore[index]


def test_appending_no_parts_keeps_the_artifact() -> None:
    task = fold(new_task(), art("a1", m.Part(text="x")), art("a1", append=True, last=True))
    assert task.artifacts[0].parts == [m.Part(text="x")]  # type: ignore[index]


def test_text_after_a_data_part_is_not_joined() -> None:
    task = fold(new_task(), art("a1", m.Part(text="x"), m.Part(data={"k": 1})),
                art("a1", m.Part(text="y"), append=True))
    assert task.artifacts[0].parts == [m.Part(text="x"), m.Part(data={"k": 1}), m.Part(text="y")]  # type: ignore[index]


def test_multi_part_chunk_joins_its_first_text_and_keeps_the_rest() -> None:
    task = fold(
        new_task(),
        art("a1", m.Part(data=[1]), m.Part(text="a")),
        art("a1", m.Part(text="b"), m.Part(data={"k": 1}), m.Part(text="c"), append=True),
        art("a1", m.Part(text="d"), m.Part(url="https://example.com/x"), append=True, last=True),
    )
    assert task.artifacts[0].parts == [  # type: ignore[index]
        m.Part(data=[1]), m.Part(text="ab"), m.Part(data={"k": 1}), m.Part(text="cd"),
        m.Part(url="https://example.com/x"),
    ]


def test_joined_text_takes_the_metadata_of_the_appended_chunk() -> None:
    task = fold(new_task(), art("a1", m.Part(text="x")), art("a1", m.Part(text="y", metadata={"k": 1}), append=True),
                art("a1", m.Part(text="z"), append=True))
    # The joined part now has metadata, so the next chunk is kept apart.
    assert task.artifacts[0].parts == [m.Part(text="xy", metadata={"k": 1}), m.Part(text="z")]  # type: ignore[index]


def _full(aid: str, text: str, *, append: bool = False, name: str | None = None, description: str | None = None,
          metadata: dict | None = None, extensions: list[str] | None = None) -> m.TaskArtifactUpdateEvent:
    return m.TaskArtifactUpdateEvent(
        task_id="t1", context_id="c1", append=append,
        artifact=m.Artifact(artifact_id=aid, parts=[m.Part(text=text)], name=name, description=description,
                            metadata=metadata, extensions=extensions))


def test_append_fills_what_the_first_chunk_left_out() -> None:
    task = fold(new_task(), _full("a1", "x"),
                _full("a1", "y", append=True, name="report", description="the report", metadata={"k": 1},
                      extensions=["urn:x"]))
    a = task.artifacts[0]  # type: ignore[index]
    assert (a.name, a.description, a.metadata, a.extensions) == ("report", "the report", {"k": 1}, ["urn:x"])
    assert a.parts == [m.Part(text="xy")]


def test_append_keeps_what_the_first_chunk_said() -> None:
    task = fold(new_task(),
                _full("a1", "x", name="first", description="first d", metadata={"k": 1}, extensions=["urn:a"]),
                _full("a1", "y", append=True, name="second", description="second d", metadata={"k": 2},
                      extensions=["urn:b"]),
                _full("a1", "z", append=True))  # a chunk that says nothing changes nothing
    a = task.artifacts[0]  # type: ignore[index]
    assert (a.name, a.description, a.metadata, a.extensions) == ("first", "first d", {"k": 1}, ["urn:a"])
    assert a.parts == [m.Part(text="xyz")]


def test_fold_makes_a_new_snapshot_and_leaves_the_committed_one_alone() -> None:
    base = fold(new_task(), status(S.WORKING, "thinking"), art("a1", m.Part(text="x")), art("a2", m.Part(text="y")))
    committed = copy(base)
    out = log_fold(base, [
        art("a1", m.Part(text="x2")),  # replaces a1
        art("a2", m.Part(text="+"), append=True),
        art("a3", m.Part(text="z")),  # a new artifact
        status(S.INPUT_REQUIRED, "why?"),
        msg("u2", "because"),
        status(S.COMPLETED, "done"),
    ])
    assert out is not base
    assert base == committed  # nothing of the committed snapshot changed, not even its lists
    assert [(a.artifact_id, a.parts) for a in out.artifacts or []] == [
        ("a1", [m.Part(text="x2")]), ("a2", [m.Part(text="y+")]), ("a3", [m.Part(text="z")])]
    assert history_texts(out) == [("user", "hello"), ("agent", "thinking"), ("agent", "why?"), ("user", "because")]
    assert out.status.state is S.COMPLETED and out.status.message is not None
    assert out.status.message.text() == "done"


def test_fold_of_nothing_is_an_equal_copy() -> None:
    base = new_task()
    out = log_fold(base, [])
    assert out == base and out is not base


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


@pytest.mark.parametrize("n", [0, 1, 5])
def test_trim_an_empty_history_omits_it(n: int) -> None:
    t = _task_with_history(0)
    assert t.history == []
    assert trim_history(t, n).history is None


def test_now_iso_at_given_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same instants, formatted: milliseconds truncated, never rounded up into the next second."""
    import parley.tasks.log as log_module

    for t, expected in ((1_700_000_000.0, "2023-11-14T22:13:20.000Z"), (1_700_000_000.5004, "2023-11-14T22:13:20.500Z"),
                        (1_700_000_000.9995, "2023-11-14T22:13:20.999Z"), (1_700_000_061.25, "2023-11-14T22:14:21.250Z")):
        monkeypatch.setattr(log_module.time, "time", lambda t=t: t)
        assert now_iso() == expected


def test_now_iso_format() -> None:
    """Status timestamps are ISO 8601 UTC with milliseconds (A2A 1.0 section 4.1.3, TaskStatus.timestamp), and
    the time they say is now (the per-second text it reuses is the current second's)."""
    import re
    import time
    from datetime import datetime

    for _ in range(3):
        before = time.time()
        ts = now_iso()
        after = time.time()
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", ts), ts
        said = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        assert before - 0.001 <= said <= after, (before, ts, after)


def query(req: m.ListTasksRequest | None = None, *, agent: str = "echo", owner: str = "alice"):
    return make_query(agent, owner, req or m.ListTasksRequest())


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


# --- what the garbage collector walks ----------------------------------------------------------------------


def test_log_entries_and_protocol_models_are_not_walked_by_the_garbage_collector() -> None:
    """Entries and the models they hold are plain data without reference cycles: untracked, a full
    collection does not walk them (see the next test for why that matters)."""
    entry = Entry(3, status(S.COMPLETED, "done"))
    assert not gc.is_tracked(entry)
    assert not gc.is_tracked(entry.event)
    assert not gc.is_tracked(new_task())
    assert not gc.is_tracked(m.Part(text="x"))


def test_a_finished_task_kept_in_memory_adds_few_objects_for_the_garbage_collector() -> None:
    """`--memory` keeps up to 10,000 finished tasks. A full collection walks every tracked object, and
    pauses the server meanwhile: with each echo task's ~37 tracked objects it took 40-75 ms on the bench
    VM, every couple of seconds under load (bench/RESULTS.md). Now an echo-shaped task (creation, the
    user's message, working, an artifact, completed) leaves fewer than 8 (records, keys and change-feed rows
    are untracked structs too)."""

    async def keep(n: int) -> MemoryTaskStore:
        store = MemoryTaskStore(keep_finished=None)
        for i in range(n):
            tid = f"t{i}"
            first = m.Message(message_id=f"u{i}", role=m.Role.USER, parts=[m.Part(text="hello")],
                              task_id=tid, context_id="c1")
            created = new_task(tid, first=first)
            entries = [Entry(1, created), Entry(2, status(S.WORKING, task_id=tid)),
                       Entry(3, m.TaskArtifactUpdateEvent(task_id=tid, context_id="c1",
                                                          artifact=m.Artifact(artifact_id="a", parts=[m.Part(text="hello")]))),
                       Entry(4, status(S.COMPLETED, task_id=tid))]
            snapshot = created
            for e in entries[1:]:
                snapshot = apply(snapshot, e)
            record = TaskRecord(task=created, agent_id="echo", owner="anonymous", seq=0, updated_at=1.0)
            await store.commit(Commit(task_id=tid, expected_seq=0, entries=entries, snapshot=snapshot,
                                      updated_at=1.0, record=record,
                                      message=MessageKey("echo", "anonymous", f"u{i}", "f")))
        return store

    gc.collect()
    before = len(gc.get_objects())
    store = asyncio.run(keep(500))
    gc.collect()
    per_task = (len(gc.get_objects()) - before) / 500
    assert store is not None and per_task < 8, per_task


# --- fold: a run of text chunks is joined once (issue 25: readers of a lagging snapshot fold thousands) ---------


def _chunk_on(aid: str, *parts: m.Part, append: bool = True, **artifact: object) -> m.TaskArtifactUpdateEvent:
    return m.TaskArtifactUpdateEvent(task_id="t1", context_id="c1", append=append,
                                     artifact=m.Artifact(artifact_id=aid, parts=list(parts), **artifact))


FOLD_ALPHABET = {
    "x": _chunk_on("a", m.Part(text="x")),
    "y-named": _chunk_on("a", m.Part(text="y"), name="N", description="D", metadata={"k": 1}, extensions=["e"]),
    "z-empty-name": _chunk_on("a", m.Part(text="z"), name="", description=""),
    "w-other": _chunk_on("b", m.Part(text="w")),
    "v-other-named": _chunk_on("b", m.Part(text="v"), name="B"),
    "part-metadata": _chunk_on("a", m.Part(text="p", metadata={"m": 1})),
    "media-type": _chunk_on("a", m.Part(text="q", media_type="text/markdown")),
    "filename": _chunk_on("a", m.Part(text="f", filename="f.txt")),
    "two-parts": _chunk_on("a", m.Part(text="r"), m.Part(text="s")),
    "data": _chunk_on("a", m.Part(data={"d": 1})),
    "replace": _chunk_on("a", m.Part(text="new"), append=False, name="R"),
    "status": m.TaskStatusUpdateEvent(task_id="t1", context_id="c1", status=m.TaskStatus(state=S.WORKING)),
}
FOLD_STARTS = {
    "no-artifacts": new_task(state=S.WORKING),
    "text": m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=S.WORKING),
                   artifacts=[m.Artifact(artifact_id="a", parts=[m.Part(text="A")])]),
    "named-data": m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=S.WORKING),
                         artifacts=[m.Artifact(artifact_id="a", name="first", parts=[m.Part(data=[1])])]),
}


def one_by_one(start: m.Task, events: list) -> m.Task:
    """The reference: each event applied in turn."""
    out = copy(start)
    for ev in events:
        out = apply(out, ev)
    return out


@pytest.mark.parametrize("start", list(FOLD_STARTS))
def test_fold_equals_applying_each_event_in_turn(start: str) -> None:
    """Every sequence of up to four events from FOLD_ALPHABET (runs of plain text chunks on one artifact,
    broken by other artifacts, parts that carry more than text, replacements and statuses) folds to exactly
    the task that applying the events one by one gives."""
    import itertools

    base = FOLD_STARTS[start]
    names = list(FOLD_ALPHABET)
    for length in range(1, 5):
        for combo in itertools.product(names, repeat=length):
            events = [FOLD_ALPHABET[n] for n in combo]
            assert log_fold(base, events) == one_by_one(base, events), combo


@pytest.mark.parametrize("start", list(FOLD_STARTS))
def test_a_joined_run_of_one_chunk_folds_like_the_chunk(start: str) -> None:
    """fold takes a run of one chunk as itself; the joining it does for longer runs must give the same task for
    one (its fields taken from the run's first and last chunks, as for any run)."""
    from parley.tasks import log as log_module

    for name, event in FOLD_ALPHABET.items():
        if log_module._run_key(event) is None:
            continue
        base = FOLD_STARTS[start]
        assert apply(copy(base), log_module._joined([event])) == apply(copy(base), event), name


def test_a_run_of_text_chunks_is_joined_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folding k chunks onto a text of size S costs S + k, not k * S: a run of plain text chunks on one artifact
    is merged into the snapshot once (the mechanism that keeps reading a lagging snapshot linear)."""
    from parley.tasks import log as log_module

    merges: list[int] = []
    real = log_module._merge_parts

    def counted(old: list[m.Part], new: list[m.Part]) -> list[m.Part]:
        merges.append(len(new))
        return real(old, new)

    monkeypatch.setattr(log_module, "_merge_parts", counted)
    start = FOLD_STARTS["text"]
    events = [FOLD_ALPHABET[n] for n in ("x", "y-named", "x", "status", "x", "x", "w-other", "x")]
    expected = one_by_one(start, events)
    assert len(merges) == 6  # one by one: a merge per chunk on "a"
    merges.clear()
    assert log_fold(start, events) == expected
    assert len(merges) == 3  # x y x | x x | x: three runs on "a"; "w-other" adds "b"


def test_fold_of_many_chunks_is_one_text() -> None:
    start = FOLD_STARTS["text"]
    events = [_chunk_on("a", m.Part(text=str(i % 10))) for i in range(5000)]
    folded = log_fold(start, events)
    assert folded.artifacts == [m.Artifact(artifact_id="a", parts=[m.Part(text="A" + "0123456789" * 500)])]
    assert start.artifacts == [m.Artifact(artifact_id="a", parts=[m.Part(text="A")])]  # left as it was
