"""The store's change feed, fanned out to the dashboard's live views.

One poller per process reads `TaskStore.changes_after` (every replica's commits on a shared store: the
feed is written in the commit's transaction) while at least one browser listens, and hands each task's newest
change of what it read to every listener's bounded queue: the browser only needs to know that a task changed, and
a streaming answer changes its task at every piece (one change event per token cost the server 25-33% more CPU per token
with one dashboard open at 1,000 streams: bench/RESULTS.md). A listener that falls behind, or a read it could not
take whole, is told to reload instead of growing the server's memory. A commit of this process nudges the poller
(:meth:`ChangeFeed.nudge`, an engine commit listener), so local changes reach the browser at once; while changes
keep coming, reads are MIN_GAP apart and share what was committed meanwhile. Other replicas' changes are read at
the next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from parley.tasks.store import Change, TaskStore

log = logging.getLogger("parley.web")
POLL_SECONDS = 0.5
MIN_GAP = 0.1  # seconds between two reads while changes keep coming (the browser refreshes 0.3 s after one)
PAGE = 1000
QUEUE = 256
OVERFLOW = None  # put in a listener's queue when it fell behind: reload everything
IDLE = "idle"  # yielded when nothing changed for `idle` seconds (the listener's cue for a keep-alive)


class ChangeFeed:
    """Fans the store's change feed out to listeners (see the module docstring)."""

    def __init__(self, store: TaskStore, poll_seconds: float = POLL_SECONDS) -> None:
        self.store = store
        self.poll_seconds = poll_seconds
        self._listeners: set[asyncio.Queue[Change | None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._position: int | None = None
        self._starting = asyncio.Lock()  # one head lookup at a time: two could otherwise move the position back
        self._nudged = asyncio.Event()  # a local commit: read the feed now rather than at the next poll

    async def listen(self, idle: float | None = None) -> AsyncIterator[Change | str | None]:
        """Changes committed from now on, in feed order, each task's newest of a read (a task's changes read
        together come as its last); None when some were missed (reload); IDLE after `idle` quiet seconds."""
        queue: asyncio.Queue[Change | None] = asyncio.Queue(QUEUE)
        async with self._starting:
            if self._position is None:
                self._position = await self._head()
            self._listeners.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll(), name="parley-dashboard-feed")
        try:
            while True:
                try:
                    # asyncio.timeout, not wait_for: on Python 3.11 wait_for could return a change and drop a
                    # cancel that came at the same time, and the stream would outlive its client
                    async with asyncio.timeout(idle):
                        change = await queue.get()
                except TimeoutError:
                    yield IDLE
                    continue
                yield change
        finally:
            self._listeners.discard(queue)

    async def _head(self) -> int:
        """The position of the newest change in the store (0 when there is none)."""
        position = 0
        while True:
            page = await self.store.changes_after(position, PAGE)
            if not page:
                return position
            position = page[-1].position
            if len(page) < PAGE:
                return position

    def nudge(self, *_: object) -> None:
        """Something was committed here: read the feed now (an engine commit listener; cheap when nobody
        listens)."""
        if self._listeners:
            self._nudged.set()

    async def _poll(self) -> None:
        while self._listeners:
            self._nudged.clear()  # a commit from now on sets it again: the wait below never misses one
            try:
                changes = await self.store.changes_after(self._position or 0, PAGE)
            except Exception:  # the store is away for a moment: try again at the next tick
                log.warning("the dashboard's change feed could not be read", exc_info=True)
                changes = []
            if changes:
                self._position = changes[-1].position
                newest = _newest_per_task(changes)
                for queue in list(self._listeners):
                    _offer(queue, newest)
            if len(changes) == PAGE:
                continue  # more to read now
            if changes:
                await asyncio.sleep(MIN_GAP)  # changes keep coming: the next read takes what came meanwhile
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_seconds):
                    await self._nudged.wait()
        self._position = None  # nobody listens: the next listener starts from the head again

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _newest_per_task(changes: list[Change]) -> list[Change]:
    """The last change of each task among `changes`, in feed order."""
    return sorted({c.task_id: c for c in changes}.values(), key=lambda c: c.position)


def _offer(queue: asyncio.Queue[Change | None], changes: list[Change]) -> None:
    """Queue the changes of one read; a queue without room for all of them is emptied and told to reload
    (OVERFLOW), which stands for them too."""
    if queue.maxsize - queue.qsize() < len(changes):
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(OVERFLOW)
        return
    for change in changes:
        queue.put_nowait(change)


__all__ = ["IDLE", "ChangeFeed"]
