"""Helpers of the task-engine tests that run engines in this process over an in-memory store
(test_engine, test_engine_promises, test_engines_shared): a store that tells the test of each commit, bounded
waits, following a task into a queue, a run that dies, and the consistency check of a task's log.

Import it as `from enginekit import ...` (pytest puts tests/unit on the path)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from parley.agents.base import Agent, AgentOutput, FunctionAgent, RunContext
from parley.protocol import models as m
from parley.protocol.states import is_terminal
from parley.tasks.engine import Run, TaskEngine
from parley.tasks.log import Entry, apply
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.store import Commit, TaskStore

WAIT = 10.0  # seconds before a wait that a regression would hang is declared failed; never a pacing delay


class TapStore(MemoryTaskStore):
    """The in-memory store, telling the test of each commit (`commits`, :meth:`until`); `commit_io` yields the loop
    inside each commit (before anything is written) the way a database round trip would, so concurrent writers
    interleave."""

    def __init__(self, commit_io: int = 0) -> None:
        super().__init__()
        self.commit_io = commit_io
        self.commits: list[Commit] = []
        self._changed = asyncio.Event()

    async def commit(self, commit: Commit) -> None:
        for _ in range(self.commit_io):
            await asyncio.sleep(0)  # a database round trip, not a synchronisation
        await super().commit(commit)
        self.commits.append(commit)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def until(self, check: Callable[[], Awaitable[bool]], what: str) -> None:
        """Return once `check()` holds, re-checked after every commit; fail after WAIT seconds."""

        async def watch() -> None:
            while True:
                changed = self._changed  # taken before the check: a commit during it is not missed
                if await check():
                    return
                await changed.wait()

        try:  # not wait_for: on Python 3.11 it can swallow a cancel that comes as `watch()` returns
            async with asyncio.timeout(WAIT):
                await watch()
        except TimeoutError:
            raise AssertionError(f"the store never showed {what}") from None


def make_engine(*fns: Callable[[RunContext], AsyncIterator[AgentOutput]], store: TaskStore | None = None,
                **kw: Any) -> TaskEngine:
    """A TaskEngine running the agent functions `fns` (each its own agent, named after the function) over `store`
    (a fresh in-memory one by default); `kw` go to TaskEngine."""
    agents: dict[str, Agent] = {fn.__name__: FunctionAgent(fn, id=fn.__name__) for fn in fns}
    return TaskEngine(store if store is not None else MemoryTaskStore(), agents, **kw)


async def bounded(aw: Awaitable[Any], what: str) -> Any:
    """Await `aw`; fail naming `what` after WAIT seconds."""
    try:
        return await asyncio.wait_for(aw, WAIT)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def drain(it: AsyncIterator[Entry], into: asyncio.Queue) -> None:
    """Put every entry of a follow into a queue, then None at its end."""
    try:
        async for entry in it:
            await into.put(entry)
    finally:
        await into.put(None)


async def die(run: Run) -> None:
    """The process running `run` dies: its agent stops and nothing more is written for it."""
    run.lease_lost = True
    assert run.aio is not None
    run.aio.cancel()
    await bounded(asyncio.gather(run.aio, return_exceptions=True), "the dying run to stop")


async def log_of(store: TaskStore, task_id: str) -> list[Entry]:
    """A task's whole log."""
    return await store.events_after(task_id, 0)


async def assert_log_consistent(store: TaskStore, task_id: str) -> list[Entry]:
    """Seqs 1..n without gaps, nothing after a terminal state, and the log folds into the snapshot; the log."""
    log = await log_of(store, task_id)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    terminal_at = [e.seq for e in log
                   if isinstance(e.event, m.TaskStatusUpdateEvent) and is_terminal(e.event.status.state)]
    assert len(terminal_at) <= 1 and (not terminal_at or terminal_at[0] == len(log)), terminal_at
    snap = None
    for e in log:
        snap = apply(snap, e)
    rec = await store.get(task_id)
    assert rec is not None and rec.seq == len(log) and snap == rec.task
    return log
