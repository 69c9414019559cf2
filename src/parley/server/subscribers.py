"""How many streams may follow one task at once (`limits.max_subscribers_per_task`).

A stream takes its place before it starts (so a refusal is an ordinary error answer, not a broken
stream) and gives it back when it ends, however it ends: finished, closed by the client, or
dropped without ever being read (then when it is garbage-collected).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from parley.protocol.errors import RateLimitedError

T = TypeVar("T")


class SubscriberLimit:
    """Counts the streams following each task in this process, and refuses one over `limit`."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.counts: Counter[str] = Counter()

    def follow(self, task_id: str, events: AsyncIterator[T]) -> AsyncIterator[T]:
        """`events`, counted as one more stream of `task_id` (RateLimitedError when the task has `limit`)."""
        if self.limit is None:
            return events
        if self.counts[task_id] >= self.limit:
            raise RateLimitedError(
                f"Task {task_id} is followed by {self.counts[task_id]} streams, the limit "
                f"(limits.max_subscribers_per_task); retry when one ends", headers={"Retry-After": "1"})
        self.counts[task_id] += 1
        return _Counted(events, lambda: self._release(task_id))

    def _release(self, task_id: str) -> None:
        self.counts[task_id] -= 1
        if self.counts[task_id] <= 0:
            del self.counts[task_id]


class _Counted(AsyncIterator[T]):
    """An async iterator that calls `release` once, when it ends, is closed, or is collected unread."""

    def __init__(self, events: AsyncIterator[T], release: Callable[[], None]) -> None:
        self.events = events
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> _Counted[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.events.__anext__()
        except BaseException:
            self.release()
            raise

    async def aclose(self) -> None:
        self.release()
        closer = getattr(self.events, "aclose", None)
        if closer is not None:
            await closer()

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def __del__(self) -> None:
        self.release()


__all__ = ["SubscriberLimit"]
