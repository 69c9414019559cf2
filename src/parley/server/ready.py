"""Taking what an async iterator has ready without waiting: how an SSE writer sends the frames that are ready
together in one write (one socket write per batch of events instead of one per event).

An `__anext__` awaitable is stepped once by hand: when it completes at once its value was ready; when it
suspends (on a future, as any asyncio await does), the step is kept and awaited later from where it stopped,
in the same task, so nothing is lost, reordered or run twice. Cancellation reaches it as it reaches any await.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Generic, TypeVar

from parley.eager import Resume

T = TypeVar("T")


class ReadyItems(Generic[T]):
    """An async iterator's items, each either ready now (:meth:`poll`) or waited for (:meth:`wait`).

    Use from one task: `poll()`; if nothing is ready, do other work (write what was ready), then `wait()`.
    `abandon()` (in a `finally`) ends a step left suspended, as a cancellation would, so that the iterator
    can be closed.
    """

    __slots__ = ("items", "pending", "step")

    def __init__(self, items: AsyncIterator[T]) -> None:
        self.items = items
        self.step: Any = None  # the suspended `__anext__` awaitable, if any
        self.pending: Any = None  # what it suspended on

    def poll(self) -> tuple[bool, T | None]:
        """(True, item) when the next item is ready, else (False, None); raises StopAsyncIteration at the end."""
        if self.step is not None:
            return False, None
        step = self.items.__anext__().__await__()
        try:
            pending = step.send(None)
        except StopIteration as done:
            return True, done.value
        self.step, self.pending = step, pending
        return False, None

    def wait(self) -> Awaitable[T]:
        """The next item, waiting for it (after a `poll()` that found none ready, or instead of one): an awaitable
        (not a coroutine of its own: one frame less per streamed token)."""
        step, pending = self.step, self.pending
        self.step = self.pending = None
        if step is None:
            return self.items.__anext__()
        return Resume(step, pending)

    def abandon(self) -> None:
        """End a step left suspended by `poll()` as if its task were cancelled there (no-op otherwise)."""
        step, pending = self.step, self.pending
        self.step = self.pending = None
        if step is None:
            return
        if isinstance(pending, asyncio.Future):
            pending.cancel()
        # The step ends: with CancelledError, or whatever its cleanup raised (nobody awaits it to hear of it).
        with contextlib.suppress(BaseException):
            step.throw(asyncio.CancelledError())


__all__ = ["ReadyItems"]
