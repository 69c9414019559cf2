"""Several task engines sharing one store and one bus: the processes of one deployment (no HTTP).

Every test builds two or three `TaskEngine`s over ONE `MemoryTaskStore` and ONE `LocalBus`, each
with its own lease holder id and `sole=False`, running the same agents (each engine gets its own
instances, so a test can tell which engine ran a turn). Waits that would hang on a regression
are bounded (`WAIT` seconds) and fail with a sentence saying what never happened.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from enginekit import TapStore, assert_log_consistent, bounded, die, drain, log_of

from parley.agents.base import AgentOutput, ArtifactChunk, FunctionAgent, RunContext
from parley.protocol import models as m
from parley.protocol.errors import UnsupportedOperationError
from parley.protocol.states import is_terminal
from parley.tasks.bus import LocalBus
from parley.tasks.engine import RESTART_MESSAGE, RESUME_MESSAGE, Run, Submission, TaskEngine
from parley.tasks.log import Entry, fold, now_iso
from parley.tasks.store import Commit, Lease, TaskStore

S = m.TaskState
OWNER = "alice"

AgentFn = Callable[[RunContext], AsyncIterator[AgentOutput]]
_ids = itertools.count(1)


# --- helpers ---------------------------------------------------------------------------------------------------------


def request(text: str = "hello", *, mid: str | None = None, task_id: str | None = None) -> m.SendMessageRequest:
    """A fresh request object each time (the engine fills in ids on the message it is given)."""
    return m.SendMessageRequest(message=m.Message(
        message_id=mid or f"shared-{next(_ids)}", role=m.Role.USER, parts=[m.Part(text=text)], task_id=task_id))


class Tagged:
    """One engine's handle on the shared store: everything goes to the store; commits are noted with the name."""

    def __init__(self, store: TaskStore, name: str, journal: list[tuple[str, Commit]]) -> None:
        self._store, self._name, self._journal = store, name, journal

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._store, attr)

    async def commit(self, commit: Commit) -> None:
        await self._store.commit(commit)
        self._journal.append((self._name, commit))

    async def create(self, *args: Any, **kw: Any) -> None:  # the conveniences must go through commit() above
        await TaskStore.create(self, *args, **kw)  # type: ignore[arg-type]


def cluster(make_agents: Callable[[str], list[AgentFn]], names: tuple[str, ...] = ("A", "B"), *,
            store: TaskStore | None = None, bus: LocalBus | None = None,
            lease_seconds: dict[str, float] | None = None, journal: list | None = None) -> dict[str, TaskEngine]:
    """Engines named `names` over one store and one bus, each running its own instances of the same agents."""
    store = store if store is not None else TapStore()
    bus = bus or LocalBus()
    engines = {}
    for name in names:
        agents = {fn.__name__: FunctionAgent(fn, id=fn.__name__) for fn in make_agents(name)}
        engine_store = Tagged(store, name, journal) if journal is not None else store
        engines[name] = TaskEngine(engine_store, agents, bus=bus, holder=f"holder-{name}", sole=False,  # type: ignore[arg-type]
                                   lease_seconds=(lease_seconds or {}).get(name, 30.0))
    return engines


async def shutdown(*engines: TaskEngine) -> None:
    for engine in engines:
        await bounded(engine.shutdown(), "shutdown")


def describe(entry: Entry) -> tuple:
    ev = entry.event
    if isinstance(ev, m.Task):
        return ("task", ev.status.state)
    if isinstance(ev, m.Message):
        return ("message", ev.text())
    if isinstance(ev, m.TaskStatusUpdateEvent):
        return ("status", ev.status.state, ev.status.message.text() if ev.status.message is not None else None)
    return ("artifact", "".join(p.text or "" for p in ev.artifact.parts), ev.append, ev.last_chunk)


def answer(task: m.Task) -> list[str]:
    """The text of each artifact of a task."""
    return ["".join(p.text or "" for p in a.parts) for a in task.artifacts or []]


async def finished(engine: TaskEngine, sub: Submission) -> m.Task:
    task = await bounded(engine.wait_settled(sub), "the task to settle")
    if sub.run is not None and sub.run.aio is not None:
        await bounded(asyncio.gather(sub.run.aio), "the run to end")
    rec = await engine.store.get(task.id)
    assert rec is not None
    return rec.task


# --- following a task run elsewhere ----------------------------------------------------------------------------------


async def test_a_follower_on_b_receives_the_entries_of_a_run_on_a_live_in_order_once() -> None:
    gates = [asyncio.Event() for _ in range(3)]
    ran: list[str] = []

    def agents(name: str) -> list[AgentFn]:
        async def stepper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append(name)
            await gates[0].wait()
            yield ctx.say("one")
            await gates[1].wait()
            yield m.Artifact(artifact_id="report", parts=[m.Part(text="two")])
            await gates[2].wait()
            yield ctx.say("three")

        return [stepper]

    engines = cluster(agents)
    a, b = engines["A"], engines["B"]
    sub = await a.submit("stepper", OWNER, request())
    task_id = sub.record.task.id
    got: asyncio.Queue[Entry | None] = asyncio.Queue()
    follower = asyncio.create_task(drain(b.follow(task_id, 0, until=is_terminal), got))
    seen: list[Entry] = []

    async def next_entry(what: str) -> tuple:
        entry = await bounded(got.get(), f"B's follower to receive {what}")
        assert entry is not None, f"B's follower ended before {what}"
        seen.append(entry)
        return describe(entry)

    assert await next_entry("the task") == ("task", S.SUBMITTED)
    assert await next_entry("working") == ("status", S.WORKING, None)
    for gate, what, expected in [
        (gates[0], "'one'", ("status", S.WORKING, "one")),
        (gates[1], "the artifact", ("artifact", "two", False, True)),
        (gates[2], "'three'", ("status", S.WORKING, "three")),
    ]:
        gate.set()
        assert await next_entry(what) == expected
        if gate is not gates[2]:
            assert not sub.run.aio.done()  # type: ignore[union-attr]  # live: A's agent waits on the next gate
    assert await next_entry("completed") == ("status", S.COMPLETED, None)
    assert await bounded(got.get(), "the end of B's stream") is None
    await bounded(follower, "B's follower to end")
    assert ran == ["A"] and task_id not in b.runs
    log = await assert_log_consistent(b.store, task_id)
    assert [e.seq for e in seen] == [e.seq for e in log] == [1, 2, 3, 4, 5, 6]
    assert [describe(e) for e in seen] == [describe(e) for e in log]
    await shutdown(a, b)


async def test_following_on_b_from_a_mid_point_gets_exactly_the_entries_after_it() -> None:
    ran: list[tuple[str, int]] = []
    answer_gate = asyncio.Event()

    def agents(name: str) -> list[AgentFn]:
        async def asker(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append((name, ctx.turn))
            if ctx.turn == 1:
                yield ctx.say("reading")
                yield ctx.ask("Which one?")
                return
            await answer_gate.wait()
            yield f"You chose {ctx.text}."

        return [asker]

    engines = cluster(agents, ("A", "B", "C"))
    a, b, c = engines["A"], engines["B"], engines["C"]
    first = await a.submit("asker", OWNER, request("start"))
    task_id = first.record.task.id
    assert (await finished(a, first)).status.state is S.INPUT_REQUIRED
    # Subscribed on B from seq 2 until the task ends: through input-required, the continuation (on A), to the end.
    got: asyncio.Queue[Entry | None] = asyncio.Queue()
    follower = asyncio.create_task(drain(b.follow(task_id, 2, until=is_terminal), got))
    entries: list[Entry] = []

    async def next_entry(what: str) -> tuple:
        entry = await bounded(got.get(), f"B's follower to receive {what}")
        assert entry is not None, f"B's follower ended before {what}"
        entries.append(entry)
        return describe(entry)

    assert await next_entry("the backfill") == ("status", S.WORKING, "reading")
    assert await next_entry("the backfill") == ("status", S.INPUT_REQUIRED, "Which one?")
    assert got.empty() and not follower.done()  # input-required does not end a subscription
    second = await a.submit("asker", OWNER, request("the red one", task_id=task_id))
    assert await next_entry("working, live") == ("status", S.WORKING, None)
    mid = second.run.record.seq  # type: ignore[union-attr]  # where a late subscriber on C comes in
    late: asyncio.Queue[Entry | None] = asyncio.Queue()
    late_follower = asyncio.create_task(drain(c.follow(task_id, mid, until=is_terminal), late))
    answer_gate.set()
    task = await finished(a, second)
    await bounded(asyncio.gather(follower, late_follower), "the followers to end")
    while (e := got.get_nowait()) is not None:
        entries.append(e)
    late_entries = []
    while (e := late.get_nowait()) is not None:
        late_entries.append(e)
    log = await assert_log_consistent(a.store, task_id)
    streamed = [e for e in log if e.streamed]  # the user's message (seq 5) is not streamed
    assert [e.seq for e in entries] == [e.seq for e in streamed if e.seq > 2] == [3, 4, 6, 7, 8]
    assert [describe(e) for e in entries[3:]] == [("artifact", "You chose the red one.", False, True),
                                                  ("status", S.COMPLETED, None)]
    assert mid == 6 and [e.seq for e in late_entries] == [7, 8]
    assert [describe(e) for e in late_entries] == [describe(e) for e in entries[3:]]
    assert task.status.state is S.COMPLETED and ran == [("A", 1), ("A", 2)]
    await shutdown(a, b, c)


# --- cancel through another engine ----------------------------------------------------------------------------------


async def test_cancel_sent_to_b_stops_the_agent_running_on_a() -> None:
    record: list[tuple[str, str]] = []
    started = asyncio.Event()

    def agents(name: str) -> list[AgentFn]:
        async def sleeper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            yield ctx.say("thinking")
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                record.append((name, "cancelled"))
                raise
            finally:
                record.append((name, "finally"))
            yield "too late"  # pragma: no cover

        return [sleeper]

    engines = cluster(agents)
    a, b = engines["A"], engines["B"]
    store = a.store
    sub = await a.submit("sleeper", OWNER, request())
    task_id = sub.record.task.id
    await bounded(started.wait(), "the agent to start")
    task = await bounded(b.cancel("sleeper", OWNER, m.CancelTaskRequest(id=task_id, metadata={"by": "B"})),
                         "B's cancel")
    assert task.status.state is S.CANCELED
    assert record == [("A", "cancelled"), ("A", "finally")]
    assert sub.run is not None and sub.run.aio is not None and sub.run.aio.done()
    assert task_id not in a.runs and task_id not in b.runs
    log = await assert_log_consistent(store, task_id)
    cancels = [e for e in log if describe(e)[:2] == ("status", S.CANCELED)]
    assert len(cancels) == 1 and cancels[0] is log[-1]
    assert cancels[0].event.metadata == {"by": "B"}  # type: ignore[union-attr]
    assert await store.lease(task_id) is None
    await shutdown(a, b)


# --- continuing through another engine -------------------------------------------------------------------------------


def asker_agents(ran: list[tuple[str, int, str]], gate: asyncio.Event | None = None
                 ) -> Callable[[str], list[AgentFn]]:
    def agents(name: str) -> list[AgentFn]:
        async def asker(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append((name, ctx.turn, ctx.text))
            if ctx.turn == 1:
                yield ctx.ask("Which one?")
                return
            if gate is not None:
                await gate.wait()
            yield f"You chose {ctx.text}."

        return [asker]

    return agents


async def test_an_interrupted_task_started_on_a_is_continued_through_b() -> None:
    ran: list[tuple[str, int, str]] = []
    gate = asyncio.Event()
    engines = cluster(asker_agents(ran, gate))
    a, b = engines["A"], engines["B"]
    store = a.store
    first = await a.submit("asker", OWNER, request("start"))
    task_id = first.record.task.id
    assert (await finished(a, first)).status.state is S.INPUT_REQUIRED
    assert await store.lease(task_id) is None  # nobody runs a task that waits for input
    second = await b.submit("asker", OWNER, request("blue", task_id=task_id))
    assert second.run is not None and task_id in b.runs and task_id not in a.runs
    lease = await store.lease(task_id)
    assert lease is not None and lease.holder == b.holder  # B runs the second turn
    gate.set()
    task = await finished(b, second)
    assert task.status.state is S.COMPLETED and answer(task) == ["You chose blue."]
    assert ran == [("A", 1, "start"), ("B", 2, "blue")]
    assert await store.lease(task_id) is None
    await assert_log_consistent(store, task_id)
    await shutdown(a, b)


@pytest.mark.parametrize("commit_io", [0, 2], ids=["instant-store", "store-with-round-trips"])
async def test_concurrent_continues_on_a_and_b_exactly_one_wins(commit_io: int) -> None:
    ran: list[tuple[str, int, str]] = []
    engines = cluster(asker_agents(ran), store=TapStore(commit_io))
    a, b = engines["A"], engines["B"]
    store = a.store
    first = await a.submit("asker", OWNER, request("start"))
    task_id = first.record.task.id
    assert (await finished(a, first)).status.state is S.INPUT_REQUIRED
    before = len(await log_of(store, task_id))
    results = await bounded(asyncio.gather(
        a.submit("asker", OWNER, request("red", task_id=task_id)),
        b.submit("asker", OWNER, request("green", task_id=task_id)),
        return_exceptions=True), "both continues")
    wins = [(name, r) for name, r in zip("AB", results, strict=True) if isinstance(r, Submission)]
    losses = [r for r in results if not isinstance(r, Submission)]
    assert len(wins) == 1 and len(losses) == 1, results
    assert isinstance(losses[0], UnsupportedOperationError), losses
    winner_name, sub = wins[0]
    winner = engines[winner_name]
    loser = engines["B" if winner_name == "A" else "A"]
    task = await finished(winner, sub)
    choice = "red" if winner_name == "A" else "green"
    assert task.status.state is S.COMPLETED and answer(task) == [f"You chose {choice}."]
    assert ran == [("A", 1, "start"), (winner_name, 2, choice)]  # one agent run for the second turn
    assert task_id not in loser.runs
    log = await assert_log_consistent(store, task_id)
    assert [describe(e) for e in log[before:]] == [
        ("message", choice), ("status", S.WORKING, None), ("artifact", f"You chose {choice}.", False, True),
        ("status", S.COMPLETED, None)]
    await shutdown(a, b)


# --- idempotency across engines --------------------------------------------------------------------------------------


def counted_agents(ran: list[tuple[str, str]]) -> Callable[[str], list[AgentFn]]:
    def agents(name: str) -> list[AgentFn]:
        async def counted(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append((name, ctx.text))
            yield f"got {ctx.text}"

        return [counted]

    return agents


async def test_the_same_message_sent_to_a_and_then_b_is_one_task_run_once() -> None:
    ran: list[tuple[str, str]] = []
    engines = cluster(counted_agents(ran))
    a, b = engines["A"], engines["B"]
    first = await a.submit("counted", OWNER, request("one", mid="same-id"))
    again = await b.submit("counted", OWNER, request("one", mid="same-id"))  # a retry, landing on another process
    assert again.duplicate and again.record.task.id == first.record.task.id and again.run is None
    task = await bounded(b.wait_settled(again), "B to see the task settle")
    assert task.status.state is S.COMPLETED and answer(task) == ["got one"]
    await finished(a, first)
    late = await b.submit("counted", OWNER, request("one", mid="same-id"))
    assert late.duplicate and late.record.task.id == task.id
    # A different message that reuses the messageId is not a retry: a new task.
    other = await b.submit("counted", OWNER, request("two", mid="same-id"))
    assert not other.duplicate and other.record.task.id != task.id
    assert answer(await finished(b, other)) == ["got two"]
    assert ran == [("A", "one"), ("B", "two")]
    await shutdown(a, b)


@pytest.mark.parametrize("commit_io", [0, 2], ids=["instant-store", "store-with-round-trips"])
async def test_the_same_message_sent_to_a_and_b_at_once_is_one_task_run_once(commit_io: int) -> None:
    ran: list[tuple[str, str]] = []
    engines = cluster(counted_agents(ran), store=TapStore(commit_io))
    a, b = engines["A"], engines["B"]
    subs = await bounded(asyncio.gather(a.submit("counted", OWNER, request("one", mid="same-id")),
                                        b.submit("counted", OWNER, request("one", mid="same-id"))), "both sends")
    assert subs[0].record.task.id == subs[1].record.task.id
    assert sorted(s.duplicate for s in subs) == [False, True]
    tasks = [await bounded(e.wait_settled(s), "the task to settle") for e, s in zip((a, b), subs, strict=True)]
    for s in subs:
        if s.run is not None:
            await bounded(asyncio.gather(s.run.aio), "the run to end")  # type: ignore[arg-type]
    assert [t.status.state for t in tasks] == [S.COMPLETED, S.COMPLETED]
    assert len(ran) == 1 and ran[0][1] == "one"
    page = await a.list("counted", OWNER, m.ListTasksRequest())
    assert [t.id for t in page.tasks] == [tasks[0].id]
    await assert_log_consistent(a.store, tasks[0].id)
    await shutdown(a, b)


# --- leases, death and recovery ----------------------------------------------------------------------------------------


async def test_recover_on_b_does_not_take_a_task_a_is_running() -> None:
    gate = asyncio.Event()
    ran: list[str] = []

    def agents(name: str) -> list[AgentFn]:
        async def slow(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append(name)
            yield ctx.say("working on it")
            await gate.wait()
            yield "done"

        return [slow]

    engines = cluster(agents)
    a, b = engines["A"], engines["B"]
    store = a.store
    sub = await a.submit("slow", OWNER, request())
    task_id = sub.record.task.id

    async def said() -> bool:
        return len(await log_of(store, task_id)) >= 3

    await store.until(said, "A's agent at work")  # type: ignore[attr-defined]
    before = [describe(e) for e in await log_of(store, task_id)]
    assert await b.recover() == []
    assert b.runs == {} and task_id in a.runs
    lease = await store.lease(task_id)
    assert lease is not None and lease.holder == a.holder
    assert [describe(e) for e in await log_of(store, task_id)] == before
    gate.set()
    task = await finished(a, sub)
    assert task.status.state is S.COMPLETED and answer(task) == ["done"] and ran == ["A"]
    await assert_log_consistent(store, task_id)
    await shutdown(a, b)


async def test_after_a_dies_b_fails_its_task_once_the_lease_expires() -> None:
    started = asyncio.Event()
    ran: list[str] = []

    def agents(name: str) -> list[AgentFn]:
        async def stuck(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append(name)
            yield ctx.say("half done")
            started.set()
            await asyncio.Event().wait()
            yield "never"  # pragma: no cover

        return [stuck]

    engines = cluster(agents, lease_seconds={"A": 1.0})
    a, b = engines["A"], engines["B"]
    store = a.store
    sub = await a.submit("stuck", OWNER, request())
    task_id = sub.record.task.id
    await bounded(started.wait(), "A's agent to start")

    async def said() -> bool:
        return len(await log_of(store, task_id)) >= 3

    await store.until(said, "A's progress")  # type: ignore[attr-defined]
    assert await b.recover() == []  # A's lease is still live
    await die(sub.run)  # type: ignore[arg-type]
    assert await b.recover() == []  # dead, but its lease has not expired yet
    lease = await store.lease(task_id)
    assert lease is not None and lease.holder == a.holder
    await asyncio.sleep(max(lease.expires_at - time.time(), 0) + 0.05)  # the lease running out is what is tested
    assert await b.recover() == [task_id]
    log = await assert_log_consistent(store, task_id)
    assert [describe(e) for e in log] == [
        ("task", S.SUBMITTED), ("status", S.WORKING, None), ("status", S.WORKING, "half done"),
        ("status", S.FAILED, RESTART_MESSAGE)]
    assert ran == ["A"] and await store.lease(task_id) is None
    assert await b.recover() == []
    await shutdown(a, b)


def essay_agents(ran: list[tuple[str, Any]], store: TapStore, *, chunk_before_checkpoint: bool
                 ) -> Callable[[str], list[AgentFn]]:
    """An agent whose uninterrupted answer is "One. Two. Three. Four.": it checkpoints halfway, writes more text
    after the checkpoint, then its process dies; resumed from the checkpoint, it writes the rest."""

    def agents(name: str) -> list[AgentFn]:
        async def essay(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append((name, ctx.checkpoint))

            async def stored(text: str) -> None:
                async def check() -> bool:
                    return any(describe(e)[:2] == ("artifact", text) for e in await log_of(store, ctx.task_id))

                await store.until(check, f"the chunk {text!r}")

            if ctx.checkpoint is None:
                yield "One. "
                if chunk_before_checkpoint:
                    await asyncio.sleep(0)  # a later loop turn, as a model streams
                    yield "Two. "
                    await stored("One. ")
                    yield ctx.internal("checkpoint", state={"step": 2})
                else:
                    yield ctx.internal("checkpoint", state={"step": 1})
                    yield "Two. "
                await asyncio.sleep(0)
                yield "Three. "
                await stored("Two. ")  # text written after the checkpoint: the resumed run writes it again
                await asyncio.Event().wait()  # the process dies here
            if ctx.checkpoint == {"step": 1}:
                yield "Two. "
            yield "Three. "
            yield "Four."

        return [essay]

    return agents


async def resume_after_death(chunk_before_checkpoint: bool) -> None:
    store = TapStore()
    ran: list[tuple[str, Any]] = []
    engines = cluster(essay_agents(ran, store, chunk_before_checkpoint=chunk_before_checkpoint),
                      store=store, lease_seconds={"A": 1.0, "B": 0.3})
    a, b = engines["A"], engines["B"]
    sub = await a.submit("essay", OWNER, request())
    task_id = sub.record.task.id

    async def after_checkpoint() -> bool:
        return await store.get_checkpoint(task_id) is not None and any(
            describe(e)[:2] == ("artifact", "Two. ") for e in await log_of(store, task_id))

    await store.until(after_checkpoint, "text written after the checkpoint")
    died_at, _ = await a_dies_b_finishes(sub, b, store)
    assert ran == [("A", None), ("B", {"step": 2 if chunk_before_checkpoint else 1})]
    log = await assert_log_consistent(store, task_id)
    assert ("status", S.WORKING, RESUME_MESSAGE) in [describe(e) for e in log[died_at:]]
    rec = await store.get(task_id)
    assert rec is not None and rec.task.status.state is S.COMPLETED
    assert answer(rec.task) == ["One. Two. Three. Four."], answer(rec.task)  # one artifact, the whole answer once
    assert await store.get_checkpoint(task_id) is None and await store.lease(task_id) is None
    await shutdown(a, b)


async def _collect(it: AsyncIterator[Entry]) -> list[Entry]:
    return [e async for e in it]


async def a_dies_b_finishes(sub: Submission, b: TaskEngine, store: TapStore) -> tuple[int, list[Entry]]:
    """A's process dies during `sub`'s run; B's heartbeat takes the task over once A's lease runs out and completes
    it. (entries in the log when A died, what B's follow showed from there to the end)."""
    task_id = sub.record.task.id
    await die(sub.run)  # type: ignore[arg-type]
    died_at = len(await log_of(store, task_id))
    await b.start()
    entries = await bounded(_collect(b.follow(task_id, died_at, until=is_terminal)),
                            "B to take the task over and finish it")
    assert describe(entries[-1]) == ("status", S.COMPLETED, None)
    return died_at, entries


async def test_after_a_dies_b_resumes_its_task_from_the_checkpoint() -> None:
    await resume_after_death(chunk_before_checkpoint=True)


async def test_after_a_dies_b_resumes_a_task_checkpointed_before_its_first_text_chunk() -> None:
    await resume_after_death(chunk_before_checkpoint=False)


async def test_a_resumed_run_appends_the_chunks_of_an_artifact_after_its_checkpoint_once() -> None:
    """An artifact streamed in chunks (append=true, A2A 1.0 section 4.2.2 TaskArtifactUpdateEvent) over a
    checkpoint: the process dies after a chunk written past the checkpoint; the run resumed from the checkpoint
    appends that chunk again, and the artifact must hold it once (it is restored to what it was at the
    checkpoint first), as the uninterrupted run's would."""
    store = TapStore()
    ran: list[tuple[str, Any]] = []

    def chunk(text: str, *, append: bool, last: bool = False) -> ArtifactChunk:
        return ArtifactChunk(m.Artifact(artifact_id="table", parts=[m.Part(text=text)]), append=append,
                             last_chunk=last)

    def agents(name: str) -> list[AgentFn]:
        async def tabler(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            ran.append((name, ctx.checkpoint))
            if ctx.checkpoint is None:
                yield chunk("row 1; ", append=False)
                yield ctx.internal("checkpoint", state={"rows": 1})
                await asyncio.sleep(0)  # a later loop turn: the next chunk is a commit of its own
                yield chunk("row 2; ", append=True)
                await asyncio.Event().wait()  # the process dies here
            yield chunk("row 2; ", append=True)
            yield chunk("row 3.", append=True, last=True)

        return [tabler]

    engines = cluster(agents, store=store, lease_seconds={"A": 1.0, "B": 0.3})
    a, b = engines["A"], engines["B"]
    sub = await a.submit("tabler", OWNER, request())
    task_id = sub.record.task.id

    async def row_2_written() -> bool:
        return any(describe(e)[:2] == ("artifact", "row 2; ") for e in await log_of(store, task_id))

    await store.until(row_2_written, "the chunk written after the checkpoint")
    _, entries = await a_dies_b_finishes(sub, b, store)
    assert ran == [("A", None), ("B", {"rows": 1})]
    await assert_log_consistent(store, task_id)
    rec = await store.get(task_id)
    assert rec is not None
    assert answer(rec.task) == ["row 1; row 2; row 3."], answer(rec.task)  # each row once
    # What B wrote first restores the table to the checkpoint's (a follower's copy is right again, too).
    assert describe(entries[0]) == ("artifact", "row 1; ", False, False)
    await shutdown(a, b)


# --- a run whose task was taken over ---------------------------------------------------------------------------------


def stale_agents(events: list[str], release: asyncio.Event, *, settle: bool) -> Callable[[str], list[AgentFn]]:
    """On A: says something, waits for `release`, then says more (and, with `settle`, checkpoints)."""

    def agents(name: str) -> list[AgentFn]:
        async def stale(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            events.append(f"{name}: start")
            try:
                yield ctx.say("step 1")
                await release.wait()
                events.append(f"{name}: released")
                yield ctx.say("step 2")
                if settle:
                    yield ctx.internal("checkpoint", state={"step": 2})
                    events.append(f"{name}: after the checkpoint")  # pragma: no cover - must not happen
                await asyncio.Event().wait()
                yield "never"  # pragma: no cover
            finally:
                events.append(f"{name}: closed")

        return [stale]

    return agents


async def take_over_from_a(settle: bool) -> tuple[dict[str, TaskEngine], Submission, list[str], list[tuple]]:
    """A's lease has lapsed (its heartbeat stalled) while its agent still runs; B recovers the task (fails it)."""
    events: list[str] = []
    release = asyncio.Event()
    engines = cluster(stale_agents(events, release, settle=settle), lease_seconds={"A": 0.0})
    a, b = engines["A"], engines["B"]
    store = a.store
    sub = await a.submit("stale", OWNER, request())
    task_id = sub.record.task.id

    async def said() -> bool:
        return len(await log_of(store, task_id)) >= 3

    await store.until(said, "A's first status")  # type: ignore[attr-defined]
    assert await b.recover() == [task_id]  # a commit by B: the task's log moved on under A's run
    after_takeover = [describe(e) for e in await log_of(store, task_id)]
    assert after_takeover[-1] == ("status", S.FAILED, RESTART_MESSAGE)
    release.set()  # A's agent goes on and A tries to append
    return engines, sub, events, after_takeover


async def test_a_run_whose_task_was_taken_over_stops_without_writing() -> None:
    engines, sub, events, after_takeover = await take_over_from_a(settle=True)
    a, b = engines["A"], engines["B"]
    task_id = sub.record.task.id
    assert sub.run is not None and sub.run.aio is not None
    await bounded(asyncio.gather(sub.run.aio, return_exceptions=True), "A's run to stop")
    assert events == ["A: start", "A: released", "A: closed"]
    assert sub.run.lease_lost and task_id not in a.runs
    assert [describe(e) for e in await assert_log_consistent(a.store, task_id)] == after_takeover
    assert await a.store.get_checkpoint(task_id) is None  # A's checkpoint was not written either
    await shutdown(a, b)


async def test_a_run_whose_task_was_taken_over_stops_at_its_next_append() -> None:
    engines, sub, events, after_takeover = await take_over_from_a(settle=False)
    a, b = engines["A"], engines["B"]
    task_id = sub.record.task.id
    try:
        assert sub.run is not None and sub.run.aio is not None
        await bounded(asyncio.gather(sub.run.aio, return_exceptions=True), "A's run to stop")
        assert events == ["A: start", "A: released", "A: closed"]
        assert [describe(e) for e in await assert_log_consistent(a.store, task_id)] == after_takeover
    finally:
        await shutdown(a, b)


async def test_a_blocking_send_on_a_returns_when_its_task_was_taken_over() -> None:
    """A message/send waiting on A gets the task as the engine that took it over left it, instead of hanging."""
    engines, sub, events, after_takeover = await take_over_from_a(settle=True)
    a, b = engines["A"], engines["B"]
    task = await bounded(a.wait_settled(sub), "A's blocking send to return")
    assert task.status.state is S.FAILED
    assert task.status.message is not None and task.status.message.text() == RESTART_MESSAGE
    assert [describe(e) for e in await assert_log_consistent(a.store, task.id)] == after_takeover
    assert events == ["A: start", "A: released", "A: closed"]  # A's run stopped, without writing
    await shutdown(a, b)


async def test_a_heartbeat_stops_a_run_whose_lease_another_engine_took() -> None:
    events: list[str] = []
    release = asyncio.Event()
    engines = cluster(stale_agents(events, release, settle=False), lease_seconds={"A": 0.3})
    a, b = engines["A"], engines["B"]
    store = a.store
    await a.start()  # A's heartbeat renews its leases every 0.1 s and checks it still holds them
    sub = await a.submit("stale", OWNER, request())
    task_id = sub.record.task.id

    async def said() -> bool:
        return len(await log_of(store, task_id)) >= 3

    await store.until(said, "A's first status")  # type: ignore[attr-defined]
    # B takes the task over (as its recovery would): one commit that moves the log on and takes the lease.
    rec = await store.get(task_id)
    assert rec is not None
    taken = m.TaskStatusUpdateEvent(task_id=task_id, context_id=rec.task.context_id,
                                    status=m.TaskStatus(state=S.WORKING, timestamp=now_iso()))
    await store.commit(Commit(task_id=task_id, expected_seq=rec.seq, entries=[Entry(rec.seq + 1, taken)],
                              snapshot=fold(rec.task, [taken]), updated_at=time.time(),
                              lease=Lease(b.holder, time.time() + 30)))
    after_takeover = [describe(e) for e in await log_of(store, task_id)]
    assert sub.run is not None and sub.run.aio is not None
    await bounded(asyncio.gather(sub.run.aio, return_exceptions=True), "A's heartbeat to stop its run")
    assert events == ["A: start", "A: closed"] and sub.run.lease_lost and task_id not in a.runs
    assert [describe(e) for e in await assert_log_consistent(store, task_id)] == after_takeover
    lease = await store.lease(task_id)
    assert lease is not None and lease.holder == b.holder
    await shutdown(a, b)


async def test_a_run_writes_nothing_once_its_heartbeat_finds_the_lease_taken() -> None:
    """B has claimed the task (its recovery has not written yet): A's run, streaming text, stops and writes nothing
    more once A knows the lease is gone, not even the text it still held."""
    closed: list[str] = []
    writes_after_loss: list[int] = []
    runs: dict[str, Run] = {}

    class Watched(TapStore):
        async def commit(self, commit: Commit) -> None:
            await super().commit(commit)
            run = runs.get(commit.task_id)
            if run is not None and run.lease_lost:
                writes_after_loss.append(commit.last_seq)

    def agents(name: str) -> list[AgentFn]:
        async def chatty(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            try:
                i = 0
                while True:
                    yield f"t{i} "
                    i += 1
                    await asyncio.sleep(0)  # a token per loop turn, as a model streams
            finally:
                closed.append(name)

        return [chatty]

    store = Watched()
    engines = cluster(agents, store=store, lease_seconds={"A": 0.3})
    a, b = engines["A"], engines["B"]
    await a.start()  # the heartbeat checks A's leases every 0.1 s
    sub = await a.submit("chatty", OWNER, request())
    task_id = sub.record.task.id
    assert sub.run is not None and sub.run.aio is not None
    runs[task_id] = sub.run

    async def streaming() -> bool:
        return any(describe(e)[0] == "artifact" for e in await log_of(store, task_id))

    await store.until(streaming, "A's text")
    claimed = await store.claim_orphans(b.holder, time.time() + 3600, time.time() + 30)  # B takes the lease
    assert [r.task.id for r in claimed] == [task_id]
    await bounded(asyncio.gather(sub.run.aio, return_exceptions=True), "A's heartbeat to stop the run")
    assert sub.run.lease_lost and closed == ["A"] and task_id not in a.runs
    assert writes_after_loss == []
    lease = await store.lease(task_id)
    assert lease is not None and lease.holder == b.holder
    await assert_log_consistent(store, task_id)
    await shutdown(a, b)


# --- the change feed ---------------------------------------------------------------------------------------------------


async def test_the_change_feed_lists_every_commit_of_every_engine_in_one_order() -> None:
    ran: list[tuple[str, int, str]] = []
    started = asyncio.Event()

    def agents(name: str) -> list[AgentFn]:
        async def sleeper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            yield ctx.say("thinking")
            started.set()
            await asyncio.Event().wait()
            yield "never"  # pragma: no cover

        return [*asker_agents(ran)(name), sleeper]

    journal: list[tuple[str, Commit]] = []
    store = TapStore()
    engines = cluster(agents, store=store, journal=journal)
    a, b = engines["A"], engines["B"]
    first = await a.submit("asker", OWNER, request("start"))  # on A, then continued on B
    await finished(a, first)
    second = await b.submit("asker", OWNER, request("blue", task_id=first.record.task.id))
    await finished(b, second)
    other = await b.submit("asker", OWNER, request("another"))  # on B
    await finished(b, other)
    running = await a.submit("sleeper", OWNER, request())  # on A, canceled through B
    await bounded(started.wait(), "the sleeper to start")
    await bounded(b.cancel("sleeper", OWNER, m.CancelTaskRequest(id=running.record.task.id)), "B's cancel")

    feed = await store.changes_after(0)
    assert [c.position for c in feed] == list(range(1, len(feed) + 1))
    assert len(journal) == len(feed)  # every commit, in the order they were made
    for change, (_, commit) in zip(feed, journal, strict=True):
        assert (change.task_id, change.seq, change.state) == (
            commit.task_id, commit.last_seq, commit.snapshot.status.state)
        assert (change.agent_id, change.owner) == ("asker" if commit.task_id != running.record.task.id
                                                   else "sleeper", OWNER)
    assert {name for name, _ in journal} == {"A", "B"}
    for sub in (first, other, running):
        task_id = sub.record.task.id
        rows = [c for c in feed if c.task_id == task_id]
        assert [c.seq for c in rows] == sorted(c.seq for c in rows)
        rec = await store.get(task_id)
        assert rec is not None and (rows[-1].seq, rows[-1].state) == (rec.seq, rec.task.status.state)
        await assert_log_consistent(store, task_id)
    # Who wrote what: A created and interrupted the first task, B continued it; A wrote the cancel B asked for.
    writers = [(name, c.task_id, c.snapshot.status.state) for name, c in journal]
    assert writers[0] == ("A", first.record.task.id, S.SUBMITTED)
    assert ("A", first.record.task.id, S.INPUT_REQUIRED) in writers
    assert ("B", first.record.task.id, S.COMPLETED) in writers
    assert {name for name, tid, _ in writers if tid == other.record.task.id} == {"B"}
    assert writers[-1] == ("A", running.record.task.id, S.CANCELED)
    assert (await store.changes_after(len(feed) - 2)) == feed[-2:]
    await shutdown(a, b)
