"""The EventBus contract (parley.tasks.bus), run against every bus: local, Redis and PostgreSQL.

A shared bus is tested as two instances on one namespace, standing for two processes: one
publishes, the other subscribes (the local bus is one instance in both roles). Real Redis and
PostgreSQL only (tests/services.py); waits have deadlines, never sleeps.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from parley.postgres import Postgres
from parley.protocol import models as m
from parley.protocol.states import is_terminal
from parley.tasks.bus import DEFAULT_BUFFER, EventBus, LocalBus, Subscription
from parley.tasks.follow import follow_log
from parley.tasks.log import Entry, fold
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.pg_bus import MAX_PAYLOAD, PostgresBus
from parley.tasks.store import TaskRecord
from services import unique
from support import free_port, needs

S = m.TaskState
DEADLINE = 20.0  # seconds any single wait may take before the test fails

KINDS = [
    "local",
    pytest.param("redis", marks=needs("redis", "redis")),
    pytest.param("postgres", marks=needs("asyncpg", "postgres")),
]
SHARED = KINDS[1:]
REDIS, POSTGRES = KINDS[1:2], KINDS[2:3]

MakeBuses = Callable[..., Awaitable[tuple[EventBus, EventBus]]]


# --- events -------------------------------------------------------------------------------------------------------


def agent_msg(task_id: str, text: str) -> m.Message:
    return m.Message(message_id=f"m-{text[:20]}-{time.monotonic_ns()}", role=m.Role.AGENT, parts=[m.Part(text=text)],
                     task_id=task_id, context_id="c1")


def status(seq: int, task_id: str = "t1", *, state: m.TaskState = S.WORKING, text: str | None = None) -> Entry:
    message = agent_msg(task_id, text if text is not None else f"step {seq}")
    return Entry(seq, m.TaskStatusUpdateEvent(task_id=task_id, context_id="c1",
                                              status=m.TaskStatus(state=state, message=message)))


def artifact(seq: int, task_id: str, text: str) -> Entry:
    return Entry(seq, m.TaskArtifactUpdateEvent(task_id=task_id, context_id="c1", artifact=m.Artifact(
        artifact_id=f"a{seq}", parts=[m.Part(text=text)])))


def new_task(task_id: str) -> m.Task:
    return m.Task(id=task_id, context_id="c1", status=m.TaskStatus(state=S.SUBMITTED, timestamp="2025-01-01T00:00:00Z"),
                  history=[m.Message(message_id="u1", role=m.Role.USER, parts=[m.Part(text="hi")], task_id=task_id,
                                     context_id="c1")])


# --- buses --------------------------------------------------------------------------------------------------------


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def make_buses(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[MakeBuses]:
    """`await make_buses(buffer=...)`: (a, b), two started buses on one namespace; local: one bus twice."""
    opened: list[EventBus] = []
    if kind == "redis":
        redis_url, namespace = request.getfixturevalue("redis_namespace")
    elif kind == "postgres":
        pg_url, namespace = request.getfixturevalue("postgres_url"), unique("t")

    async def make(buffer: int = DEFAULT_BUFFER, **options: Any) -> tuple[EventBus, EventBus]:
        if kind == "local":
            bus = LocalBus(buffer)
            opened.append(bus)
            return bus, bus
        pair: list[EventBus] = []
        for _ in range(2):
            if kind == "redis":
                from parley.tasks.redis_bus import RedisBus

                bus = RedisBus(redis_url, namespace=namespace, buffer=buffer, **options)
            else:
                bus = PostgresBus(Postgres(pg_url), namespace=namespace, buffer=buffer)
            opened.append(bus)
            await bus.start()
            pair.append(bus)
        return pair[0], pair[1]

    yield make
    for bus in opened:
        await bus.close()


class Collector:
    """What a subscription received: each seq once (duplicates dropped as a follower would), in arrival order."""

    def __init__(self, sub: Subscription) -> None:
        self.sub = sub
        self.entries: list[Entry] = []

    @property
    def seqs(self) -> list[int]:
        return [e.seq for e in self.entries]

    async def until(self, seq: int) -> list[Entry]:
        """Receive until entry `seq` (or a later one) arrived; a None from the bus fails the test."""
        async with asyncio.timeout(DEADLINE):
            while not self.entries or self.entries[-1].seq < seq:
                batch = await self.sub.get()
                assert batch is not None, f"the subscription lost entries (had {self.seqs})"
                for entry in batch:
                    if not self.entries or entry.seq > self.entries[-1].seq:
                        self.entries.append(entry)
        return self.entries


async def eventually(check: Callable[[], bool]) -> None:
    """Poll until `check()` holds (with a deadline)."""
    async with asyncio.timeout(DEADLINE):
        while not check():
            await asyncio.sleep(0.005)


# --- entries ------------------------------------------------------------------------------------------------------


async def test_entries_reach_every_subscriber_of_the_task_in_order(make_buses: MakeBuses) -> None:
    a, b = await make_buses()
    first, second, other = b.subscribe("t1"), b.subscribe("t1"), b.subscribe("t2")
    batches = [[status(1)], [status(2), artifact(3, "t1", "x")], [status(4, state=S.COMPLETED)]]
    for batch in batches:
        await a.publish("t1", batch)
    published = [e for batch in batches for e in batch]
    for sub in (first, second):
        got = await Collector(sub).until(4)
        assert [e.seq for e in got] == [1, 2, 3, 4]
        assert [e.event for e in got] == [e.event for e in published]
    # The other task's subscriber saw none of it: the first thing it receives is its own entry.
    await a.publish("t2", [status(1, "t2", text="other")])
    got = await Collector(other).until(1)
    assert [(e.seq, e.event.task_id) for e in got] == [(1, "t2")]
    for sub in (first, second, other):
        sub.close()


async def test_get_with_a_timeout_returns_nothing_and_loses_nothing(make_buses: MakeBuses) -> None:
    a, b = await make_buses()
    with b.subscribe("t1") as sub:
        assert await sub.get(timeout=0.05) == []

        async def publish_all() -> None:
            for seq in range(1, 31):
                await a.publish("t1", [status(seq)])

        publisher = asyncio.create_task(publish_all())
        seqs: list[int] = []
        async with asyncio.timeout(DEADLINE):
            while not seqs or seqs[-1] < 30:  # short timeouts expire while entries are on their way
                batch = await sub.get(timeout=0.001)
                assert batch is not None
                seqs += [e.seq for e in batch if not seqs or e.seq > seqs[-1]]
        await publisher
        assert seqs == list(range(1, 31))
        assert await sub.get(timeout=0.05) == []


async def test_deadlines_of_successive_gets_are_each_their_own(make_buses: MakeBuses) -> None:
    """A subscription keeps one timer for the deadlines of its gets: a get that returned entries leaves it armed.
    A later, shorter deadline still times out, and a get without one never returns empty."""
    a, b = await make_buses()
    with b.subscribe("t1") as sub:
        waiting = asyncio.create_task(sub.get(timeout=3600))
        await a.publish("t1", [status(1)])
        async with asyncio.timeout(DEADLINE):
            assert [e.seq for e in await waiting or []] == [1]
            assert await sub.get(timeout=0.01) == []  # shorter than the hour the timer was armed for
        waiting = asyncio.create_task(sub.get(timeout=0.5))  # long enough for any bus to deliver
        await a.publish("t1", [status(2)])
        async with asyncio.timeout(DEADLINE):
            assert [e.seq for e in await waiting or []] == [2]
        forever = asyncio.create_task(sub.get())  # the timer of the last get is still armed: it must not end this one
        await asyncio.sleep(0.6)  # past that timer (not a synchronisation: nothing may happen meanwhile)
        assert not forever.done()
        await a.publish("t1", [status(3)])
        async with asyncio.timeout(DEADLINE):
            assert [e.seq for e in await forever or []] == [3]


async def test_entries_published_right_after_subscribe_arrive(make_buses: MakeBuses) -> None:
    a, b = await make_buses()
    await a.publish("t1", [status(1), status(2)])  # before: a follower reads these from the store
    sub = b.subscribe("t1", after=2)
    await a.publish("t1", [status(3)])  # at once, before the bus could do anything
    got = Collector(sub)
    await got.until(3)
    assert got.seqs == [3]
    await a.publish("t1", [status(4)])
    await got.until(4)
    assert got.seqs == [3, 4]


async def test_batches_published_out_of_order_by_two_processes(make_buses: MakeBuses) -> None:
    """A later batch that gets out first is delivered; the earlier one does not fail (followers fill gaps)."""
    a, b = await make_buses()
    got = Collector(b.subscribe("t1"))
    await b.publish("t1", [status(4), status(5)])
    await a.publish("t1", [status(1), status(2), status(3)])
    await a.publish("t1", [status(6, state=S.COMPLETED)])
    await got.until(6)
    assert got.seqs == [4, 5, 6]


async def test_a_subscriber_that_falls_behind_gets_none_then_new_entries(make_buses: MakeBuses) -> None:
    a, b = await make_buses(buffer=10)
    probe, slow = Collector(b.subscribe("t1")), b.subscribe("t1")
    for seq in range(1, 13):  # the probe keeps up, so every entry reached `slow` too
        await a.publish("t1", [status(seq)])
        await probe.until(seq)
    async with asyncio.timeout(DEADLINE):
        assert await slow.get() is None
    assert await slow.get(timeout=0.05) == []  # None once, and the backlog was dropped
    await a.publish("t1", [status(13)])
    async with asyncio.timeout(DEADLINE):
        assert [e.seq for e in await slow.get() or []] == [13]


async def test_a_subscription_closed_receives_nothing_more(make_buses: MakeBuses) -> None:
    a, b = await make_buses()
    closed, open_ = b.subscribe("t1"), Collector(b.subscribe("t1"))
    closed.close()
    await a.publish("t1", [status(1)])
    await open_.until(1)
    assert await closed.get(timeout=0.05) == []
    assert b.subscriber_count == 1  # type: ignore[attr-defined]
    open_.sub.close()
    assert b.subscriber_count == 0  # type: ignore[attr-defined]


async def test_follow_log_yields_every_entry_of_big_batches(make_buses: MakeBuses) -> None:
    """Batches too big for one bus message (PostgreSQL: 8000 bytes) still reach a follower, via the store."""
    a, b = await make_buses()
    store = MemoryTaskStore()
    task = new_task("t1")
    await store.create(TaskRecord(task=task, agent_id="echo", owner="alice", seq=1, updated_at=1.0, created_at=1.0),
                       Entry(1, task))
    marker = Entry(0, task)
    follower = follow_log(store, b, "t1", 1, state=S.SUBMITTED, state_seq=1, until=is_terminal, first=marker)
    assert await anext(follower) is marker  # it has subscribed
    commits = [[status(2)], [artifact(3, "t1", "x" * 3 * MAX_PAYLOAD), status(4)], [artifact(5, "t1", "y")],
               [status(6, state=S.COMPLETED)]]
    snapshot, seq = task, 1
    for batch in commits:
        snapshot = fold(snapshot, [e.event for e in batch])
        await store.append("t1", seq, batch, snapshot, 2.0)
        seq = batch[-1].seq
        await a.publish("t1", batch)
    async with asyncio.timeout(DEADLINE):
        got = [e async for e in follower]
    assert [e.seq for e in got] == [2, 3, 4, 5, 6]
    assert [e.event for e in got] == [e.event for batch in commits for e in batch]


# --- cancel requests ----------------------------------------------------------------------------------------------


async def test_cancel_requests_reach_every_process(make_buses: MakeBuses, caplog: pytest.LogCaptureFixture) -> None:
    a, b = await make_buses()
    heard_a: list[tuple[str, dict[str, Any]]] = []
    heard_b: list[tuple[str, dict[str, Any]]] = []
    heard_b_then_gone: list[tuple[str, dict[str, Any]]] = []

    def broken(task_id: str, metadata: dict[str, Any]) -> None:
        raise RuntimeError("a broken handler")

    b.on_cancel(broken)
    b.on_cancel(lambda t, md: heard_b.append((t, md)))
    unregister = b.on_cancel(lambda t, md: heard_b_then_gone.append((t, md)))
    if a is not b:
        a.on_cancel(lambda t, md: heard_a.append((t, md)))
    metadata = {"reason": "user asked", "nested": {"n": [1, 2.5, None, True]}, "text": "héllo ✓"}
    with caplog.at_level(logging.ERROR, logger="parley.bus"):
        await a.request_cancel("t1", metadata)
        await eventually(lambda: len(heard_b) == 1 and len(heard_b_then_gone) == 1 and (a is b or len(heard_a) == 1))
    assert heard_b == heard_b_then_gone == [("t1", metadata)]
    if a is not b:
        assert heard_a == [("t1", metadata)]  # the sender's process hears it too: it may be the one running it
    assert any("a broken handler" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)

    unregister()
    unregister()  # twice is harmless
    await a.request_cancel("t2", {})
    await eventually(lambda: len(heard_b) == 2)
    assert heard_b[1] == ("t2", {})
    assert heard_b_then_gone == [("t1", metadata)]


# --- lifecycle ----------------------------------------------------------------------------------------------------


async def test_close_leaves_no_tasks_or_connections(make_buses: MakeBuses) -> None:
    before = asyncio.all_tasks()
    a, b = await make_buses()
    got = Collector(b.subscribe("t1"))
    await a.publish("t1", [status(1)])
    await got.until(1)
    heard: list[str] = []
    b.on_cancel(lambda t, md: heard.append(t))
    await a.request_cancel("t1", {})
    await eventually(lambda: heard == ["t1"])
    got.sub.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await a.close()
        await b.close()
        await b.close()  # twice is harmless
        await asyncio.sleep(0)  # let callbacks of the closed connections run
        leftover = [t for t in asyncio.all_tasks() if t not in before and not t.done()]
        assert leftover == []
        del a, b
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("kind", SHARED)
async def test_a_shared_bus_must_be_started(kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "redis":
        from parley.tasks.redis_bus import RedisBus

        url, namespace = request.getfixturevalue("redis_namespace")
        bus: EventBus = RedisBus(url, namespace=namespace)
    else:
        bus = PostgresBus(Postgres(request.getfixturevalue("postgres_url")), namespace=unique("t"))
    with pytest.raises(RuntimeError, match=r"start\(\) must be awaited"):
        bus.subscribe("t1")
    with pytest.raises(RuntimeError, match=r"start\(\) must be awaited"):
        await bus.publish("t1", [status(1)])
    with pytest.raises(RuntimeError, match=r"start\(\) must be awaited"):
        await bus.request_cancel("t1", {})
    await bus.start()
    bus.subscribe("t1").close()
    await bus.close()
    with pytest.raises(RuntimeError, match="closed"):
        bus.subscribe("t1")


# --- Redis --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", REDIS)
async def test_redis_reads_the_stream_from_after(make_buses: MakeBuses) -> None:
    """The stream is a history: a subscription starts after `after`, so nothing committed since is missed."""
    a, b = await make_buses()
    for seq in (1, 2, 3):
        await a.publish("t1", [status(seq)])
    got = Collector(b.subscribe("t1", after=1))
    await got.until(3)
    assert got.seqs == [2, 3]
    later = Collector(b.subscribe("t1", after=3))  # joins a task the reader already follows
    await a.publish("t1", [status(4)])
    await later.until(4)
    await got.until(4)
    assert later.seqs == [4] and got.seqs == [2, 3, 4]


@pytest.mark.parametrize("kind", REDIS)
async def test_redis_streams_are_bounded_and_expire(make_buses: MakeBuses,
                                                    redis_namespace: tuple[str, str]) -> None:
    import redis.asyncio as redis

    from parley.tasks.redis_bus import RedisBus

    a, b = await make_buses(stream_length=1000)
    for seq in range(1, 5001):
        await a.publish("t1", [status(seq)])
    url, namespace = redis_namespace
    client = redis.from_url(url)
    try:
        key = f"{namespace}:events:t1"
        length = await client.xlen(key)
        # MAXLEN ~ trims whole stream nodes (stream-node-max-entries, 100 by default): at most one node over.
        assert 1000 <= length <= 1100, length
        print(f"XLEN after 5000 batches with stream_length=1000: {length}")
        assert 0 < await client.ttl(key) <= 86_400
        first, last = await client.xrange(key, count=1), await client.xrevrange(key, count=1)
        assert last[0][0] == b"5000-0" and int(first[0][0].split(b"-")[0]) == 5001 - length
        assert isinstance(b, RedisBus)
        wake_key = f"{namespace}:wake:{b.id}"
        for _ in range(20):  # every subscription to a new task wakes the reader
            b.subscribe(unique("t")).close()
            await asyncio.sleep(0)
        async with asyncio.timeout(DEADLINE):
            while await client.xlen(wake_key) < 10:
                b.subscribe(unique("t")).close()
                await asyncio.sleep(0.001)
        assert await client.xlen(wake_key) == 10  # trimmed
        assert 0 < await client.ttl(wake_key) <= 3600
    finally:
        await client.aclose()


@pytest.mark.parametrize("kind", REDIS)
async def test_redis_reader_reconnects_and_subscribers_re_read(make_buses: MakeBuses,
                                                               redis_namespace: tuple[str, str]) -> None:
    import redis.asyncio as redis

    from parley.tasks.redis_bus import RedisBus

    a, b = await make_buses()
    assert isinstance(b, RedisBus)
    sub = b.subscribe("t1")
    got = Collector(sub)
    await a.publish("t1", [status(1)])
    await got.until(1)
    client = redis.from_url(redis_namespace[0])
    try:
        ids = [c["id"] for c in await client.client_list() if c.get("name") == b.reader_name]
        assert len(ids) == 1
        assert await client.client_kill_filter(_id=ids[0]) == 1
    finally:
        await client.aclose()
    async with asyncio.timeout(DEADLINE):
        assert await sub.get() is None
    await a.publish("t1", [status(2)])
    await got.until(2)
    assert got.seqs == [1, 2]


async def test_ping_answers_while_the_bus_works_and_not_once_closed(make_buses: MakeBuses) -> None:
    """/readyz asks the bus (issue 27, item 2): a started bus answers ping (Redis: PING; PostgreSQL: a query
    on its listening connection), a closed shared bus raises instead of saying it is fine."""
    a, b = await make_buses()
    await a.ping()
    await b.ping()
    if not isinstance(b, LocalBus):
        await b.close()
        with pytest.raises(Exception):  # noqa: B017 - which error depends on the bus; that there is one matters
            await b.ping()


def test_redis_bus_without_the_extra_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    from parley.tasks.redis_bus import RedisBus, RedisBusError

    monkeypatch.setitem(sys.modules, "redis.asyncio", None)  # import redis.asyncio fails
    with pytest.raises(RedisBusError, match=r"parley-a2a\[redis\]"):
        RedisBus("redis://127.0.0.1:6379/0")


@pytest.mark.parametrize("kind", REDIS)
def test_redis_bus_checks_its_arguments(kind: str) -> None:
    from parley.tasks.redis_bus import RedisBus

    with pytest.raises(ValueError, match="not a Redis URL"):
        RedisBus("postgresql://u:secret@host/db")
    with pytest.raises(ValueError, match="namespace"):
        RedisBus("redis://127.0.0.1:6379/0", namespace="")
    with pytest.raises(ValueError, match="stream_length"):
        RedisBus("redis://127.0.0.1:6379/0", stream_length=0)


@pytest.mark.parametrize("kind", REDIS)
async def test_redis_bus_that_cannot_connect_says_so_in_one_line(kind: str) -> None:
    from parley.tasks.redis_bus import RedisBus, RedisBusError

    bus = RedisBus(f"redis://:secret@127.0.0.1:{free_port()}/0")
    with pytest.raises(RedisBusError, match=r"cannot use Redis at redis://:\*\*\*@127\.0\.0\.1:\d+/0 as the bus"):
        await bus.start()
    with pytest.raises(RuntimeError, match=r"start\(\) must be awaited"):
        bus.subscribe("t1")
    await bus.close()


# --- PostgreSQL ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", POSTGRES)
async def test_postgres_batch_too_big_for_notify_gives_none(make_buses: MakeBuses) -> None:
    a, b = await make_buses()
    sub = b.subscribe("t1")
    await a.publish("t1", [status(1, text="x" * MAX_PAYLOAD)])
    async with asyncio.timeout(DEADLINE):
        assert await sub.get() is None
    await a.publish("t1", [status(2, text="x" * (MAX_PAYLOAD // 2))])  # fits
    got = Collector(sub)
    await got.until(2)
    assert got.seqs == [2]


@pytest.mark.parametrize("kind", POSTGRES)
async def test_postgres_listener_reconnects_and_subscribers_re_read(make_buses: MakeBuses, postgres_url: str) -> None:
    import asyncpg

    a, b = await make_buses()
    assert isinstance(b, PostgresBus)
    sub = b.subscribe("t1")
    got = Collector(sub)
    await a.publish("t1", [status(1)])
    await got.until(1)
    admin = await asyncpg.connect(postgres_url)
    try:
        killed = await admin.fetch("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                                   b.application_name)
        assert len(killed) == 2 and all(r[0] for r in killed)  # the listeners of both buses
    finally:
        await admin.close()
    async with asyncio.timeout(DEADLINE):
        assert await sub.get() is None
    await a.publish("t1", [status(2)])
    await got.until(2)
    assert got.seqs == [1, 2]
    await b.ping()  # listening again: ready again
    cancels: list[str] = []
    b.on_cancel(lambda t, md: cancels.append(t))
    await a.request_cancel("t1", {})
    await eventually(lambda: cancels == ["t1"])


@pytest.mark.parametrize("namespace", ["Parley", "a-b", "x; DROP TABLE t", "", "n" * 51])
def test_postgres_namespace_is_checked(namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        PostgresBus(Postgres("postgresql://127.0.0.1/none"), namespace=namespace)


async def test_a_late_notice_of_entries_the_subscriber_has_is_dropped(make_buses: MakeBuses) -> None:
    """A notice of entries up to `after`, reaching the subscription after it was made (PostgreSQL's NOTIFY of an
    earlier commit can arrive late), is not handed out again: the subscriber has them, or reads them."""
    a, b = await make_buses()
    got = Collector(b.subscribe("t1", after=2))
    await a.publish("t1", [status(1), status(2), status(3)])
    await got.until(3)
    await a.publish("t1", [status(2)])  # a duplicate, late
    await a.publish("t1", [status(4)])
    await got.until(4)
    assert got.seqs == [3, 4]
