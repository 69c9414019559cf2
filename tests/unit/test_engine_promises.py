"""What the task engine promises its users, pinned so that breaking it fails a test (no HTTP).

Each test names the promise it pins. Several of them were written against changes that
mutation testing of the engine showed the rest of the suite did not notice:

1. followers are woken live after an append (``bus.publish`` in ``TaskEngine._flush``);
2. non-settling events are written soon, while the task still runs (``_flush_soon``);
3. ``canceled`` is recorded by the run itself before it ends (``_drive``'s CancelledError branch);
4. a shutdown's cancellation is not swallowed (``else: raise`` in ``_drive``);
5. a message naming a task that is still working is refused (the guard in ``_continue``).

Waits that would hang if a promise broke are bounded (``WAIT`` seconds) and fail with a
sentence saying what never happened.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from enginekit import TapStore, assert_log_consistent, bounded, die, drain, log_of, make_engine

from parley.agents.base import AgentOutput, ArtifactChunk, RunContext
from parley.protocol import models as m
from parley.protocol.errors import UnsupportedOperationError
from parley.protocol.states import is_terminal
from parley.tasks.engine import CHECKPOINT_MARK, PACE_SECONDS, RESTART_MESSAGE, RESUME_MESSAGE
from parley.tasks.log import Entry
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.store import MessageKey, content_size, fingerprint, stores_snapshot

S = m.TaskState
OWNER = "alice"

_ids = itertools.count(1)


# --- helpers ---------------------------------------------------------------------------------------------------------


def request(text: str = "hello", *, mid: str | None = None, task_id: str | None = None) -> m.SendMessageRequest:
    return m.SendMessageRequest(message=m.Message(
        message_id=mid or f"promise-{next(_ids)}", role=m.Role.USER, parts=[m.Part(text=text)], task_id=task_id))


def describe(entry: Entry) -> tuple:
    ev = entry.event
    if isinstance(ev, m.Task):
        return ("task", ev.status.state)
    if isinstance(ev, m.Message):
        return ("message", ev.text())
    if isinstance(ev, m.TaskStatusUpdateEvent):
        text = ev.status.message.text() if ev.status.message is not None else None
        return ("status", ev.status.state, text)
    return ("artifact", ev.artifact.artifact_id if ev.artifact.name != "response" else "response",
            "".join(p.text or "" for p in ev.artifact.parts), ev.append, ev.last_chunk)


def text_chunks(entries: list[Entry]) -> list[str]:
    """The text of the engine's own text artifact ("response") chunks, in log order."""
    return ["".join(p.text or "" for p in e.event.artifact.parts) for e in entries
            if isinstance(e.event, m.TaskArtifactUpdateEvent) and e.event.artifact.name == "response"]


async def state_of(store: MemoryTaskStore, task_id: str) -> S:
    rec = await store.get(task_id)
    assert rec is not None
    return rec.task.status.state


# --- 1. live followers (bus.publish after a commit) -----------------------------------------------------------------


async def test_a_follower_receives_entries_appended_while_it_follows_live() -> None:
    """Kills: deleting `await self.bus.publish(...)` in `_flush` (the follower then never hears of new entries)."""
    gates = [asyncio.Event() for _ in range(3)]

    async def stepper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        await gates[0].wait()
        yield ctx.say("one")
        await gates[1].wait()
        yield m.Artifact(artifact_id="report", parts=[m.Part(text="two")])
        await gates[2].wait()
        yield ctx.say("three")

    engine = make_engine(stepper)
    sub = await engine.submit("stepper", OWNER, request())
    task_id = sub.record.task.id
    got: asyncio.Queue[Entry | None] = asyncio.Queue()
    follower = asyncio.create_task(drain(engine.follow(task_id, 0), got))
    seen: list[Entry | None] = []

    async def next_entry(what: str) -> Entry | None:
        entry = await bounded(got.get(), f"the follower to receive {what}")
        seen.append(entry)
        return entry

    assert describe(await next_entry("the task")) == ("task", S.SUBMITTED)
    assert describe(await next_entry("working")) == ("status", S.WORKING, None)
    # From here on each entry is appended while the follower waits on the bus: only a live wake-up delivers it,
    # and it arrives while the agent is still blocked on the next gate.
    gates[0].set()
    assert describe(await next_entry("'one'")) == ("status", S.WORKING, "one")
    assert sub.run is not None and sub.run.aio is not None and not sub.run.aio.done()
    gates[1].set()
    assert describe(await next_entry("the artifact")) == ("artifact", "report", "two", False, True)
    assert not sub.run.aio.done()
    gates[2].set()
    assert describe(await next_entry("'three'")) == ("status", S.WORKING, "three")
    assert describe(await next_entry("completed")) == ("status", S.COMPLETED, None)
    assert await next_entry("the end of the stream") is None
    await bounded(follower, "the follower to end")
    # In order, each exactly once, the same entries as the stored log.
    entries = [e for e in seen if e is not None]
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5, 6]
    assert [describe(e) for e in entries] == [describe(e) for e in await assert_log_consistent(engine.store, task_id)]


# --- 2. group commit writes non-settling events while the task runs (_flush_soon) ---------------------------------


async def test_statuses_and_artifact_chunks_are_stored_while_the_task_runs_and_survive_a_crash() -> None:
    """Kills: deleting `self._flush_soon(run)` in `_append` (non-settling events then wait for the next settled
    state, and a crash meanwhile loses them)."""
    blocked = asyncio.Event()

    async def worker(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.say("fetching")
        yield ArtifactChunk(m.Artifact(artifact_id="rows", parts=[m.Part(text="row 1\n")]), last_chunk=False)
        blocked.set()
        await asyncio.Event().wait()  # busy for a long time; the process dies meanwhile
        yield "never"  # pragma: no cover

    store = TapStore()
    engine = make_engine(worker, store=store)
    sub = await engine.submit("worker", OWNER, request())
    task_id = sub.record.task.id
    await bounded(blocked.wait(), "the agent to block")

    async def written() -> bool:
        return len(await log_of(store, task_id)) >= 4

    await store.until(written, "the working status and the artifact chunk while the agent is blocked")
    assert [describe(e) for e in await log_of(store, task_id)] == [
        ("task", S.SUBMITTED),
        ("status", S.WORKING, None),
        ("status", S.WORKING, "fetching"),
        ("artifact", "rows", "row 1\n", False, False),
    ]
    assert sub.run is not None and not sub.run.aio.done()  # type: ignore[union-attr]
    assert await state_of(store, task_id) is S.WORKING

    await die(sub.run)
    # The next process finds what was written before the crash, and fails the task saying why.
    successor = make_engine(worker, store=store)
    assert await successor.recover() == [task_id]
    log = await assert_log_consistent(store, task_id)
    assert [describe(e) for e in log] == [
        ("task", S.SUBMITTED),
        ("status", S.WORKING, None),
        ("status", S.WORKING, "fetching"),
        ("artifact", "rows", "row 1\n", False, False),
        ("status", S.FAILED, RESTART_MESSAGE),
    ]
    rec = await store.get(task_id)
    assert rec is not None and rec.task.artifacts is not None
    assert [(a.artifact_id, a.parts) for a in rec.task.artifacts] == [("rows", [m.Part(text="row 1\n")])]


async def test_text_is_stored_while_the_agent_is_still_writing() -> None:
    """Kills: deleting `self._flush_soon(run)` after a text output in `_take` (text then sits in memory until
    some other event is written)."""
    blocked = asyncio.Event()

    async def writer(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield "alpha "
        await asyncio.sleep(0)  # the next token comes in a later event-loop turn, as from a model
        yield "beta "
        await asyncio.sleep(0)
        yield "gamma "
        blocked.set()
        await asyncio.Event().wait()
        yield "never"  # pragma: no cover

    store = TapStore()
    engine = make_engine(writer, store=store)
    sub = await engine.submit("writer", OWNER, request())
    task_id = sub.record.task.id
    await bounded(blocked.wait(), "the agent to block")

    async def has_text() -> bool:
        return len(text_chunks(await log_of(store, task_id))) >= 3

    await store.until(has_text, "the agent's text while it is blocked")
    # Every chunk, the latest included: none waits for the agent's next output (issue 25).
    assert text_chunks(await log_of(store, task_id)) == ["alpha ", "beta ", "gamma "]
    assert await state_of(store, task_id) is S.WORKING
    await die(sub.run)  # type: ignore[arg-type]


async def test_a_delegation_link_is_stored_while_the_task_runs() -> None:
    """Kills: deleting `self._flush_soon(run)` after a delegation in `_take` (the link, which cancel and traces
    need, then waits for the next event; a crash meanwhile loses it)."""
    store = TapStore()
    blocked = asyncio.Event()

    async def delegating(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.say("asking the helper")

        async def said() -> bool:
            return any(describe(e) == ("status", S.WORKING, "asking the helper")
                       for e in await log_of(store, ctx.task_id))

        await store.until(said, "the agent's progress status")  # the link comes in a later commit of its own
        yield ctx.internal("delegation", url="http://helper.example/a2a", agent="helper", taskId="child-1")
        blocked.set()
        await asyncio.Event().wait()
        yield "never"  # pragma: no cover

    engine = make_engine(delegating, store=store)
    sub = await engine.submit("delegating", OWNER, request())
    task_id = sub.record.task.id
    await bounded(blocked.wait(), "the agent to block")

    async def linked() -> bool:
        return bool(await store.links(task_id))

    await store.until(linked, "the delegation link while the agent is blocked")
    [link] = await store.links(task_id)
    assert (link.parent_task_id, link.child_url, link.child_task_id, link.agent) == (
        task_id, "http://helper.example/a2a", "child-1", "helper")
    await die(sub.run)  # type: ignore[arg-type]


# --- 3. cancel records `canceled` before the run ends ---------------------------------------------------------------


def cancellable(record: list[str], on_cancel: Callable[[], None] = lambda: None
                ) -> Callable[[RunContext], AsyncIterator[AgentOutput]]:
    async def sleeper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.say("thinking")
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            record.append("cancelled")
            on_cancel()
            raise
        finally:
            record.append("finally")
        yield "too late"  # pragma: no cover

    return sleeper


async def test_after_cancel_returns_the_task_is_stored_canceled_and_streams_end_with_it() -> None:
    record: list[str] = []
    sleeper = cancellable(record)
    store = TapStore()
    engine = make_engine(sleeper, store=store)
    sub = await engine.submit("sleeper", OWNER, request())
    task_id = sub.record.task.id

    async def said() -> bool:
        return len(await log_of(store, task_id)) >= 3

    await store.until(said, "the agent's first status")
    got: asyncio.Queue[Entry | None] = asyncio.Queue()
    follower = asyncio.create_task(drain(engine.follow(task_id, 0, until=is_terminal), got))
    task = await bounded(engine.cancel("sleeper", OWNER, m.CancelTaskRequest(id=task_id, metadata={"by": "test"})),
                         "cancel")
    assert task.status.state is S.CANCELED
    assert await state_of(store, task_id) is S.CANCELED  # durable when cancel returns
    assert record == ["cancelled", "finally"]
    await bounded(follower, "the follower to end at the canceled status")
    entries: list[Entry] = []
    while (entry := got.get_nowait()) is not None:
        entries.append(entry)
    assert describe(entries[-1]) == ("status", S.CANCELED, None)
    assert entries[-1].event.metadata == {"by": "test"}  # type: ignore[union-attr]
    log = await assert_log_consistent(store, task_id)
    assert [describe(e) for e in entries] == [describe(e) for e in log]
    assert sum(1 for e in log if describe(e)[:2] == ("status", S.CANCELED)) == 1
    assert await store.lease(task_id) is None and task_id not in engine.runs


async def test_a_cancel_whose_caller_goes_away_still_ends_the_task_canceled() -> None:
    """Kills: deleting the `canceled` append in `_drive`'s CancelledError branch. Without it, `canceled` is only
    written by the canceller after the run ended; a canceller that goes away then (an HTTP client that
    disconnects) leaves the task `working` forever with no agent running."""
    record: list[str] = []
    callers: list[asyncio.Task] = []

    def client_goes_away() -> None:  # while the agent stops, the client that asked for the cancel disconnects
        for caller in callers:
            caller.cancel()

    sleeper = cancellable(record, client_goes_away)
    store = TapStore()
    engine = make_engine(sleeper, store=store)
    sub = await engine.submit("sleeper", OWNER, request())
    task_id = sub.record.task.id

    async def said() -> bool:
        return len(await log_of(store, task_id)) >= 3

    await store.until(said, "the agent's first status")
    canceller = asyncio.create_task(engine.cancel("sleeper", OWNER, m.CancelTaskRequest(id=task_id)))
    callers.append(canceller)
    await bounded(asyncio.gather(canceller, return_exceptions=True), "the cancel call to end")
    assert canceller.cancelled()
    assert sub.run is not None and sub.run.aio is not None
    await bounded(asyncio.gather(sub.run.aio, return_exceptions=True), "the run to end")
    assert record == ["cancelled", "finally"]
    # Anyone following the task sees it end canceled.
    entries = await bounded(_collect(engine.follow(task_id, 0, until=is_terminal)), "a follower to reach the end")
    assert describe(entries[-1]) == ("status", S.CANCELED, None)
    assert await state_of(store, task_id) is S.CANCELED
    assert await store.lease(task_id) is None and task_id not in engine.runs
    await assert_log_consistent(store, task_id)


async def _collect(it: AsyncIterator[Entry]) -> list[Entry]:
    return [e async for e in it]


# --- 4. shutdown hands running tasks to the next process ------------------------------------------------------------


async def test_shutdown_cancels_the_run_and_leaves_the_task_to_the_next_engine() -> None:
    """Kills: swallowing the cancellation of a shutdown (`else: raise` in `_drive`)."""
    record: list[str] = []
    started = asyncio.Event()

    async def forever(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.say("started")
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            record.append("finally")
        yield "x"  # pragma: no cover

    store = TapStore()
    engine = make_engine(forever, store=store)
    sub = await engine.submit("forever", OWNER, request())
    task_id = sub.record.task.id
    await bounded(started.wait(), "the agent to start")
    await bounded(engine.shutdown(), "shutdown")
    assert sub.run is not None and sub.run.aio is not None
    assert sub.run.aio.cancelled(), "the run's asyncio task must end cancelled, not return normally"
    assert record == ["finally"]
    # Not completed, failed or canceled: the task was interrupted by the shutdown, and its lease handed back.
    assert await state_of(store, task_id) is S.WORKING
    assert describe((await log_of(store, task_id))[-1]) == ("status", S.WORKING, "started")
    assert await store.lease(task_id) is None
    assert not sub.run.settled.is_set()

    successor = make_engine(forever, store=store)
    assert await successor.recover() == [task_id]
    rec = await store.get(task_id)
    assert rec is not None and rec.task.status.state is S.FAILED
    assert rec.task.status.message is not None and rec.task.status.message.text() == RESTART_MESSAGE
    await assert_log_consistent(store, task_id)


async def test_shutdown_leaves_a_checkpointed_task_to_be_resumed_by_the_next_engine() -> None:
    """Kills: swallowing the cancellation of a shutdown (`else: raise` in `_drive`)."""
    started = asyncio.Event()
    seen: list[dict | None] = []

    async def stepwise(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        seen.append(ctx.checkpoint)
        if ctx.checkpoint is None:
            yield "Step one. "
            yield ctx.internal("checkpoint", state={"step": 1})
            started.set()
            await asyncio.Event().wait()  # the server stops here
        yield "Step two."

    store = TapStore()
    engine = make_engine(stepwise, store=store)
    sub = await engine.submit("stepwise", OWNER, request())
    task_id = sub.record.task.id
    await bounded(started.wait(), "the checkpoint")
    await bounded(engine.shutdown(), "shutdown")
    assert sub.run is not None and sub.run.aio is not None and sub.run.aio.cancelled()
    assert await state_of(store, task_id) is S.WORKING and await store.lease(task_id) is None

    successor = make_engine(stepwise, store=store)
    assert await successor.recover() == []  # resumed, not failed
    run = successor.runs[task_id]
    await bounded(run.settled.wait(), "the resumed task to settle")
    await bounded(asyncio.gather(run.aio), "the resumed run to end")  # type: ignore[arg-type]
    assert seen == [None, {"step": 1}]
    rec = await store.get(task_id)
    assert rec is not None and rec.task.status.state is S.COMPLETED
    assert rec.task.artifacts is not None and len(rec.task.artifacts) == 1
    assert "".join(p.text or "" for p in rec.task.artifacts[0].parts) == "Step one. Step two."
    history = [msg.text() for msg in rec.task.history or []]
    assert RESUME_MESSAGE in history
    assert await store.get_checkpoint(task_id) is None  # dropped once the task finished
    await assert_log_consistent(store, task_id)
    await successor.shutdown()


# --- 5. a message to a task that is still working ---------------------------------------------------------------------


async def test_a_message_naming_a_working_task_is_refused_and_changes_nothing() -> None:
    """Kills: deleting the "still working" guard in `_continue` (a second agent run would start on the task)."""
    gate = asyncio.Event()
    calls: list[str] = []

    async def busy(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        calls.append(ctx.text)
        yield ctx.say("on it")
        await gate.wait()
        yield f"answer to {ctx.text}"

    store = TapStore()
    engine = make_engine(busy, store=store)
    sub = await engine.submit("busy", OWNER, request("first"))
    task_id = sub.record.task.id

    async def working() -> bool:
        return len(await log_of(store, task_id)) >= 3

    await store.until(working, "the working task")
    before_log = [describe(e) for e in await log_of(store, task_id)]
    before = await store.get(task_id)
    commits = len(store.commits)
    second = request("second", task_id=task_id)
    with pytest.raises(UnsupportedOperationError) as info:
        await engine.submit("busy", OWNER, second)
    assert "working" in info.value.message
    # Nothing changed: no entry, no commit, the same run, no second agent run, and the message is not taken.
    assert [describe(e) for e in await log_of(store, task_id)] == before_log
    assert len(store.commits) == commits
    assert await store.get(task_id) == before
    assert engine.runs[task_id] is sub.run
    assert await store.find_message(MessageKey("busy", OWNER, second.message.message_id,
                                               fingerprint(second.message))) is None
    gate.set()
    await bounded(sub.run.settled.wait(), "the task to complete")  # type: ignore[union-attr]
    await bounded(asyncio.gather(sub.run.aio), "the run to end")  # type: ignore[union-attr, arg-type]
    assert calls == ["first"]
    rec = await store.get(task_id)
    assert rec is not None and rec.task.status.state is S.COMPLETED
    assert [msg.text() for msg in rec.task.history or []] == ["first", "on it"]
    assert rec.task.artifacts is not None and len(rec.task.artifacts) == 1
    assert rec.task.artifacts[0].parts == [m.Part(text="answer to first")]
    await assert_log_consistent(store, task_id)


# --- settled states, checkpoints, pacing -----------------------------------------------------------------------------


async def test_a_settled_state_is_committed_before_wait_settled_returns() -> None:
    """The store (what GetTask, other processes and a restart see) already holds the state a blocking send
    returns, even when commits take a round trip."""

    async def asker(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        if ctx.turn == 1:
            yield "Let me think. "
            yield ctx.ask("Which one?")
            return
        yield f"You chose {ctx.text}."

    store = TapStore(commit_io=3)
    engine = make_engine(asker, store=store)

    async def check(sub: Any, expected: S) -> None:
        task = await bounded(engine.wait_settled(sub), "the task to settle")
        assert task.status.state is expected
        rec = await store.get(task.id)  # read at once: no commit may still be on its way
        assert rec is not None and rec.task.status.state is expected
        log = await log_of(store, task.id)
        assert rec.seq == log[-1].seq and describe(log[-1])[:2] == ("status", expected)
        assert rec.task == task

    first = await engine.submit("asker", OWNER, request("go"))
    await check(first, S.INPUT_REQUIRED)
    second = await engine.submit("asker", OWNER, request("the red one", task_id=first.record.task.id))
    await check(second, S.COMPLETED)
    await bounded(asyncio.gather(first.run.aio, second.run.aio), "the runs to end")  # type: ignore[union-attr]
    await assert_log_consistent(store, first.record.task.id)


async def test_a_checkpoint_is_committed_with_every_entry_and_all_the_text_before_it() -> None:
    blocked = asyncio.Event()

    async def careful(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield "Intro. "
        await asyncio.sleep(0)  # a later loop turn: the intro becomes a chunk of its own
        yield "Body, "
        yield ctx.say("halfway")  # the text before it is written first; the answer stays one artifact
        yield ArtifactChunk(m.Artifact(artifact_id="data", parts=[m.Part(text="1,2")]), last_chunk=False)
        yield "More "
        await asyncio.sleep(0)
        yield "text "
        yield "held"
        yield ctx.internal("checkpoint", state={"step": 2})
        yield ctx.say("after the checkpoint")  # same loop turn: must not ride in the checkpoint's commit
        blocked.set()
        await asyncio.Event().wait()
        yield "never"  # pragma: no cover

    store = TapStore()
    engine = make_engine(careful, store=store)
    sub = await engine.submit("careful", OWNER, request())
    task_id = sub.record.task.id
    await bounded(blocked.wait(), "the agent to block after its checkpoint")

    async def said_after() -> bool:
        return any(describe(e) == ("status", S.WORKING, "after the checkpoint") for e in await log_of(store, task_id))

    await store.until(said_after, "the status yielded after the checkpoint")
    saved = await store.get_checkpoint(task_id)
    assert saved is not None and saved[CHECKPOINT_MARK] == 2 and saved["agent"] == {"step": 2}
    [cp_commit] = [c for c in store.commits if c.checkpoint is not None]
    assert cp_commit.checkpoint == saved
    assert saved["seq"] == cp_commit.last_seq  # the checkpoint is where the log ended at its commit
    log = await log_of(store, task_id)
    before = log[:saved["seq"]]
    assert [describe(e) for e in before] == [
        ("task", S.SUBMITTED),
        ("status", S.WORKING, None),
        ("artifact", "response", "Intro. ", False, False),
        ("artifact", "response", "Body, ", True, False),
        ("status", S.WORKING, "halfway"),
        ("artifact", "data", "1,2", False, False),
        ("artifact", "response", "More ", True, False),
        ("artifact", "response", "text held", True, False),
    ]
    # Every chunk yielded before the checkpoint is in the log before it: nothing is left for the checkpoint.
    assert saved["text"]["held"] == ""
    assert "".join(text_chunks(before)) == "Intro. Body, More text held"
    assert saved["text"]["artifactId"] == before[-1].event.artifact.artifact_id  # type: ignore[union-attr]
    assert saved["text"]["started"] is True
    assert [describe(e) for e in log[saved["seq"]:]] == [("status", S.WORKING, "after the checkpoint")]
    await die(sub.run)  # type: ignore[arg-type]


async def test_an_agent_that_never_awaits_does_not_starve_the_others() -> None:
    """An agent yielding text in a tight loop still lets other coroutines run (it waits to see one of them),
    and its text is coalesced into far fewer chunks than outputs, without losing or reordering any."""
    flag = asyncio.Event()
    started = asyncio.Event()
    outputs: list[str] = []
    cap = 300_000  # a starving engine never lets the flag be set: stop somewhere rather than spin forever

    async def spinner(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        started.set()
        i = 0
        while (i < 2_000 or not flag.is_set()) and i < cap:
            piece = f"{i},"
            outputs.append(piece)
            yield piece
            i += 1

    ticks = 0

    async def other_request() -> None:
        nonlocal ticks
        await started.wait()
        while ticks < 5:  # gets the loop several times while the agent spins
            await asyncio.sleep(0)
            ticks += 1
        flag.set()

    store = TapStore()
    engine = make_engine(spinner, store=store)
    sub = await engine.submit("spinner", OWNER, request())
    other = asyncio.create_task(other_request())
    task = await bounded(engine.wait_settled(sub), "the spinner to finish")
    await bounded(other, "the other coroutine")
    assert flag.is_set() and len(outputs) < cap, "the agent never let the other coroutine run"
    assert task.status.state is S.COMPLETED
    chunks = text_chunks(await log_of(store, task.id))
    assert "".join(chunks) == "".join(outputs)
    assert len(chunks) * 20 <= len(outputs), (len(chunks), len(outputs))
    assert task.artifacts is not None and len(task.artifacts) == 1
    assert "".join(p.text or "" for p in task.artifacts[0].parts) == "".join(outputs)
    await bounded(asyncio.gather(sub.run.aio), "the run to end")  # type: ignore[union-attr, arg-type]


@pytest.mark.parametrize("pieces", [2_000, 8_000])
async def test_the_snapshot_rewrites_of_a_streamed_answer_grow_linearly_with_it(pieces: int) -> None:
    """Issue 25: a streamed answer's stored snapshot is rewritten less often as it grows (store.snapshot_interval:
    the lag allowed grows with the snapshot), so the bytes of all rewrites stay a bounded multiple of the
    answer's length however long it is. With a rewrite every 64 entries, 8,000 pieces of 10 characters
    rewrote about 62 bytes per byte of the answer, and four times as many pieces four times as much per byte."""

    async def streamer(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        for _ in range(pieces):
            yield "0123456789"
            await asyncio.sleep(0)  # the next piece in a later loop turn: a commit per piece, as from a model

    store = TapStore()
    engine = make_engine(streamer, store=store)
    sub = await engine.submit("streamer", OWNER, request())
    task = await bounded(engine.wait_settled(sub), "the answer to end")
    answer = pieces * 10
    assert [p.text for a in task.artifacts or [] for p in a.parts] == ["0123456789" * pieces]
    rewritten = [content_size(c.snapshot) for c in store.commits if stores_snapshot(c)]
    assert sum(rewritten) <= 40 * answer, (len(rewritten), sum(rewritten) / answer)
    lagging = [c for c in store.commits if not stores_snapshot(c)]
    assert len(lagging) > 0.9 * len(store.commits)  # most commits leave the snapshot behind


async def test_an_artifact_and_the_checkpoint_yielded_right_after_it_share_one_commit() -> None:
    """A resumed run starts after its checkpoint, so an artifact committed without the checkpoint that follows it
    at once would be produced twice (tests/cluster/test_connection_drops.py saw `tick-18` twice when the store
    stayed away between the two commits). The agent waits longer than PACE_SECONDS between steps (its own
    work, as an LLM's tokens do): the drive loop's pacing must not split the artifact from its checkpoint."""
    steps = 4

    async def counter(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        for i in range(steps):
            yield ArtifactChunk(m.Artifact(artifact_id=f"tick-{i}", parts=[m.Part(text=f"tick {i}")]))
            yield ctx.internal("checkpoint", state={"next": i + 1})
            await asyncio.sleep(PACE_SECONDS * 5)  # the agent's own work between steps, not a synchronisation

    store = TapStore(commit_io=1)  # each commit gives the loop a turn, as a database round trip does
    engine = make_engine(counter, store=store)
    sub = await engine.submit("counter", OWNER, request())
    await bounded(sub.run.aio, "the run to end")  # type: ignore[arg-type]
    with_checkpoint = [c for c in store.commits if c.checkpoint is not None]
    assert [c.checkpoint["agent"] for c in with_checkpoint] == [{"next": i + 1} for i in range(steps)]
    for i, commit in enumerate(with_checkpoint):
        ticks = [describe(e)[1] for e in commit.entries if isinstance(e.event, m.TaskArtifactUpdateEvent)]
        assert ticks == [f"tick-{i}"], f"checkpoint {i + 1} was committed with {ticks}"
    await assert_log_consistent(store, sub.record.task.id)


async def test_a_store_whose_commit_needs_a_task_gets_its_flushes_in_one(caplog: pytest.LogCaptureFixture) -> None:
    """asyncpg and redis-py enter `asyncio.timeout`, which refuses to run outside a task ("Timeout should be used
    inside a task": tests/cluster/test_drain.py saw it while PostgreSQL reconnected). The engine's group commit
    runs a flush's first step without a task only for stores that say it may (TaskStore.eager_commits); for the
    others every streamed token's flush runs in a task and is written."""

    class NeedsTask(TapStore):
        eager_commits = False

        async def commit(self, commit):  # type: ignore[no-untyped-def]
            async with asyncio.timeout(10):  # what asyncpg's pool does when it opens a connection
                await super().commit(commit)

    async def streamer(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        for word in ("one ", "two ", "three"):
            yield word
            await asyncio.sleep(0)  # a later loop turn: each word is a flush of its own

    store = NeedsTask()
    engine = make_engine(streamer, store=store)
    with caplog.at_level("ERROR"):
        sub = await engine.submit("streamer", OWNER, request())
        await bounded(sub.run.aio, "the run to end")  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    log = await assert_log_consistent(store, sub.record.task.id)
    assert "".join(text_chunks(log)) == "one two three"
