"""Retention: finished tasks are removed once they are older or more numerous than the settings allow.

The runtime runs :class:`Pruner` in the background (every `retention.interval_seconds`); `parley tasks
prune` and `POST /admin/prune` run the same passes by hand. Each pass removes a batch of tasks in one
store transaction and lets requests in between batches (the background job pauses a little, so that its
deletes reach the WAL spread out rather than in one burst).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from parley.settings import RetentionSettings
from parley.tasks.store import Retention, TaskStore

log = logging.getLogger("parley.retention")
BATCH = 100  # tasks per transaction: short enough not to hold SQLite's writer (on the event loop) for long
# Between two batches of the background job: the deletes of a large pass would otherwise come in one burst of
# WAL that the checkpoints then make requests wait for (seen in a soak as 100-170 ms p99 spikes every minute).
PAUSE = 0.05
DAY = 86400.0


def retention_of(settings: RetentionSettings, now: float, *, max_age_days: float | None = None,
                 max_finished: int | None = None) -> Retention:
    """The Retention the settings (or the given overrides) ask for at `now`."""
    age = max_age_days if max_age_days is not None else settings.max_age_days
    count = max_finished if max_finished is not None else settings.max_finished
    return Retention(finished_before=now - age * DAY if age is not None else None, keep_finished=count,
                     changes_before=now - settings.changes_minutes * 60.0)


async def prune(store: TaskStore, retention: Retention, *, now: float | None = None, batch: int = BATCH,
                pause: float = 0.0) -> int:
    """Remove every finished task `retention` lets go, a batch per transaction (`pause` seconds between
    batches, at least a yield to the event loop); returns how many."""
    now = time.time() if now is None else now
    removed = 0
    while True:
        n = await store.prune(retention, now=now, limit=batch)
        removed += n
        if n < batch:
            return removed
        await asyncio.sleep(pause)  # let requests in between batches


class Pruner:
    """The background job: a prune pass every `settings.interval_seconds`."""

    def __init__(self, store: TaskStore, settings: RetentionSettings,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self._job: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run in the background (always: with both task limits off, it still trims the change feed)."""
        self._job = asyncio.create_task(self._run(), name="parley-retention")

    async def stop(self) -> None:
        if self._job is not None:
            self._job.cancel()
            await asyncio.gather(self._job, return_exceptions=True)
            self._job = None

    async def run_once(self) -> int:
        """One pass now; returns how many tasks it removed."""
        now = self.clock()
        removed = await prune(self.store, retention_of(self.settings, now), now=now, pause=PAUSE)
        if removed:
            log.info("retention: removed %d finished task(s)", removed)
        return removed

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.interval_seconds)
            try:
                await self.run_once()
            except Exception:  # a store hiccup must not end the job; the next pass catches up
                log.exception("retention pass failed")
