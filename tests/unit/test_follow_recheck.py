"""A follower does not depend on every publish arriving: a process may commit entries and die (or lose its
bus connection) before it publishes them. After RECHECK_SECONDS of silence the follower reads the store,
so a subscription (A2A 1.0 section 3.1.6) still ends when the task does."""

from __future__ import annotations

import asyncio

import pytest
from test_store_contract import advance, new_task, put, status

from parley.protocol import models as m
from parley.protocol.states import is_terminal
from parley.tasks import follow
from parley.tasks.bus import LocalBus
from parley.tasks.follow import follow_log
from parley.tasks.memory_store import MemoryTaskStore

S = m.TaskState


async def test_entries_committed_without_a_publish_reach_the_follower(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "RECHECK_SECONDS", 0.05)
    store, bus = MemoryTaskStore(), LocalBus()
    await put(store, new_task(state=S.WORKING))
    seen: list[int] = []

    async def follower() -> None:
        async for entry in follow_log(store, bus, "t1", 1, state=S.WORKING, state_seq=1, until=is_terminal):
            assert entry is not None  # no keep-alives asked for
            seen.append(entry.seq)

    reader = asyncio.create_task(follower())
    # Written by "another process" that died before publishing: nothing goes on the bus.
    await advance(store, "t1", status(S.WORKING, "half way"))
    await advance(store, "t1", status(S.COMPLETED, "done"))
    async with asyncio.timeout(10):
        await reader
    assert seen == [2, 3]


async def test_keep_alive_cues_still_come_at_the_idle_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Store re-reads in between do not swallow the writer's keep-alive cue (None every `idle` seconds)."""
    monkeypatch.setattr(follow, "RECHECK_SECONDS", 0.01)
    store, bus = MemoryTaskStore(), LocalBus()
    await put(store, new_task(state=S.WORKING))
    cues = 0
    async with asyncio.timeout(10):
        async for entry in follow_log(store, bus, "t1", 1, state=S.WORKING, state_seq=1, until=is_terminal,
                                      idle=0.05):
            if entry is None:
                cues += 1
                if cues == 2:
                    await advance(store, "t1", status(S.COMPLETED, "done"))
            else:
                assert entry.seq == 2
    assert cues == 2
