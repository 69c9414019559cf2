"""The event bus over Redis, shared by several Parley processes (needs parley-a2a[redis]: redis-py).

Log entries go to one Redis Stream per task, `{namespace}:events:{task_id}`: one XADD per
published batch, with the explicit stream id `{last seq}-0`, so a stream id is the sequence
number of the batch's last entry. The stream keeps about `stream_length` batches (XADD MAXLEN ~)
and expires a day after its last batch. Publishes of two processes may reach Redis out of
order: a batch whose id is not above the stream's top is dropped (a later batch is already
there; followers fill the gap from the store).

Each bus reads with ONE connection: a blocking XREAD over the streams of every task it has
subscribers for, each from the last sequence number it handed out (a new subscription from its
`after`), plus the bus's own wake stream, to which :meth:`RedisBus.subscribe` writes so that the
XREAD is re-issued at once with the new key. Because reading starts at `after`, a batch
published between :meth:`RedisBus.subscribe` and the reader's next XREAD is not missed. If the
reader's connection fails, it reconnects with backoff and every subscription gets None (re-read
the store) once it is back.

Cancel requests go over Pub/Sub, channel `{namespace}:cancel`; every bus (the sender's too)
hears them and calls its handlers.

:class:`parley.tasks.bus.Fanout` is the process-local half (subscriptions, cancel handlers).

:meth:`RedisBus.start` must be awaited before anything else: :meth:`~RedisBus.subscribe`,
:meth:`~RedisBus.publish` and :meth:`~RedisBus.request_cancel` raise RuntimeError until then
(and after :meth:`~RedisBus.close`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Sequence
from typing import Any

from parley.postgres import redact
from parley.tasks.bus import DEFAULT_BUFFER, Fanout, FanoutBus, Subscription
from parley.tasks.entry_codec import decode_entries, encode_entries
from parley.tasks.log import Entry
from parley.tasks.store import StoreError

log = logging.getLogger("parley.bus")

EXTRA = "parley-a2a[redis]"
STREAM_TTL = 86_400  # seconds a task's stream outlives its last batch
BLOCK_MS = 5_000  # longest XREAD BLOCK (shorter if the URL sets a smaller socket_timeout)
READ_COUNT = 500  # batches per stream per XREAD
_WAKE_TTL = 3_600
_BACKOFF = (0.05, 5.0)  # first and longest wait between reconnection attempts
_LISTEN_POLL = 1.0


class RedisBusError(StoreError):
    """Redis cannot be used as the bus (the extra is missing, the server is unreachable): one readable line."""


def _redis() -> Any:
    try:
        import redis.asyncio as redis
    except ImportError:
        raise RedisBusError(f"a Redis bus needs the {EXTRA} extra: pip install '{EXTRA}'") from None
    return redis


# --- Redis ----------------------------------------------------------------------------------------------------------


class RedisBus(FanoutBus):
    """Task events over Redis Streams and cancel requests over Redis Pub/Sub.

    Args:
        url: redis://[user:password@]host:port/db (rediss:// for TLS; query parameters as redis-py takes them).
        namespace: the prefix of every key and channel (several deployments may share one Redis).
        stream_length: about how many batches each task's stream keeps (MAXLEN ~).
        buffer: entries a subscriber may fall behind before it must re-read the store.
        ttl: seconds a task's stream is kept after its last batch.
    """

    def __init__(self, url: str, *, namespace: str = "parley", stream_length: int = 1000,
                 buffer: int = DEFAULT_BUFFER, ttl: int = STREAM_TTL) -> None:
        self._redis = _redis()
        from redis.asyncio.connection import parse_url

        if not namespace:
            raise ValueError("the Redis key namespace must not be empty")
        if stream_length < 1:
            raise ValueError("stream_length must be at least 1")
        try:
            parse_url(url)
        except ValueError as exc:
            raise ValueError(f"not a Redis URL: {redact(url)} ({exc})") from None
        self.url, self.namespace = url, namespace
        self.stream_length, self.ttl = stream_length, ttl
        self.id = secrets.token_hex(6)
        self.reader_name = f"parley-bus-{self.id}-reader"  # CLIENT SETNAME of the reading connection
        self._events_prefix = f"{namespace}:events:"
        self._cancel_channel = f"{namespace}:cancel"
        self._wake_key = f"{namespace}:wake:{self.id}"
        super().__init__(buffer)
        self._cursors: dict[str, int] = {}  # task -> the last seq handed to its subscriptions (or their `after`)
        self._client: Any = None  # publishing, waking, Pub/Sub (a pool)
        self._reader: Any = None  # the XREAD connection
        self._pubsub: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wake_needed: asyncio.Event | None = None
        self._block_ms = BLOCK_MS
        self._reader_down: str | None = None  # why the reading connection is down (None: it reads)
        self._cancels_down = False  # the cancel channel failed and has not answered since
        self._closed = False

    def _key(self, task_id: str) -> str:
        return self._events_prefix + task_id

    # --- lifecycle ------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, subscribe to the cancel channel and start the reader (RedisBusError if Redis is unreachable)."""
        if self._client is not None:
            return
        if self._closed:
            raise RuntimeError("the Redis bus was closed")
        redis = self._redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import RedisError

        self._client = redis.from_url(self.url)
        # The reader handles its own failures: a silent retry would hide a disconnection from the subscribers.
        self._reader = redis.from_url(self.url, single_connection_client=True, client_name=self.reader_name,
                                      socket_timeout=BLOCK_MS / 1000 + 10, retry=Retry(NoBackoff(), 0))
        timeout = self._reader.connection_pool.connection_kwargs.get("socket_timeout")
        if timeout is not None:  # block for at most half the socket timeout (the URL may set a shorter one)
            self._block_ms = max(1, min(BLOCK_MS, int(timeout * 500)))
        try:
            await self._client.ping()
            await self._reader.ping()
            self._pubsub = self._client.pubsub()
            await self._pubsub.subscribe(self._cancel_channel)
            async with asyncio.timeout(10):  # SUBSCRIBE is confirmed: no request sent from now on is missed
                while (await self._pubsub.get_message(timeout=1.0) or {}).get("type") != "subscribe":
                    pass
        except (RedisError, OSError, TimeoutError) as exc:
            await self._disconnect()
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise RedisBusError(f"cannot use Redis at {redact(self.url)} as the bus: {reason}") from None
        self._wake_needed = asyncio.Event()
        self._tasks = [asyncio.create_task(self._read_loop(), name=f"parley-bus-{self.id}-read"),
                       asyncio.create_task(self._wake_loop(), name=f"parley-bus-{self.id}-wake"),
                       asyncio.create_task(self._listen_loop(), name=f"parley-bus-{self.id}-cancel")]

    async def close(self) -> None:
        """Stop the reader and the listener, and close the connections."""
        from redis.exceptions import RedisError

        self._closed = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            try:
                async with asyncio.timeout(1):
                    await self._client.delete(self._wake_key)
            except (RedisError, OSError, TimeoutError) as exc:  # closing anyway; the key expires by itself
                log.debug("Redis bus: could not delete %s: %s", self._wake_key, exc)
        await self._disconnect()

    async def _disconnect(self) -> None:
        from redis.exceptions import RedisError

        pubsub, reader, client = self._pubsub, self._reader, self._client
        self._pubsub = self._reader = self._client = None
        for conn in (pubsub, reader, client):
            if conn is not None:
                try:
                    await conn.aclose()
                except (RedisError, OSError) as exc:  # a broken connection is closed all the same
                    log.debug("Redis bus: closing a connection failed: %s", exc)

    def _require(self) -> Any:
        if self._client is None:
            raise RuntimeError("RedisBus.start() must be awaited before the bus is used"
                               if not self._closed else "the Redis bus was closed")
        return self._client

    # --- the bus --------------------------------------------------------------------------------------------------

    def subscribe(self, task_id: str, after: int = 0) -> Subscription:
        self._require()
        sub = self._fanout.subscribe(task_id, after)
        if task_id not in self._cursors:
            # Read from `after`. A task already read keeps its cursor: what it skips was handed out (or
            # known to be committed) before this call, so this subscriber finds it in the store.
            self._cursors[task_id] = after
            assert self._wake_needed is not None
            self._wake_needed.set()
        return sub

    async def publish(self, task_id: str, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        from redis.exceptions import ResponseError

        key = self._key(task_id)
        pipe = self._require().pipeline(transaction=False)
        pipe.xadd(key, {"e": encode_entries(list(entries))}, id=f"{entries[-1].seq}-0",
                  maxlen=self.stream_length, approximate=True)
        pipe.expire(key, self.ttl)
        added, expired = await pipe.execute(raise_on_error=False)
        if isinstance(added, ResponseError) and "equal or smaller" in str(added):
            # Another process published a later batch first: followers fill the gap from the store.
            log.debug("Redis bus: batch %s..%s of task %s is behind its stream; dropped",
                      entries[0].seq, entries[-1].seq, task_id)
        elif isinstance(added, Exception):
            raise added
        if isinstance(expired, Exception):
            raise expired

    async def request_cancel(self, task_id: str, metadata: dict[str, Any]) -> None:
        await self._require().publish(self._cancel_channel, Fanout.cancel_message(task_id, metadata))

    async def ping(self) -> None:
        """For /readyz: PING through the publishing connections, and the reader's state (RedisBusError while
        it is down: live events of other replicas do not arrive)."""
        await self._require().ping()
        if self._reader_down is not None:
            raise RedisBusError(f"the reading connection is down ({self._reader_down}); reconnecting")

    # --- background tasks -----------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        from redis.exceptions import RedisError

        wake_id: bytes | str = b"0-0"
        delay = _BACKOFF[0]
        broken = False
        while True:
            if broken:
                try:
                    await self._reader.ping()
                except (RedisError, OSError) as exc:
                    log.debug("Redis bus: reconnecting failed: %s", exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _BACKOFF[1])
                    continue
                log.warning("Redis bus: reconnected; subscribers re-read the store")
                broken = False
                self._reader_down = None
                self._fanout.drop_all()
            for task_id in [t for t in self._cursors if t not in self._fanout]:
                del self._cursors[task_id]  # its last subscription closed
            streams: dict[str, bytes | str] = {self._wake_key: wake_id}
            for task_id, seq in self._cursors.items():
                streams[self._key(task_id)] = f"{seq}-0"
            try:
                reply = await self._reader.xread(streams, count=READ_COUNT, block=self._block_ms)
            except (RedisError, OSError) as exc:
                if not broken:
                    log.warning("Redis bus: reading failed (%s); reconnecting", exc or type(exc).__name__)
                broken = True
                self._reader_down = str(exc) or type(exc).__name__
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF[1])
                continue
            delay = _BACKOFF[0]
            for key, messages in (reply.items() if isinstance(reply, dict) else reply or ()):
                name = key.decode() if isinstance(key, bytes) else key
                if not messages:
                    continue
                if name == self._wake_key:
                    wake_id = messages[-1][0]
                elif name.startswith(self._events_prefix):
                    self._dispatch(name[len(self._events_prefix):], messages)

    def _dispatch(self, task_id: str, messages: list[tuple[Any, dict[Any, Any]]]) -> None:
        cursor = self._cursors.get(task_id)
        if cursor is None or task_id not in self._fanout:
            return
        for message_id, fields in messages:
            mid = message_id.decode() if isinstance(message_id, bytes) else message_id
            seq = int(mid.split("-", 1)[0])
            if seq <= cursor:
                continue
            try:
                entries = decode_entries(fields.get(b"e") or fields.get("e") or b"")
            except Exception:  # written by something else: tell the subscribers to re-read the store
                log.exception("Redis bus: an unreadable batch %s in the stream of task %s", mid, task_id)
                self._fanout.drop(task_id)
            else:
                self._fanout.deliver(task_id, [e for e in entries if e.seq > cursor])
            cursor = seq
        self._cursors[task_id] = cursor

    async def _wake_loop(self) -> None:
        """Write to the wake stream whenever a task was added, so that the blocked XREAD returns."""
        from redis.exceptions import RedisError

        assert self._wake_needed is not None
        while True:
            await self._wake_needed.wait()
            self._wake_needed.clear()
            try:
                pipe = self._client.pipeline(transaction=False)
                pipe.xadd(self._wake_key, {"w": b"1"}, maxlen=10, approximate=False)
                pipe.expire(self._wake_key, _WAKE_TTL)
                await pipe.execute()
            except (RedisError, OSError) as exc:  # the reader still picks the task up within its block time
                log.debug("Redis bus: waking the reader failed: %s", exc)

    async def _listen_loop(self) -> None:
        from redis.exceptions import RedisError

        delay = _BACKOFF[0]
        while True:
            try:
                message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=_LISTEN_POLL)
            except (RedisError, OSError) as exc:  # the next call reconnects and subscribes again
                if not self._cancels_down:  # once per outage, not once per attempt
                    log.warning("Redis bus: the cancel channel failed (%s); reconnecting", exc or type(exc).__name__)
                else:
                    log.debug("Redis bus: the cancel channel still fails: %s", exc)
                self._cancels_down = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF[1])
                continue
            if self._cancels_down:
                log.warning("Redis bus: the cancel channel is back")
                self._cancels_down = False
            delay = _BACKOFF[0]
            if message is not None and message.get("type") == "message":
                self._fanout.cancel_received(message["data"])


__all__ = ["RedisBus", "RedisBusError"]
