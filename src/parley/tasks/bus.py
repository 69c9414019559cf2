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
from typing import Any, Self

import msgspec

from parley.tasks.log import Entry

log = logging.getLogger("parley.bus")

CancelHandler = Callable[[str, dict[str, Any]], None]
DEFAULT_BUFFER = 1000  # entries a subscriber may fall behind before it must re-read the store
TIMER_SLACK = 0.001  # a deadline's timer that fires this early counts as on time (uvloop's timers count in ms)


class StreamsEnded(Exception):
    """The server is stopping: the stream ends here, and its client resumes (Last-Event-ID) on another replica."""


class Subscription(ABC):
    """Live entries of one task, in the order they were published."""

    @abstractmethod
    async def get(self, timeout: float | None = None) -> list[Entry] | None:
        """The next published entries (waits for some); None if some were dropped: re-read the store.

        With `timeout`, an empty list when nothing came within that many seconds (the entries keep
        coming afterwards: waiting with a deadline never loses any). Raises StreamsEnded once the
        bus ended its streams (the server is stopping).
        """

    @abstractmethod
    def close(self) -> None:
        """Stop receiving."""

    def __enter__(self) -> Self:
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

    @abstractmethod
    def end_streams(self) -> None:
        """The server is stopping: every open subscription of this process ends (its `get` raises
        :class:`StreamsEnded`), so streams close at once and their clients resume elsewhere."""

    async def ping(self) -> None:
        """Raise if the bus cannot carry events now (for /readyz); an in-process bus always can."""

    async def close(self) -> None:
        """Release resources."""


class LocalSubscription(Subscription):
    """A bounded buffer of one subscriber in this process, filled by its bus's :class:`Fanout`."""

    def __init__(self, fanout: Fanout, task_id: str, limit: int, after: int = 0) -> None:
        self._fanout = fanout
        self.task_id = task_id
        self.limit = limit
        self.after = after  # entries up to here the subscriber has: a notice of them that comes late is dropped
        self._items: list[Entry] = []
        self._lagged = False
        self._ended = False
        self._waiter: asyncio.Future[bool] | None = None  # its result: True when the deadline passed
        # One timer for the deadlines of get(timeout): re-armed only when it fires before the current deadline,
        # not made and cancelled for every wait (a follower waits once per token, with a deadline each time).
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        # The reader's event loop, looked up at its first wait (on Python 3.11 each lookup is a getpid() call).
        self._loop: asyncio.AbstractEventLoop | None = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(False)

    def _time_up(self) -> None:
        self._timer = None
        deadline, waiter = self._deadline, self._waiter
        if deadline is None or waiter is None or waiter.done():
            return  # nobody waits with a deadline now; a later get(timeout) arms the timer again
        loop = waiter.get_loop()
        if loop.time() >= deadline - TIMER_SLACK:
            waiter.set_result(True)
        else:
            self._timer = loop.call_at(deadline, self._time_up)

    def push(self, entries: Sequence[Entry]) -> None:
        """Buffer published entries (those after `after`); past `limit`, drop them all and tell the reader to re-read
        the store."""
        if entries and entries[0].seq <= self.after:
            entries = [e for e in entries if e.seq > self.after]
            if not entries:
                return
        if not self._lagged:
            if len(self._items) + len(entries) > self.limit:
                self._items.clear()
                self._lagged = True
            else:
                self._items.extend(entries)
        waiter = self._waiter  # self._wake(), inline: once per streamed token and follower
        if waiter is not None and not waiter.done():
            waiter.set_result(False)

    def drop(self) -> None:
        """The next get() returns None (whatever was buffered is discarded): something may have been lost."""
        self._items.clear()
        self._lagged = True
        self._wake()

    def end(self) -> None:
        """The next get() raises StreamsEnded."""
        self._ended = True
        self._wake()

    async def get(self, timeout: float | None = None) -> list[Entry] | None:
        if not self._items and not self._lagged and not self._ended:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            if timeout is None:
                self._deadline = None
            else:
                self._deadline = deadline = loop.time() + timeout
                if self._timer is None or self._timer.when() > deadline:
                    if self._timer is not None:
                        self._timer.cancel()
                    self._timer = loop.call_at(deadline, self._time_up)
            while not self._items and not self._lagged and not self._ended:
                self._waiter = waiter = loop.create_future()
                try:
                    if await waiter:
                        return []
                finally:
                    self._waiter = None
        if self._ended:
            raise StreamsEnded()
        if self._lagged:
            self._lagged = False
            return None
        items, self._items = self._items, []
        return items

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._fanout.remove(self)


class _CancelMessage(msgspec.Struct):
    task: str
    metadata: dict[str, Any] = {}


_cancel_dec = msgspec.json.Decoder(_CancelMessage)


class Fanout:
    """A process's subscriptions by task and its cancel handlers: every bus's local half.

    :class:`LocalBus` hands its own publishes to :meth:`deliver`; a shared bus hands what arrives
    from its server to :meth:`deliver` / :meth:`drop` and :meth:`cancel_received`.
    """

    def __init__(self, buffer: int = DEFAULT_BUFFER) -> None:
        self.buffer = buffer
        self.subscribers: dict[str, set[LocalSubscription]] = {}
        self._handlers: list[CancelHandler] = []
        self.ended = False

    def subscribe(self, task_id: str, after: int = 0) -> LocalSubscription:
        sub = LocalSubscription(self, task_id, self.buffer, after)
        if self.ended:
            sub.end()
        self.subscribers.setdefault(task_id, set()).add(sub)
        return sub

    def remove(self, sub: LocalSubscription) -> None:
        subs = self.subscribers.get(sub.task_id)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self.subscribers[sub.task_id]

    def __contains__(self, task_id: str) -> bool:
        return task_id in self.subscribers

    def deliver(self, task_id: str, entries: Sequence[Entry]) -> None:
        """Hand entries to every subscription of the task."""
        if entries:
            for sub in tuple(self.subscribers.get(task_id, ())):
                sub.push(entries)

    def drop(self, task_id: str) -> None:
        """Every subscription of the task gets None: something was lost, re-read the store."""
        for sub in tuple(self.subscribers.get(task_id, ())):
            sub.drop()

    def drop_all(self) -> None:
        """Every subscription gets None (the bus was disconnected: it may have missed anything)."""
        for task_id in tuple(self.subscribers):
            self.drop(task_id)

    def end_all(self) -> None:
        """Every subscription, and every later one, ends (the server is stopping)."""
        self.ended = True
        for subs in tuple(self.subscribers.values()):
            for sub in tuple(subs):
                sub.end()

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self.subscribers.values())

    def on_cancel(self, handler: CancelHandler) -> Callable[[], None]:
        self._handlers.append(handler)

        def unregister() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)

        return unregister

    def cancel(self, task_id: str, metadata: dict[str, Any]) -> None:
        """Call every cancel handler (one that fails does not stop the others)."""
        for handler in tuple(self._handlers):
            try:
                handler(task_id, metadata)
            except Exception:  # one broken handler must not stop the others
                log.exception("cancel handler %r failed", handler)

    @staticmethod
    def cancel_message(task_id: str, metadata: dict[str, Any]) -> bytes:
        """A cancel request on the wire: {"task": id, "metadata": {...}}."""
        return msgspec.json.encode({"task": task_id, "metadata": metadata})

    def cancel_received(self, data: bytes | str) -> None:
        """A cancel request arrived from a shared bus's server."""
        try:
            message = _cancel_dec.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            log.warning("ignoring a malformed cancel request on the bus: %.200r", data)
            return
        self.cancel(message.task, message.metadata)


class FanoutBus(EventBus):
    """A bus whose subscriptions and cancel handlers in this process live in a :class:`Fanout`."""

    def __init__(self, buffer: int = DEFAULT_BUFFER) -> None:
        self._fanout = Fanout(buffer)

    @property
    def buffer(self) -> int:
        """Entries a subscriber may fall behind before it must re-read the store."""
        return self._fanout.buffer

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are open (for tests and metrics)."""
        return self._fanout.subscriber_count

    def on_cancel(self, handler: CancelHandler) -> Callable[[], None]:
        return self._fanout.on_cancel(handler)

    def end_streams(self) -> None:
        self._fanout.end_all()


class LocalBus(FanoutBus):
    """The in-process bus: followers and the engine share one event loop."""

    def subscribe(self, task_id: str, after: int = 0) -> Subscription:
        return self._fanout.subscribe(task_id, after)

    async def publish(self, task_id: str, entries: Sequence[Entry]) -> None:
        subs = self._fanout.subscribers.get(task_id)  # Fanout.deliver, inline (once per streamed token)
        if subs and entries:
            for sub in tuple(subs):
                sub.push(entries)

    async def request_cancel(self, task_id: str, metadata: dict[str, Any]) -> None:
        self._fanout.cancel(task_id, metadata)
