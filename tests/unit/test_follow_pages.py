"""A follower reads the store a page at a time (parley.tasks.follow.PAGE): replaying a long log, or catching
up after its bus buffer overflowed (a slow SSE reader), it never holds the whole backlog in memory, and it
still yields every entry once, in order (A2A 1.0 section 3.1.6, SubscribeToTask from Last-Event-ID)."""

from __future__ import annotations

import asyncio

import pytest
from test_store_contract import advance, art, new_task, put, status

from parley.protocol import models as m
from parley.protocol.states import is_terminal
from parley.tasks import follow
from parley.tasks.bus import LocalBus
from parley.tasks.follow import follow_log
from parley.tasks.memory_store import MemoryTaskStore

S = m.TaskState


class CountingStore(MemoryTaskStore):
    """Records the size of every read of the log."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int] = []

    async def events_after(self, task_id: str, seq: int, limit: int | None = None) -> list:
        got = await super().events_after(task_id, seq, limit)
        self.reads.append(len(got))
        return got


async def test_a_long_log_is_replayed_a_page_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "PAGE", 16)
    store, bus = CountingStore(), LocalBus()
    await put(store, new_task(state=S.WORKING))
    for i in range(100):
        await advance(store, "t1", art(f"a{i}", f"chunk {i}"))
    await advance(store, "t1", status(S.COMPLETED, "done"))
    seen = []
    async with asyncio.timeout(10):
        async for entry in follow_log(store, bus, "t1", 0, state=S.WORKING, state_seq=1, until=is_terminal):
            assert entry is not None
            seen.append(entry.seq)
    assert seen == list(range(1, 103))
    assert max(store.reads) == 16 and len(store.reads) >= 102 // 16


async def test_a_follower_that_fell_behind_catches_up_in_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subscriber that does not read while 200 entries are published overflows its bus buffer; it then reads
    what it missed from the store, page by page, and sees every entry exactly once."""
    monkeypatch.setattr(follow, "PAGE", 16)
    store, bus = CountingStore(), LocalBus(buffer=50)
    await put(store, new_task(state=S.WORKING))
    events = follow_log(store, bus, "t1", 1, state=S.WORKING, state_seq=1, until=is_terminal)
    seen = []
    async with asyncio.timeout(10):
        await advance(store, "t1", art("a0", "first"))
        await bus.publish("t1", (await store.events_after("t1", 1))[:1])
        first = await anext(events)  # subscribed, and read the first entry; now it stops reading
        assert first is not None
        seen.append(first.seq)
        store.reads.clear()
        for i in range(1, 200):
            await advance(store, "t1", art(f"a{i}", f"chunk {i}"))
            rec = await store.get("t1")
            assert rec is not None
            await bus.publish("t1", (await store.events_after("t1", rec.seq - 1)))
        await advance(store, "t1", status(S.COMPLETED, "done"))
        await bus.publish("t1", (await store.events_after("t1", 201)))
        store.reads.clear()
        async for entry in events:
            assert entry is not None
            seen.append(entry.seq)
    assert seen == list(range(2, 203))
    assert len(store.reads) >= 200 // 16 and max(store.reads) == 16  # the overflow was caught up in pages


async def test_a_live_run_with_nothing_new_committed_is_followed_from_the_bus_alone() -> None:
    """Following a task this process runs, with nothing committed past the follower's start: the store is not
    read at the start (the bus brings what comes next); with more committed, it is read, and nothing is lost."""
    store, bus = CountingStore(), LocalBus()
    await put(store, new_task(state=S.WORKING))
    committed = 1
    events = follow_log(store, bus, "t1", 1, state=S.WORKING, state_seq=1, until=is_terminal,
                        committed=lambda: committed)
    seen = []
    async with asyncio.timeout(10):
        nxt = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0)  # the follower subscribed and waits on the bus
        assert store.reads == []
        await advance(store, "t1", status(S.COMPLETED, "done"))
        committed = 2
        await bus.publish("t1", await store.events_after("t1", 1))
        entry = await nxt
        assert entry is not None
        seen.append(entry.seq)
    assert seen == [2]

    await put(store, new_task("t2", state=S.WORKING))
    await advance(store, "t2", art("a", "early", task_id="t2"))  # committed before anyone followed
    store.reads.clear()
    got = [e.seq async for e in follow_log(store, bus, "t2", 1, state=S.WORKING, state_seq=1,
                                           until=lambda s: True, committed=lambda: 2) if e is not None]
    assert got == [2] and store.reads[0] == 1


async def test_entries_the_caller_holds_start_the_stream_without_a_read() -> None:
    """A one-pass task's stream: the entries committed with its creation (which settle it) are handed to the
    follower, which yields them without reading the store; when more was committed after them than the caller
    holds, the follower reads the store and loses nothing."""
    store, bus = CountingStore(), LocalBus()
    await put(store, new_task(state=S.WORKING))
    await advance(store, "t1", art("a", "answer"), status(S.COMPLETED, "done"))
    known = await store.events_after("t1", 1)
    store.reads.clear()
    got = [e.seq async for e in follow_log(store, bus, "t1", 1, state=S.WORKING, state_seq=1, until=is_terminal,
                                           known=known) if e is not None]
    assert got == [2, 3] and store.reads == []

    await put(store, new_task("t2", state=S.WORKING))
    await advance(store, "t2", art("a", "part one", task_id="t2"))
    known = await store.events_after("t2", 1)
    await advance(store, "t2", status(S.COMPLETED, "done", task_id="t2"))  # committed after what the caller holds
    store.reads.clear()
    got = [e.seq async for e in follow_log(store, bus, "t2", 1, state=S.WORKING, state_seq=1, until=is_terminal,
                                           known=known, committed=lambda: 3) if e is not None]
    assert got == [2, 3] and store.reads != []
