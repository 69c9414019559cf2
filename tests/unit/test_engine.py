"""TaskEngine with the in-memory store and small agents (no HTTP)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from enginekit import bounded, make_engine

from parley.agents.base import AgentOutput, ArtifactChunk, RunContext, Status
from parley.protocol import models as m
from parley.protocol.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from parley.protocol.states import is_terminal
from parley.tasks.engine import PACE_SECONDS, RESTART_MESSAGE, Submission, TaskEngine
from parley.tasks.log import Entry, apply, now_iso
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.store import TaskRecord

S = m.TaskState
OWNER = "alice"


def request(text: str = "hello", mid: str | None = None, *, task_id: str | None = None,
            context_id: str | None = None, role: m.Role = m.Role.USER) -> m.SendMessageRequest:
    request.counter += 1  # type: ignore[attr-defined]
    return m.SendMessageRequest(message=m.Message(
        message_id=mid or f"msg-{request.counter}",  # type: ignore[attr-defined]
        role=role, parts=[m.Part(text=text)], task_id=task_id, context_id=context_id,
    ))


request.counter = 0  # type: ignore[attr-defined]


async def finish(engine: TaskEngine, sub: Submission) -> m.Task:
    """Wait until the task settles and its run has ended; return the stored snapshot."""
    await engine.wait_settled(sub)
    if sub.run is not None and sub.run.aio is not None:
        await sub.run.aio
    rec = await engine.store.get(sub.record.task.id)
    assert rec is not None
    return rec.task


async def log_of(engine: TaskEngine, task_id: str) -> list[Entry]:
    return await engine.store.events_after(task_id, 0)


def describe(entry: Entry) -> tuple:
    ev = entry.event
    if isinstance(ev, m.Task):
        return ("task", ev.status.state)
    if isinstance(ev, m.Message):
        return ("message", ev.text())
    if isinstance(ev, m.TaskStatusUpdateEvent):
        return ("status", ev.status.state)
    return ("artifact", "".join(p.text or "" for p in ev.artifact.parts), ev.append, ev.last_chunk)


async def assert_log_consistent(engine: TaskEngine, task_id: str) -> None:
    """The log is 1..n without gaps and folding it gives the stored snapshot."""
    log = await log_of(engine, task_id)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    snap = None
    for e in log:
        snap = apply(snap, e)
    rec = await engine.store.get(task_id)
    assert rec is not None and rec.seq == len(log)
    assert snap == rec.task


# --- agents ------------------------------------------------------------------------------------------------------


async def words(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    for w in ("Hello", " brave", " world"):
        yield w


async def asker(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    users = [h.text() for h in ctx.history if h.role is m.Role.USER]
    if ctx.turn == 1:
        yield ctx.ask(f"Why {users[0]}?")
        return
    yield f"{users[0]} because {users[-1]}"


async def boom(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield "partial"
    raise RuntimeError("the model went away")


async def weird(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield 42  # type: ignore[misc]


# --- lifecycle -------------------------------------------------------------------------------------------------


async def test_new_task_lifecycle_entries_in_order() -> None:
    engine = make_engine(words)
    sub = await engine.submit("words", OWNER, request("hi"))
    assert not sub.duplicate
    assert sub.first.seq == 1 and isinstance(sub.first.event, m.Task)
    assert sub.first.event.status.state is S.SUBMITTED
    task = await finish(engine, sub)
    assert task.status.state is S.COMPLETED
    log = await log_of(engine, task.id)
    assert [describe(e) for e in log] == [
        ("task", S.SUBMITTED),
        ("status", S.WORKING),
        ("artifact", "Hello brave world", False, True),  # yielded in one loop turn: coalesced
        ("status", S.COMPLETED),
    ]
    ids = {e.event.artifact.artifact_id for e in log if isinstance(e.event, m.TaskArtifactUpdateEvent)}
    assert len(ids) == 1
    assert task.artifacts is not None and task.artifacts[0].parts == [m.Part(text="Hello brave world")]
    assert task.artifacts[0].name == "response"
    assert [h.text() for h in task.history or []] == ["hi"]
    assert task.history[0].task_id == task.id and task.history[0].context_id == task.context_id  # type: ignore[index]
    for e in log[1:]:
        assert e.event.task_id == task.id and e.event.context_id == task.context_id  # type: ignore[union-attr]
    await assert_log_consistent(engine, task.id)
    assert task.id not in engine.runs


async def test_client_context_id_is_kept() -> None:
    engine = make_engine(words)
    task = await finish(engine, await engine.submit("words", OWNER, request(context_id="my-ctx")))
    assert task.context_id == "my-ctx"


async def test_only_the_last_text_chunk_is_marked_last() -> None:
    async def chunks(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        for c in "abcde":
            yield c
            await asyncio.sleep(0)  # a loop turn between chunks: each is its own chunk

    engine = make_engine(chunks)
    task = await finish(engine, await engine.submit("chunks", OWNER, request()))
    arts = [e.event for e in await log_of(engine, task.id) if isinstance(e.event, m.TaskArtifactUpdateEvent)]
    # Each piece is written at its flush, without waiting for the next (issue 25); the end is an empty last chunk.
    assert [a.artifact.parts[0].text for a in arts] == [*"abcde", ""]
    assert [a.last_chunk for a in arts] == [False, False, False, False, False, True]
    assert [a.append for a in arts] == [False, True, True, True, True, True]
    assert task.artifacts[0].parts == [m.Part(text="abcde")]  # type: ignore[index]


async def test_single_text_chunk_is_last() -> None:
    async def one(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield "only"

    engine = make_engine(one)
    task = await finish(engine, await engine.submit("one", OWNER, request()))
    arts = [describe(e) for e in await log_of(engine, task.id) if e.kind == "artifact"]
    assert arts == [("artifact", "only", False, True)]


async def test_text_is_written_before_a_status_or_an_artifact_and_the_answer_stays_one_artifact() -> None:
    """Issue 26: a working status or another artifact between two pieces of text leaves one text artifact;
    the log keeps the agent's order; the answer's end marks lastChunk."""
    async def mixed(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield "a"
        yield "b"
        yield ctx.say("halfway")
        yield "c"
        yield m.Artifact(artifact_id="file", parts=[m.Part(data={"k": 1})])
        yield ArtifactChunk(m.Artifact(artifact_id="log", parts=[m.Part(text="x")]), last_chunk=False)
        yield ArtifactChunk(m.Artifact(artifact_id="log", parts=[m.Part(text="y")]), append=True)

    engine = make_engine(mixed)
    task = await finish(engine, await engine.submit("mixed", OWNER, request()))
    log = await log_of(engine, task.id)
    assert [describe(e) for e in log] == [
        ("task", S.SUBMITTED),
        ("status", S.WORKING),
        ("artifact", "ab", False, False),
        ("status", S.WORKING),
        ("artifact", "c", True, False),
        ("artifact", "", False, True),
        ("artifact", "x", False, False),
        ("artifact", "y", True, True),
        ("artifact", "", True, True),
        ("status", S.COMPLETED),
    ]
    text_ids = {log[i].event.artifact.artifact_id for i in (2, 4, 8)}  # type: ignore[union-attr]
    assert len(text_ids) == 1
    assert task.artifacts is not None
    assert [(a.artifact_id, a.name) for a in task.artifacts] == [
        (*text_ids, "response"), ("file", None), ("log", None)]
    assert task.artifacts[0].parts == [m.Part(text="abc")]
    assert [h.text() for h in task.history or []] == ["hello", "halfway"]
    await assert_log_consistent(engine, task.id)


async def test_agent_message_becomes_a_working_status() -> None:
    async def talker(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield m.Message(message_id="x", role=m.Role.AGENT, parts=[m.Part(text="note")])

    engine = make_engine(talker)
    task = await finish(engine, await engine.submit("talker", OWNER, request()))
    statuses = [e.event.status for e in await log_of(engine, task.id) if e.kind == "status"]
    assert [s.state for s in statuses] == [S.WORKING, S.WORKING, S.COMPLETED]
    assert statuses[1].message is not None and statuses[1].message.text() == "note"
    assert statuses[1].message.role is m.Role.AGENT


async def test_internal_events_go_to_observers_not_the_log() -> None:
    async def observed(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.internal("llm-call", tokens=3)
        yield "done"

    seen: list[tuple[str, str, dict]] = []
    engine = make_engine(observed, observers=[lambda tid, ev: seen.append((tid, ev.kind, ev.data))])
    task = await finish(engine, await engine.submit("observed", OWNER, request()))
    assert seen == [(task.id, "internal:llm-call", {"tokens": 3})]
    assert [e.kind for e in await log_of(engine, task.id)] == ["task", "status", "artifact", "status"]


async def test_agent_can_reject_or_fail_explicitly() -> None:
    async def picky(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.reject("not my job") if ctx.text == "reject" else ctx.fail("cannot")

    engine = make_engine(picky)
    task = await finish(engine, await engine.submit("picky", OWNER, request("reject")))
    assert task.status.state is S.REJECTED and task.status.message.text() == "not my job"  # type: ignore[union-attr]
    task = await finish(engine, await engine.submit("picky", OWNER, request("other")))
    assert task.status.state is S.FAILED and task.status.message.text() == "cannot"  # type: ignore[union-attr]


# --- failures ----------------------------------------------------------------------------------------------------


async def test_agent_exception_fails_the_task_without_a_traceback() -> None:
    engine = make_engine(boom)
    task = await finish(engine, await engine.submit("boom", OWNER, request()))
    assert task.status.state is S.FAILED
    text = task.status.message.text()  # type: ignore[union-attr]
    assert text.startswith("Agent boom failed (error ") and "the model went away" not in text  # the log has it
    assert "Traceback" not in text and "File \"" not in text and "\n" not in text
    # The text produced before the failure is kept, marked as the last chunk.
    arts = [describe(e) for e in await log_of(engine, task.id) if e.kind == "artifact"]
    assert arts == [("artifact", "partial", False, True)]
    await assert_log_consistent(engine, task.id)


async def test_agent_yielding_an_invalid_thing_fails_the_task() -> None:
    engine = make_engine(weird)
    task = await finish(engine, await engine.submit("weird", OWNER, request()))
    assert task.status.state is S.FAILED
    assert task.status.message.text().startswith("Invalid agent response")  # type: ignore[union-attr]
    await assert_log_consistent(engine, task.id)


async def test_agent_invalid_transition_fails_the_task() -> None:
    async def backwards(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield Status(S.SUBMITTED)

    engine = make_engine(backwards)
    task = await finish(engine, await engine.submit("backwards", OWNER, request()))
    assert task.status.state is S.FAILED
    assert task.status.message.text().startswith("Invalid agent response")  # type: ignore[union-attr]
    await assert_log_consistent(engine, task.id)


async def test_invalid_transition_after_pending_text_keeps_log_and_snapshot_consistent() -> None:
    """Held-back text is flushed together with the agent's bad status; the batch must not half-apply."""

    async def text_then_backwards(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield "some text"
        yield Status(S.SUBMITTED)

    engine = make_engine(text_then_backwards)
    task = await finish(engine, await engine.submit("text_then_backwards", OWNER, request()))
    assert task.status.state is S.FAILED
    assert task.status.message.text().startswith("Invalid agent response")  # type: ignore[union-attr]
    await assert_log_consistent(engine, task.id)


async def test_non_user_message_is_rejected() -> None:
    engine = make_engine(words)
    with pytest.raises(InvalidParamsError):
        await engine.submit("words", OWNER, request(role=m.Role.AGENT))
    assert engine.runs == {}


# --- cancel ------------------------------------------------------------------------------------------------------


async def test_cancel_really_cancels_the_agent() -> None:
    started = asyncio.Event()
    record: list[str] = []

    async def sleeper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield "thinking"
        started.set()
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            record.append("cancelled")
            raise
        record.append("resumed")  # pragma: no cover - must not happen
        yield "too late"

    engine = make_engine(sleeper)
    sub = await engine.submit("sleeper", OWNER, request())
    await started.wait()
    task = await engine.cancel("sleeper", OWNER, m.CancelTaskRequest(id=sub.record.task.id, metadata={"why": "x"}))
    assert task.status.state is S.CANCELED
    assert record == ["cancelled"]
    assert sub.run is not None and sub.run.aio is not None and sub.run.aio.done()
    assert task.id not in engine.runs
    log = await log_of(engine, task.id)
    assert describe(log[-1]) == ("status", S.CANCELED)
    assert log[-1].event.metadata == {"why": "x"}  # type: ignore[union-attr]
    # The text yielded before the cancel was written at once (issue 25); nothing is written after the cancel.
    assert [describe(e) for e in log if e.kind == "artifact"] == [("artifact", "thinking", False, False)]
    assert (await engine.store.get(task.id)).task.status.state is S.CANCELED  # type: ignore[union-attr]
    await assert_log_consistent(engine, task.id)


async def test_cancel_before_the_agent_started() -> None:
    """An engine that shares its store (not `sole`) commits a new task before its agent starts: a cancel that
    comes first means the agent never runs."""
    ran: list[str] = []

    async def never(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        ran.append("ran")
        yield "x"

    engine = make_engine(never, sole=False)
    sub = await engine.submit("never", OWNER, request())
    task = await engine.cancel("never", OWNER, m.CancelTaskRequest(id=sub.record.task.id))
    assert task.status.state is S.CANCELED and ran == []
    await assert_log_consistent(engine, task.id)


async def test_cancel_an_input_required_task() -> None:
    engine = make_engine(asker)
    task = await finish(engine, await engine.submit("asker", OWNER, request("x")))
    assert task.status.state is S.INPUT_REQUIRED
    task = await engine.cancel("asker", OWNER, m.CancelTaskRequest(id=task.id))
    assert task.status.state is S.CANCELED
    await assert_log_consistent(engine, task.id)


async def test_cancel_finished_task_is_not_cancelable() -> None:
    engine = make_engine(words)
    task = await finish(engine, await engine.submit("words", OWNER, request()))
    with pytest.raises(TaskNotCancelableError) as info:
        await engine.cancel("words", OWNER, m.CancelTaskRequest(id=task.id))
    assert info.value.code == -32002
    canceled = make_engine(asker)
    t2 = await finish(canceled, await canceled.submit("asker", OWNER, request()))
    await canceled.cancel("asker", OWNER, m.CancelTaskRequest(id=t2.id))
    with pytest.raises(TaskNotCancelableError):
        await canceled.cancel("asker", OWNER, m.CancelTaskRequest(id=t2.id))


async def test_cancel_unknown_or_foreign_task_is_not_found() -> None:
    engine = make_engine(asker)
    with pytest.raises(TaskNotFoundError):
        await engine.cancel("asker", OWNER, m.CancelTaskRequest(id="nope"))
    task = await finish(engine, await engine.submit("asker", OWNER, request()))
    with pytest.raises(TaskNotFoundError):
        await engine.cancel("asker", "bob", m.CancelTaskRequest(id=task.id))


# --- multi-turn ----------------------------------------------------------------------------------------------------


async def test_continue_an_input_required_task() -> None:
    engine = make_engine(asker)
    first = await finish(engine, await engine.submit("asker", OWNER, request("Rust")))
    assert first.status.state is S.INPUT_REQUIRED
    assert first.status.message.text() == "Why Rust?"  # type: ignore[union-attr]
    sub = await engine.submit("asker", OWNER, request("it is fast", task_id=first.id))
    assert sub.record.task.id == first.id
    task = await finish(engine, sub)
    assert task.status.state is S.COMPLETED
    assert task.context_id == first.context_id
    assert [(h.role, h.text()) for h in task.history or []] == [
        (m.Role.USER, "Rust"), (m.Role.AGENT, "Why Rust?"), (m.Role.USER, "it is fast")]
    assert task.artifacts[-1].parts == [m.Part(text="Rust because it is fast")]  # type: ignore[index]
    log = await log_of(engine, task.id)
    assert [describe(e) for e in log] == [
        ("task", S.SUBMITTED),
        ("status", S.WORKING),
        ("status", S.INPUT_REQUIRED),
        ("message", "it is fast"),
        ("status", S.WORKING),
        ("artifact", "Rust because it is fast", False, True),
        ("status", S.COMPLETED),
    ]
    # The continuing submission starts streaming after the user's message and the new working status.
    assert sub.first.seq == 5
    await assert_log_consistent(engine, task.id)


async def test_continue_right_after_the_interruption_while_the_agent_cleans_up() -> None:
    """A client answers as soon as it sees input-required; the agent's generator is still closing."""
    release = asyncio.Event()

    async def tidy(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        try:
            if ctx.turn == 1:
                yield ctx.ask("why?")
                return
            yield "thanks"
        finally:
            if ctx.turn == 1:
                await release.wait()  # e.g. closing a connection

    engine = make_engine(tidy)
    first = await engine.submit("tidy", OWNER, request("a"))
    assert (await engine.wait_settled(first)).status.state is S.INPUT_REQUIRED
    answer = asyncio.create_task(engine.submit("tidy", OWNER, request("b", task_id=first.record.task.id)))
    release.set()
    sub = await answer
    task = await finish(engine, sub)
    assert task.status.state is S.COMPLETED
    await engine.shutdown()


async def test_continue_with_a_mismatched_context_is_invalid() -> None:
    engine = make_engine(asker)
    first = await finish(engine, await engine.submit("asker", OWNER, request()))
    with pytest.raises(InvalidParamsError):
        await engine.submit("asker", OWNER, request(task_id=first.id, context_id="other"))
    sub = await engine.submit("asker", OWNER, request(task_id=first.id, context_id=first.context_id))
    assert (await finish(engine, sub)).status.state is S.COMPLETED


async def test_message_to_a_terminal_task_is_unsupported() -> None:
    engine = make_engine(words)
    task = await finish(engine, await engine.submit("words", OWNER, request()))
    with pytest.raises(UnsupportedOperationError) as info:
        await engine.submit("words", OWNER, request("again", task_id=task.id))
    assert info.value.code == -32004 and "completed" in info.value.message


async def test_message_to_a_working_task_is_unsupported() -> None:
    gate = asyncio.Event()

    async def waiter(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        await gate.wait()
        yield "done"

    engine = make_engine(waiter)
    sub = await engine.submit("waiter", OWNER, request())
    with pytest.raises(UnsupportedOperationError):
        await engine.submit("waiter", OWNER, request(task_id=sub.record.task.id))
    gate.set()
    await finish(engine, sub)


async def test_message_to_an_unknown_task_is_not_found() -> None:
    engine = make_engine(words)
    with pytest.raises(TaskNotFoundError):
        await engine.submit("words", OWNER, request(task_id="no-such-task"))


async def test_another_owners_or_agents_running_task_is_not_found() -> None:
    """A running task is invisible to other owners and other agents, like a stored one."""
    gate = asyncio.Event()

    async def waiter(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        await gate.wait()
        yield "done"

    engine = make_engine(waiter, words)
    sub = await engine.submit("waiter", OWNER, request())
    task_id = sub.record.task.id
    with pytest.raises(TaskNotFoundError):
        await engine.submit("waiter", "bob", request(task_id=task_id))
    with pytest.raises(TaskNotFoundError):
        await engine.submit("words", OWNER, request(task_id=task_id))
    gate.set()
    await finish(engine, sub)
    with pytest.raises(TaskNotFoundError):
        await engine.submit("waiter", "bob", request(task_id=task_id))


# --- idempotency ------------------------------------------------------------------------------------------------------


async def test_duplicate_message_id_returns_the_same_task() -> None:
    runs: list[str] = []

    async def counted(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        runs.append(ctx.text)
        yield "ok"

    engine = make_engine(counted)
    first = await engine.submit("counted", OWNER, request("one", mid="same-id"))
    again = await engine.submit("counted", OWNER, request("one", mid="same-id"))  # while running
    assert again.duplicate and again.record.task.id == first.record.task.id
    task = await finish(engine, first)
    late = await engine.submit("counted", OWNER, request("one", mid="same-id"))  # after it finished
    assert late.duplicate and late.record.task.id == task.id and late.run is None
    assert late.record.task.status.state is S.COMPLETED
    assert runs == ["one"]
    # Another owner may use the same message id: a new task.
    other = await engine.submit("counted", "bob", request("one", mid="same-id"))
    assert not other.duplicate and other.record.task.id != task.id
    await finish(engine, other)
    assert runs == ["one", "one"]


# --- one-pass creation (the store's sole writer) ------------------------------------------------------------------------


class CountingStore(MemoryTaskStore):
    """A memory store that keeps every commit it was given (to count transactions)."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list = []

    async def commit(self, commit: Any) -> None:
        self.commits.append(commit)
        await super().commit(commit)


async def test_a_fast_agent_s_task_is_created_and_finished_in_one_commit() -> None:
    """Sole writer: the creation is committed with what the agent produced before its first wait; for an agent
    that answers at once that is the whole task, and the sender hears of it only after that commit."""
    store = CountingStore()
    engine = make_engine(words, store=store)
    sub = await engine.submit("words", OWNER, request("hi", mid="one-pass"))
    assert len(store.commits) == 1
    stored = await store.get(sub.record.task.id)
    assert stored is not None and stored.task.status.state is S.COMPLETED  # durable before submit returned
    commit = store.commits[0]
    assert commit.record is not None and commit.message is not None and commit.release_lease
    assert [e.kind for e in commit.entries] == ["task", "status", "artifact", "status"]
    assert sub.committed == commit.entries[1:]  # a stream of this send starts with them, without a read
    await finish(engine, sub)
    await assert_log_consistent(engine, sub.record.task.id)


async def test_a_fast_agent_s_task_is_one_commit_on_a_busy_loop_too() -> None:
    """A server under load: other work holds the loop for longer than PACE_SECONDS between the send and the
    agent's first step. The pacing of an agent that never waits counts from when the agent got the loop, not
    from when its creation's flush was asked for, so the creation still carries the whole answer (measured:
    38% of unary and 48-69% of streamed echo tasks took two commits at 64 connections, bench/RESULTS.md 2026-11-29)."""
    store = CountingStore()
    engine = make_engine(words, store=store)
    loop = asyncio.get_running_loop()
    # Runs before the agent's first step (it was queued first): the loop busy with other requests' work.
    loop.call_soon(time.sleep, PACE_SECONDS * 3)
    sub = await engine.submit("words", OWNER, request("hi", mid="busy-loop"))
    assert len(store.commits) == 1
    assert [e.kind for e in store.commits[0].entries] == ["task", "status", "artifact", "status"]
    await finish(engine, sub)
    await assert_log_consistent(engine, sub.record.task.id)


async def test_a_waiting_agent_s_task_is_stored_before_the_sender_hears_of_it() -> None:
    """An agent that waits before its first output: its task is committed (with `working`) one loop turn later,
    and that is when the sender gets it; it can be read and canceled from then on."""
    gate = asyncio.Event()

    async def slow(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        await gate.wait()
        yield "late"

    store = CountingStore()
    engine = make_engine(slow, store=store)
    sub = await engine.submit("slow", OWNER, request("x"))
    stored = await store.get(sub.record.task.id)
    assert stored is not None and stored.task.status.state is S.WORKING
    assert len(store.commits) == 1 and store.commits[0].lease is not None
    task = await engine.cancel("slow", OWNER, m.CancelTaskRequest(id=sub.record.task.id))
    assert task.status.state is S.CANCELED
    await assert_log_consistent(engine, task.id)


async def test_the_same_message_sent_twice_at_once_runs_its_agent_once() -> None:
    """Sole writer: the second send of a message whose task is still being created waits for it and gets that
    task; the agent runs once (A2A 1.0 section 3.1.1: the messageId identifies the message)."""
    runs: list[str] = []
    gate = asyncio.Event()

    async def counted(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        runs.append(ctx.text)
        await gate.wait()
        yield "ok"

    engine = make_engine(counted)
    first, again = await asyncio.gather(engine.submit("counted", OWNER, request("one", mid="twice")),
                                        engine.submit("counted", OWNER, request("one", mid="twice")))
    assert again.duplicate and again.record.task.id == first.record.task.id and not first.duplicate
    gate.set()
    await finish(engine, first)
    assert runs == ["one"]


async def test_the_sole_engine_of_its_store_renews_no_lease_and_its_runs_outlive_their_lease() -> None:
    """The only engine of a store (SQLite, `--memory`: `TaskStore.exclusive`) keeps no lease heartbeat: no other engine
    could take its leases, and renewing every running task's row every few seconds held the event loop 10-15 ms
    per beat with 1,000 streams open on SQLite (bench/RESULTS.md). A run whose lease has long expired streams on,
    and a cancel reaches it here. (Several engines on one store: tests/unit/test_engines_shared.py.)"""
    gate = asyncio.Event()
    renewals: list[list[str]] = []

    class CountingStore(MemoryTaskStore):
        async def renew_leases(self, holder: str, task_ids: list[str], expires_at: float) -> set[str]:
            renewals.append(task_ids)
            return await super().renew_leases(holder, task_ids, expires_at)

    async def paced(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        for i in range(3):
            await gate.wait()
            gate.clear()
            yield f"w{i} "

    store = CountingStore()
    engine = make_engine(paced, store=store, lease_seconds=0.01)
    assert engine.sole
    await engine.start()
    try:
        sub = await engine.submit("paced", OWNER, request("x"))
        task_id = sub.record.task.id
        lease = await store.lease(task_id)
        assert lease is not None and lease.holder == engine.holder
        while time.time() <= lease.expires_at:  # the lease runs out (0.01 s), with nobody to renew it
            await asyncio.sleep(0.005)
        gate.set()  # the run goes on past it
        await bounded(wait_for_text(engine, task_id, "w0 "), "the first word after the lease expired")
        canceled = await engine.cancel("paced", OWNER, m.CancelTaskRequest(id=task_id))
        assert canceled.status.state is S.CANCELED
        assert sub.run is not None and sub.run.aio is not None and sub.run.aio.done()  # stopped here
        assert renewals == []
    finally:
        await engine.shutdown()


async def wait_for_text(engine: TaskEngine, task_id: str, text: str) -> None:
    """Until the task's log holds an artifact update of `text`."""
    async for entry in engine.follow(task_id, 0):
        if entry is not None and isinstance(entry.event, m.TaskArtifactUpdateEvent) and \
                entry.event.artifact.parts[0].text == text:
            return
    raise AssertionError(f"the task settled without {text!r}")


async def test_a_creation_the_store_refuses_reaches_the_sender_and_stops_the_agent() -> None:
    """A database error on the commit that creates a one-pass task: the send fails with it, the agent is
    stopped, and nothing of the task is stored or left running."""
    stopped = asyncio.Event()

    class FailingStore(MemoryTaskStore):
        async def commit(self, commit: Any) -> None:
            raise OSError("disk full")

    async def slow(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        try:
            await asyncio.Event().wait()
            yield "never"
        finally:
            stopped.set()

    store = FailingStore()
    engine = make_engine(slow, store=store)
    with pytest.raises(OSError, match="disk full"):
        await engine.submit("slow", OWNER, request("x", mid="fails"))
    await asyncio.wait_for(stopped.wait(), 5)
    assert engine.runs == {} and store._tasks == {} and engine._creating == {}


async def test_duplicate_continuation_is_not_applied_twice() -> None:
    engine = make_engine(asker)
    first = await finish(engine, await engine.submit("asker", OWNER, request("x")))
    sub = await engine.submit("asker", OWNER, request("y", mid="answer", task_id=first.id))
    task = await finish(engine, sub)
    again = await engine.submit("asker", OWNER, request("y", mid="answer", task_id=first.id))
    assert again.duplicate and again.record.task.id == task.id
    assert [h.text() for h in (await engine.store.get(task.id)).task.history or []] == ["x", "Why x?", "y"]  # type: ignore[union-attr]


# --- reads ------------------------------------------------------------------------------------------------------------


async def test_get_and_list() -> None:
    engine = make_engine(asker)
    task = await finish(engine, await engine.submit("asker", OWNER, request("x")))
    task = await finish(engine, await engine.submit("asker", OWNER, request("y", task_id=task.id)))
    got = await engine.get("asker", OWNER, m.GetTaskRequest(id=task.id))
    assert len(got.history or []) == 3
    assert (await engine.get("asker", OWNER, m.GetTaskRequest(id=task.id, history_length=0))).history is None
    assert len((await engine.get("asker", OWNER, m.GetTaskRequest(id=task.id, history_length=1))).history or []) == 1
    with pytest.raises(InvalidParamsError):
        await engine.get("asker", OWNER, m.GetTaskRequest(id=task.id, history_length=-1))
    with pytest.raises(TaskNotFoundError):
        await engine.get("asker", "bob", m.GetTaskRequest(id=task.id))
    page = await engine.list("asker", OWNER, m.ListTasksRequest())
    assert [t.id for t in page.tasks] == [task.id] and page.next_page_token == "" and page.total_size == 1
    assert page.tasks[0].artifacts is None  # includeArtifacts defaults to false
    page = await engine.list("asker", OWNER, m.ListTasksRequest(include_artifacts=True, history_length=1))
    assert page.tasks[0].artifacts and len(page.tasks[0].history or []) == 1


# --- recovery ----------------------------------------------------------------------------------------------------------


async def test_recover_fails_tasks_left_running() -> None:
    store = MemoryTaskStore()
    for state in (S.SUBMITTED, S.WORKING, S.INPUT_REQUIRED, S.COMPLETED):
        task = m.Task(id=f"t-{state.name}", context_id="c", status=m.TaskStatus(state=state, timestamp=now_iso()),
                      history=[m.Message(message_id=f"m-{state.name}", role=m.Role.USER, parts=[m.Part(text="x")])])
        rec = TaskRecord(task=task, agent_id="words", owner=OWNER, seq=1, updated_at=1.0, created_at=1.0)
        await store.create(rec, Entry(1, m.Task(id=task.id, context_id="c", status=task.status)), f"m-{state.name}")
    engine = make_engine(words, store=store)
    failed = await engine.recover()
    assert sorted(failed) == ["t-SUBMITTED", "t-WORKING"]
    for tid in failed:
        rec = await store.get(tid)
        assert rec is not None and rec.task.status.state is S.FAILED
        assert rec.task.status.message is not None and rec.task.status.message.text() == RESTART_MESSAGE
        assert rec.seq == 2
        assert describe((await store.events_after(tid, 0))[-1]) == ("status", S.FAILED)
    assert (await store.get("t-INPUT_REQUIRED")).task.status.state is S.INPUT_REQUIRED  # type: ignore[union-attr]
    assert (await store.get("t-COMPLETED")).task.status.state is S.COMPLETED  # type: ignore[union-attr]
    assert [e.seq for e in await store.events_after("t-INPUT_REQUIRED", 0)] == [1]
    assert await engine.recover() == []
    # An input-required task left by the previous process can still be continued.
    sub = await engine.submit("words", OWNER, request("go on", task_id="t-INPUT_REQUIRED"))
    assert (await finish(engine, sub)).status.state is S.COMPLETED


# --- follow --------------------------------------------------------------------------------------------------------------


async def test_follow_yields_stored_then_live_entries() -> None:
    started = asyncio.Event()
    go = asyncio.Event()

    async def slow(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.say("starting")
        started.set()
        await go.wait()
        yield "late"
        await asyncio.sleep(0)
        yield " text"

    engine = make_engine(slow)
    sub = await engine.submit("slow", OWNER, request())
    await started.wait()  # task, working and "starting" are stored by now
    got: list[Entry] = []
    async for entry in engine.follow(sub.record.task.id, 0):
        got.append(entry)
        if len(got) == 3:
            go.set()  # the rest can only arrive live, from the bus
    assert [describe(e) for e in got] == [
        ("task", S.SUBMITTED),
        ("status", S.WORKING),
        ("status", S.WORKING),
        ("artifact", "late", False, False),
        ("artifact", " text", True, True),
        ("status", S.COMPLETED),
    ]
    assert [e.seq for e in got] == list(range(1, 7))
    await finish(engine, sub)


async def test_follow_after_a_seq_and_skips_user_messages() -> None:
    engine = make_engine(asker)
    first = await finish(engine, await engine.submit("asker", OWNER, request("x")))
    sub = await engine.submit("asker", OWNER, request("y", task_id=first.id))
    entries = [e async for e in engine.follow(first.id, 3)]
    assert [describe(e) for e in entries] == [
        ("status", S.WORKING),
        ("artifact", "x because y", False, True),
        ("status", S.COMPLETED),
    ]
    await finish(engine, sub)


async def test_follow_ends_at_an_interruption_by_default() -> None:
    engine = make_engine(asker)
    sub = await engine.submit("asker", OWNER, request("x"))
    entries = [e async for e in engine.follow(sub.record.task.id, 0, state=S.SUBMITTED, state_seq=1)]
    assert [describe(e) for e in entries] == [
        ("task", S.SUBMITTED), ("status", S.WORKING), ("status", S.INPUT_REQUIRED)]
    await finish(engine, sub)


async def test_follow_until_terminal_stays_through_an_interruption() -> None:
    """What a subscription does (A2A 1.0 section 3.1.6): input-required does not end it."""
    engine = make_engine(asker)
    first = await finish(engine, await engine.submit("asker", OWNER, request("x")))
    assert first.status.state is S.INPUT_REQUIRED
    got: list[Entry] = []

    async def watch() -> None:
        async for entry in engine.follow(first.id, 3, until=is_terminal):
            got.append(entry)

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0)
    assert not watcher.done()
    await finish(engine, await engine.submit("asker", OWNER, request("y", task_id=first.id)))
    await asyncio.wait_for(watcher, 10)
    assert [describe(e) for e in got] == [
        ("status", S.WORKING), ("artifact", "x because y", False, True), ("status", S.COMPLETED)]


async def test_follow_a_finished_task_replays_the_log() -> None:
    engine = make_engine(words)
    task = await finish(engine, await engine.submit("words", OWNER, request()))
    entries = [e async for e in engine.follow(task.id, 0)]
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert [e async for e in engine.follow(task.id, 4)] == []


async def test_subscribe_start_points() -> None:
    engine = make_engine(asker)
    task = await finish(engine, await engine.submit("asker", OWNER, request("x")))
    first, rec = await engine.subscribe("asker", OWNER, task.id, None)
    assert first is not None and first.event == task and rec.seq == first.seq == 3
    first, rec = await engine.subscribe("asker", OWNER, task.id, 1)
    assert first is None and rec.seq == 3
    with pytest.raises(TaskNotFoundError):
        await engine.subscribe("asker", "bob", task.id, None)


async def test_shutdown_cancels_running_agents() -> None:
    record: list[str] = []
    started = asyncio.Event()

    async def forever(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            record.append("cancelled")
            raise
        yield "x"  # pragma: no cover

    engine = make_engine(forever)
    sub = await engine.submit("forever", OWNER, request())
    await started.wait()
    await engine.shutdown()
    assert record == ["cancelled"] and sub.run is not None and sub.run.aio.done()  # type: ignore[union-attr]
    assert engine.runs == {}
