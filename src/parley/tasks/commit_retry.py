"""A commit retried while the store cannot be reached (a dropped database connection, a failover), so that a
fault that is not the agent's never ends its task.

A commit whose connection dropped has an unknown outcome: PostgreSQL may have committed it before the
connection went. It is re-checked before it is tried again: if the log holds its entries after
`expected_seq`, it was written. Otherwise it is tried again as it was; that is safe because a commit is a
compare-and-set on the log's seq plus the message's idempotency key (a commit written meanwhile by another
process is refused with SequenceConflict, never appended twice). Past `budget` seconds the commit gives up
with :class:`StoreUnreachable`: the engine then stops the run without writing (its lease expires and recovery
resumes it from its checkpoint).
"""

from __future__ import annotations

import asyncio
import time

from parley.log_throttle import Throttled
from parley.tasks.entry_codec import encode_event
from parley.tasks.store import Commit, StoreError, TaskStore, unavailable

BACKOFF = (0.05, 2.0)  # seconds between attempts: the first, and the most (doubling in between)


class StoreUnreachable(StoreError):
    """A commit could not be written within the retry budget: the store stayed unreachable."""


async def written(store: TaskStore, commit: Commit) -> bool:
    """Whether the log holds `commit`'s entries right after its expected seq (an earlier attempt wrote it)."""
    if not commit.entries:
        return False  # nothing to recognise it by; trying an entry-less commit again changes nothing
    found = await store.events_after(commit.task_id, commit.expected_seq, len(commit.entries))
    return len(found) == len(commit.entries) and all(
        a.seq == b.seq and encode_event(a) == encode_event(b) for a, b in zip(found, commit.entries, strict=True))


async def commit_with_retry(store: TaskStore, commit: Commit, *, budget: float, warnings: Throttled) -> None:
    """`store.commit(commit)`, re-checked and tried again while the store cannot be reached, for up to `budget`
    seconds; then StoreUnreachable. Other errors (a refusal, a bug) are raised at once."""
    started = time.monotonic()
    try:
        await store.commit(commit)
    except Exception as exc:
        if not unavailable(exc):
            raise
        await retry_commit(store, commit, exc, started=started, budget=budget, warnings=warnings)


async def retry_commit(store: TaskStore, commit: Commit, failure: Exception, *, started: float, budget: float,
                       warnings: Throttled) -> None:
    """What :func:`commit_with_retry` does once the first attempt, begun at `started` (time.monotonic()), failed
    with `failure`, an error for which `unavailable` holds (the engine makes that attempt itself: a streamed
    token's commit then costs no coroutine of this module's)."""
    deadline = started + budget
    delay = BACKOFF[0]
    exc: Exception = failure
    while True:
        if time.monotonic() + delay > deadline:
            raise StoreUnreachable(f"task {commit.task_id}: the store could not be reached for {budget:g} s "
                                   f"({type(exc).__name__}: {exc})") from exc
        warnings.warning("writing task %s failed (%s: %s); trying again", commit.task_id, type(exc).__name__, exc)
        await asyncio.sleep(delay)  # back-off before the next attempt
        delay = min(delay * 2, BACKOFF[1])
        try:  # the last attempt failed without saying whether it was written
            if not await written(store, commit):
                await store.commit(commit)
            break
        except Exception as again:
            if not unavailable(again):
                raise
            exc = again
    warnings.recovered("writing tasks works again")


__all__ = ["BACKOFF", "StoreUnreachable", "commit_with_retry", "retry_commit", "written"]
