"""The event bus: committed log entries to live followers, and cancel requests to whoever runs a task.

The engine publishes a batch of entries only after the store committed it, so a
follower that subscribes first and then reads the store's backfill misses nothing
(it drops what it sees twice by sequence number). A subscriber that falls too far
behind is told so (`None` from :meth:`Subscription.get`) and re-reads the store.

:class:`LocalBus` serves one process. A bus shared by several processes (Redis
Streams, PostgreSQL LISTEN/NOTIFY) implements the same interface.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from parley.tasks.log import Entry

log = logging.getLogger("parley.bus")

CancelHandler = Callable[[str, dict[str, Any]], None]
DEFAULT_BUFFER = 1000  # entries a subscriber may fall behind before it must re-read the store


class Subscription(ABC):
    """Live entries of one task, in the order they were published."""

    @abstractmethod
    async def get(self, timeout: float | None = None) -> list[Entry] | None:
        """The next published entries (waits for some); None if some were dropped: re-read the store.

        With `timeout`, an empty list when nothing came within that many seconds (the entries keep
        coming afterwards: waiting with a deadline never loses any).
        """

    @abstractmethod
    def close(self) -> None:
        """Stop receiving."""

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventBus(ABC):
    """Carries committed entries to followers and cancel requests to the process running a task."""

    @abstractmethod
    def subscribe(self, task_id: str, after: int = 0) -> Subscription:
        """Start receiving the entries published for `task_id` from now on.

        `after`: the caller has, or reads from the store, every entry up to this sequence
        number. A bus that keeps a history (Redis Streams) starts reading there, so that
        nothing published between this call and its first read is missed; it may deliver
        entries the caller already has (followers drop them by sequence number).
        """

    async def start(self) -> None:
        """Connect (a shared bus opens its connections and listeners here); the runtime calls it first."""

    @abstractmethod
    async def publish(self, task_id: str, entries: Sequence[Entry]) -> None:
        """Hand committed entries to every subscriber of the task."""

    @abstractmethod
    async def request_cancel(self, task_id: str, metadata: dict[str, Any]) -> None:
        """Ask whichever process runs `task_id` to cancel it (its engine records `canceled`)."""

    @abstractmethod
    def on_cancel(self, handler: CancelHandler) -> Callable[[], None]:
        """Call `handler(task_id, metadata)` for every cancel request; returns a function that unregisters it."""

    async def ping(self) -> None:
        """Raise if the bus cannot carry events now (for /readyz); an in-process bus always can."""

    async def close(self) -> None:
        """Release resources."""


class LocalSubscription(Subscription):
    """A bounded buffer of one subscriber, filled by :class:`LocalBus`."""

    def __init__(self, bus: LocalBus, task_id: str, limit: int) -> None:
        self._bus = bus
        self.task_id = task_id
        self.limit = limit
        self._items: list[Entry] = []
        self._lagged = False
        self._waiter: asyncio.Future[None] | None = None

    def _push(self, entries: Sequence[Entry]) -> None:
        if not self._lagged:
            if len(self._items) + len(entries) > self.limit:
                self._items.clear()
                self._lagged = True
            else:
                self._items.extend(entries)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, timeout: float | None = None) -> list[Entry] | None:
        while not self._items and not self._lagged:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:
                    await self._waiter
                else:
                    try:
                        async with asyncio.timeout(timeout):
                            await self._waiter
                    except TimeoutError:
                        return []
            finally:
                self._waiter = None
        if self._lagged:
            self._lagged = False
            return None
        items, self._items = self._items, []
        return items

    def close(self) -> None:
        self._bus._remove(self)


class LocalBus(EventBus):
    """The in-process bus: followers and the engine share one event loop."""

    def __init__(self, buffer: int = DEFAULT_BUFFER) -> None:
        self.buffer = buffer
        self._subscribers: dict[str, set[LocalSubscription]] = {}
        self._cancel_handlers: list[CancelHandler] = []

    def subscribe(self, task_id: str, after: int = 0) -> Subscription:
        sub = LocalSubscription(self, task_id, self.buffer)
        self._subscribers.setdefault(task_id, set()).add(sub)
        return sub

    def _remove(self, sub: LocalSubscription) -> None:
        subs = self._subscribers.get(sub.task_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subscribers[sub.task_id]

    async def publish(self, task_id: str, entries: Sequence[Entry]) -> None:
        for sub in tuple(self._subscribers.get(task_id, ())):
            sub._push(entries)

    async def request_cancel(self, task_id: str, metadata: dict[str, Any]) -> None:
        for handler in tuple(self._cancel_handlers):
            try:
                handler(task_id, metadata)
            except Exception:  # one broken handler must not stop the others
                log.exception("cancel handler %r failed", handler)

    def on_cancel(self, handler: CancelHandler) -> Callable[[], None]:
        self._cancel_handlers.append(handler)

        def unregister() -> None:
            if handler in self._cancel_handlers:
                self._cancel_handlers.remove(handler)

        return unregister

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are open (for tests and metrics)."""
        return sum(len(s) for s in self._subscribers.values())
