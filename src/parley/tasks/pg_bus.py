"""The event bus over PostgreSQL LISTEN/NOTIFY, for replicas that share PostgreSQL and no Redis
(needs parley-a2a[postgres]: asyncpg).

Every bus LISTENs on two channels with one dedicated connection (not from the pool):
`{namespace}_events` and `{namespace}_cancel`. A commit's entries are announced as
`pg_notify('{namespace}_events', '{"t": task_id, "e": [entries]}')`: by the PostgreSQL task store inside
the commit's own statement when both are PostgreSQL's (:meth:`parley.backends.Backends.link`: one
transaction, not two, and the notification goes out exactly when the entries are committed), else by
:meth:`PostgresBus.publish` through the shared pool;
a batch too big for a notification (PostgreSQL allows 8000 bytes) is announced as
`{"t": task_id, "s": last_seq}` and the subscribers of the task get None (re-read the store).
Every process receives every notification and hands it to its own subscriptions of that task;
notifications of tasks nobody here follows are dropped after reading the task id.

`after` of :meth:`PostgresBus.subscribe` is not needed: the bus LISTENs from :meth:`start` on,
and an entry committed after subscribe() is published (NOTIFY is committed) after it, so its
notification reaches the listener after the subscription is registered. What the listener
dispatched before was published, hence committed, before subscribe(): the follower reads it
from the store. While the listening connection is down notifications are lost, so after it
reconnects (with backoff) every subscription gets None once.

:meth:`PostgresBus.start` must be awaited first: subscribe, publish and request_cancel raise
RuntimeError before it (and after :meth:`PostgresBus.close`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from parley.postgres import Postgres, PostgresError, _asyncpg, redact
from parley.tasks.bus import DEFAULT_BUFFER, Fanout, FanoutBus, Subscription
from parley.tasks.entry_codec import decode_entries, encode_entries
from parley.tasks.log import Entry

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger("parley.bus")

MAX_PAYLOAD = 7_900  # bytes of a notification carrying entries (PostgreSQL's limit is 8000)
HEALTH_INTERVAL = 30.0  # seconds between checks that the listening connection is alive
_HEALTH_TIMEOUT = 10.0
_BACKOFF = (0.05, 5.0)
_NAMESPACE = re.compile(r"[a-z0-9_]{1,50}")


class _Notice(msgspec.Struct):
    t: str
    e: msgspec.Raw = msgspec.Raw()
    s: int | None = None


_notice_dec = msgspec.json.Decoder(_Notice)
_enc = msgspec.json.Encoder()


class PostgresBus(FanoutBus):
    """Task events and cancel requests over PostgreSQL LISTEN/NOTIFY.

    Args:
        postgres: the server's shared pool holder (publishing goes through its pool; the listening
            connection is opened separately from its URL).
        namespace: the prefix of the channels, [a-z0-9_], up to 50 characters.
        buffer: entries a subscriber may fall behind before it must re-read the store.
    """

    def __init__(self, postgres: Postgres, *, namespace: str = "parley", buffer: int = DEFAULT_BUFFER) -> None:
        if not _NAMESPACE.fullmatch(namespace):
            raise ValueError(f"a PostgreSQL bus namespace is 1 to 50 of a-z, 0-9 and _, not {namespace!r}")
        self.postgres = postgres
        self.namespace = namespace
        self.events_channel = f"{namespace}_events"
        self.cancel_channel = f"{namespace}_cancel"
        self.application_name = f"parley-bus {namespace}"  # of the listening connection, in pg_stat_activity
        super().__init__(buffer)
        self._pool: asyncpg.Pool | None = None
        self._conn: asyncpg.Connection | None = None
        self._lost: asyncio.Event | None = None
        self._watch: asyncio.Task[None] | None = None
        self._conn_lock = asyncio.Lock()  # one query at a time on the listening connection (health checks)
        self._closed = False
        self.published_in_commit = False  # Backends.link: the PostgreSQL store sends each commit's notification

    # --- lifecycle ------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the pool (shared) and the listening connection (PostgresError if the server cannot be reached)."""
        if self._pool is not None:
            return
        if self._closed:
            raise RuntimeError("the PostgreSQL bus was closed")
        asyncpg = _asyncpg()
        pool = await self.postgres.acquire_user()
        self._lost = asyncio.Event()
        try:
            self._conn = await self._listen()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            await self.postgres.release_user()
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise PostgresError(f"cannot LISTEN on PostgreSQL at {redact(self.postgres.url)}: {reason}") from None
        self._pool = pool
        self._watch = asyncio.create_task(self._watch_loop(), name=f"parley-bus-{self.namespace}-listen")

    async def _listen(self) -> asyncpg.Connection:
        asyncpg = _asyncpg()
        conn = await asyncpg.connect(self.postgres.url, server_settings={"application_name": self.application_name})
        try:
            conn.add_termination_listener(self._terminated)
            await conn.add_listener(self.events_channel, self._notified)  # asyncpg quotes the channel name
            await conn.add_listener(self.cancel_channel, self._notified)
        except BaseException:
            conn.terminate()
            raise
        return conn

    async def close(self) -> None:
        """Stop listening and give the pool back."""
        self._closed = True
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            asyncpg = _asyncpg()
            try:
                await conn.close(timeout=2)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:  # closed all the same
                log.debug("PostgreSQL bus: closing the listening connection failed: %s", exc)
                conn.terminate()
        if self._pool is not None:
            self._pool = None
            await self.postgres.release_user()

    def _require(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("PostgresBus.start() must be awaited before the bus is used"
                               if not self._closed else "the PostgreSQL bus was closed")
        return self._pool

    # --- the bus --------------------------------------------------------------------------------------------------

    def subscribe(self, task_id: str, after: int = 0) -> Subscription:
        self._require()
        # No history to read from `after` (see the module's docstring); a notice of entries up to it that arrives
        # after this call (published before it) is dropped by the subscription.
        return self._fanout.subscribe(task_id, after)

    def notice(self, task_id: str, entries: Sequence[Entry]) -> tuple[str, str]:
        """(channel, payload) of the notification of `entries`: the entries themselves, or, too big for a
        notification, the last sequence number (the subscribers read the store)."""
        payload = b'{"t":' + _enc.encode(task_id) + b',"e":' + encode_entries(list(entries)) + b"}"
        if len(payload) >= MAX_PAYLOAD:
            payload = _enc.encode({"t": task_id, "s": entries[-1].seq})
        return self.events_channel, payload.decode()

    async def publish(self, task_id: str, entries: Sequence[Entry]) -> None:
        if not entries or self.published_in_commit:  # the store sent it in the commit's transaction
            return
        pool = self._require()
        await pool.execute("SELECT pg_notify($1, $2)", *self.notice(task_id, entries))

    async def request_cancel(self, task_id: str, metadata: dict[str, Any]) -> None:
        pool = self._require()
        await pool.execute("SELECT pg_notify($1, $2)", self.cancel_channel,
                           Fanout.cancel_message(task_id, metadata).decode())

    async def ping(self) -> None:
        """For /readyz: a query on the listening connection (the one that hears every replica's events), and
        one through the pool that publishes; PostgresError while the listener is lost and reconnecting."""
        pool = self._require()
        conn = self._conn
        if conn is None or conn.is_closed():
            raise PostgresError("the listening connection is lost; reconnecting")
        async with self._conn_lock:
            await conn.execute("SELECT 1")
        await pool.execute("SELECT 1")

    # --- the listening connection ---------------------------------------------------------------------------------

    def _notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        if channel == self.cancel_channel:
            self._fanout.cancel_received(payload)
            return
        try:
            notice = _notice_dec.decode(payload)
        except msgspec.DecodeError:
            log.warning("PostgreSQL bus: ignoring a malformed notification: %.200r", payload)
            return
        if notice.t not in self._fanout:
            return
        if not notice.e:  # too big to carry its entries
            self._fanout.drop(notice.t)
            return
        try:
            entries = decode_entries(notice.e)
        except Exception:
            log.exception("PostgreSQL bus: an unreadable batch of task %s", notice.t)
            self._fanout.drop(notice.t)
        else:
            self._fanout.deliver(notice.t, entries)

    def _terminated(self, conn: object) -> None:
        if conn is self._conn and not self._closed and self._lost is not None:
            self._lost.set()

    async def _watch_loop(self) -> None:
        """Reconnect when the listening connection is lost (terminated, or no longer answering)."""
        asyncpg = _asyncpg()
        assert self._lost is not None
        while True:
            try:
                async with asyncio.timeout(HEALTH_INTERVAL):
                    await self._lost.wait()
            except TimeoutError:
                try:
                    async with asyncio.timeout(_HEALTH_TIMEOUT), self._conn_lock:
                        assert self._conn is not None
                        await self._conn.execute("SELECT 1")
                    continue
                except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.warning("PostgreSQL bus: the listening connection does not answer (%s)", exc)
            self._lost.clear()
            old, self._conn = self._conn, None
            if old is not None and not old.is_closed():
                old.terminate()
            log.warning("PostgreSQL bus: lost the listening connection; reconnecting")
            delay = _BACKOFF[0]
            while self._conn is None:
                try:
                    self._conn = await self._listen()
                except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.debug("PostgreSQL bus: reconnecting failed: %s", exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _BACKOFF[1])
            log.warning("PostgreSQL bus: listening again; subscribers re-read the store")
            self._fanout.drop_all()


__all__ = ["MAX_PAYLOAD", "PostgresBus"]
