"""Rate-limit counters in Redis (parley.security.redis_counters) against the real Redis of this machine.

Two `RedisCounters` on one namespace stand for two replicas of a server: they enforce one budget per
bucket and one set of slots per concurrency key. The behaviour tests of :class:`LocalCounters` (the
token bucket, the slots, the limiter's refusals and headers, a stream's slot freed however it ends) run
here over both implementations. Slot leases: a holder that lives keeps its slot past many leases (the
heartbeat renews it), a holder that is killed (a real process, SIGKILL) loses it after one lease, and a
release from synchronous code frees it. Time-dependent steps poll for a condition with a deadline; no
sleep stands in for synchronisation and no assertion is about how long something took.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from parley.protocol import models as m
from parley.protocol.errors import RateLimitedError, TaskNotFoundError
from parley.protocol.operations import Operation
from parley.security.ratelimit import Limiter, LocalCounters, bucket_key, share_key, streams_key, tasks_key
from parley.security.redis_counters import RedisCounters, RedisUnavailable
from parley.server.access import NO_GRANT, Principal
from parley.settings import LimitSettings
from support import access, free_port, needs, refused, send_request, stream_pipeline

WAIT = 15.0  # the longest one observable step may take before the test fails; never a pacing delay
POLL = 0.02  # between two looks at a condition
SLOT = 1.0  # the slot lease of the lease tests (seconds)
ALICE = Principal("alice", kind="token")
BOB = Principal("bob", kind="token")
REDIS = needs("redis", "redis")

Counters = LocalCounters | RedisCounters
Make = Callable[..., Awaitable[RedisCounters]]


# --- helpers ----------------------------------------------------------------------------------------------


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `check` until it holds; fail with `what` after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT} s: {what}")
        await asyncio.sleep(POLL)


async def held(counters: Counters, key: str) -> int:
    """Slots of `key` held now, once the releases already made have arrived."""
    if isinstance(counters, LocalCounters):
        return counters.held(key)
    await counters.flush()
    return await counters.held(key)


@pytest.fixture
async def raw(redis_namespace: tuple[str, str]) -> AsyncIterator[Any]:
    """A plain redis-py client on the test Redis (to look at the keys the counters write)."""
    import redis.asyncio as redis

    client = redis.from_url(redis_namespace[0], decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def make(redis_namespace: tuple[str, str]) -> AsyncIterator[Make]:
    """Factory of RedisCounters on the test's namespace (one per "replica"); all closed afterwards."""
    url, namespace = redis_namespace
    made: list[RedisCounters] = []

    async def factory(slot_seconds: float = 60.0) -> RedisCounters:
        counters = RedisCounters(url, namespace=namespace, slot_seconds=slot_seconds)
        made.append(counters)
        return counters

    yield factory
    for counters in made:
        await counters.close()


@pytest.fixture(params=["local", pytest.param("redis", marks=REDIS)])
async def counters(request: pytest.FixtureRequest) -> AsyncIterator[Counters]:
    """The counters under a behaviour test: in this process, or in Redis."""
    if request.param == "local":
        yield LocalCounters()
        return
    url, namespace = request.getfixturevalue("redis_namespace")
    shared = RedisCounters(url, namespace=namespace)
    yield shared
    await shared.close()


async def redis_ms(raw: Any) -> int:
    """Redis's clock, in ms (what the leases are scored in)."""
    seconds, micros = await raw.time()
    return seconds * 1000 + micros // 1000


# --- the behaviour of LocalCounters, over both implementations ----------------------------------------------


async def test_a_bucket_gives_its_burst_then_refuses_until_a_token_accrues(counters: Counters):
    """3 tokens, one more every 20 s: three requests pass (2, 1, 0 left), the fourth is refused with about
    20 s to wait (a fresh bucket, taken from within a few ms)."""
    rate = 3 / 60
    takes = [await counters.take("k", rate, 3) for _ in range(4)]
    assert [(t.allowed, t.remaining) for t in takes] == [(True, 2), (True, 1), (True, 0), (False, 0)]
    assert takes[0].wait == pytest.approx(20.0)  # the first take is exact: the bucket was full
    assert takes[3].wait == pytest.approx(20.0, abs=1.0)


async def test_buckets_are_separate_per_key(counters: Counters):
    assert (await counters.take("a", 1 / 60, 1)).allowed
    assert not (await counters.take("a", 1 / 60, 1)).allowed
    assert (await counters.take("b", 1 / 60, 1)).allowed


@pytest.mark.parametrize("rate, burst", [(0.0, 1), (-1.0, 5), (1.0, 0)])
async def test_a_bucket_refuses_a_bad_rate_or_burst(counters: Counters, rate: float, burst: int):
    with pytest.raises(ValueError, match=r"^a token bucket needs a positive rate and a burst of at least 1 "
                                         rf"\({rate}, {burst}\)$"):
        await counters.take("k", rate, burst)


async def test_slots_refuse_over_the_limit_and_a_release_counts_once(counters: Counters):
    one, two = await counters.acquire("s", 2), await counters.acquire("s", 2)
    assert (one.acquired, one.held, two.acquired, two.held) == (True, 1, True, 2)
    third = await counters.acquire("s", 2)
    assert (third.acquired, third.held, third.token) == (False, 2, None)
    assert one.token is not None and two.token is not None and one.token != two.token
    counters.release("s", one.token)
    counters.release("s", one.token)  # again: nothing more is freed
    counters.release("s", "never-held")
    assert await held(counters, "s") == 1
    assert (await counters.acquire("s", 2)).acquired
    assert not (await counters.acquire("s", 2)).acquired


async def test_every_response_carries_the_bucket_and_a_refusal_is_429_with_retry_after(counters: Counters):
    """rpm=60: burst 6, `"default";r=5;t=1` after the first request. rpm=3, burst=2: the third request is
    refused with Retry-After 20 and the same fields."""
    limiter = Limiter(LimitSettings(requests_per_minute=60), counters=counters)
    grant = await limiter.acquire(access(), ALICE)
    assert grant.headers == {"RateLimit-Policy": '"default";q=6;w=6', "RateLimit": '"default";r=5;t=1'}
    assert grant.release is None
    strict = Limiter(LimitSettings(requests_per_minute=3, burst=2), counters=counters)
    for _ in range(2):
        await strict.acquire(access(agent="other"), ALICE)
    err = await refused(strict, access(agent="other"), ALICE)
    assert (err.http_status, err.code) == (429, -31429)
    assert err.headers == {"Retry-After": "20", "RateLimit-Policy": '"default";q=2;w=40',
                           "RateLimit": '"default";r=0;t=20'}


async def test_a_stream_holds_a_slot_until_its_grant_is_done_once(counters: Counters):
    """streams_per_principal=1: alice's open stream refuses her next one, not bob's; done() twice frees once."""
    limiter = Limiter(LimitSettings(streams_per_principal=1), counters=counters)
    grant = await limiter.acquire(access(Operation.STREAM, request=send_request()), ALICE)
    assert grant.release is not None and await held(counters, streams_key("alice")) == 1
    err = await refused(limiter, access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    assert err.headers == {"Retry-After": "1"}
    assert await limiter.acquire(access(Operation.GET), ALICE) is NO_GRANT
    bob = await limiter.acquire(access(Operation.STREAM, request=send_request()), BOB)
    grant.done()
    grant.done()
    assert await held(counters, streams_key("alice")) == 0 and await held(counters, streams_key("bob")) == 1
    again = await limiter.acquire(access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    assert await held(counters, streams_key("alice")) == 1
    again.done()
    bob.done()
    assert await held(counters, streams_key("alice")) == 0 and await held(counters, streams_key("bob")) == 0


async def test_a_refusal_by_one_limit_gives_back_what_the_others_took(counters: Counters):
    limiter = Limiter(LimitSettings(requests_per_minute=60, burst=5, streams_per_principal=1, tasks_per_agent=1),
                      running=lambda agent: 1, counters=counters)
    err = await refused(limiter, access(Operation.STREAM, request=send_request()), ALICE)
    assert err.headers == {"Retry-After": "1", "RateLimit-Policy": '"default";q=5;w=5',
                           "RateLimit": '"default";r=4;t=1'}
    assert await held(counters, streams_key("alice")) == 0


async def test_a_principal_takes_only_its_share_of_an_agents_tasks(counters: Counters):
    """Issue 28 item 9: tasks_per_agent=4 leaves each principal half (2). Alice fills her share and gets 429
    with Retry-After; Bob still starts tasks; Alice starts again once one of hers is over."""
    limiter = Limiter(LimitSettings(tasks_per_agent=4), counters=counters)
    mine = [await limiter.acquire(access(Operation.SEND, request=send_request()), ALICE) for _ in range(2)]
    err = await refused(limiter, access(Operation.STREAM, request=send_request()), ALICE)
    assert err.headers == {"Retry-After": "1"}, err.headers
    assert err.message == ("You are running as many tasks on agent 'echo' as one caller may (2 of its 4); "
                           "retry when one of them has finished")
    bobs = [await limiter.acquire(access(Operation.SEND, request=send_request()), BOB) for _ in range(2)]
    assert await held(counters, tasks_key("echo")) == 4
    mine.pop().done()
    again = await limiter.acquire(access(Operation.SEND, request=send_request()), ALICE)
    for grant in (*mine, *bobs, again):
        grant.done()
    assert await held(counters, tasks_key("echo")) == 0
    assert await held(counters, share_key("echo", "alice")) == 0


@REDIS
async def test_the_share_holds_across_replicas(make: Make):
    """Two replicas on one Redis: Alice's share is one budget over both; Bob is not held back by it."""
    one, two = await make(), await make()
    first = Limiter(LimitSettings(tasks_per_agent=2), counters=one)  # share: 1
    second = Limiter(LimitSettings(tasks_per_agent=2), counters=two)
    held_here = await first.acquire(access(Operation.SEND, request=send_request()), ALICE)
    await refused(second, access(Operation.SEND, request=send_request()), ALICE)
    bob = await second.acquire(access(Operation.SEND, request=send_request()), BOB)
    held_here.done()
    bob.done()


async def test_a_stream_closed_early_or_failing_frees_its_slot_through_the_pipeline(counters: Counters):
    service, serve = stream_pipeline(counters)
    key = streams_key("alice")
    outcome = await serve()
    assert await outcome.events.__anext__() == 1
    with pytest.raises(RateLimitedError):
        await serve()
    await outcome.events.aclose()
    assert await held(counters, key) == 0
    again = await serve()
    assert await again.events.__anext__() == 1
    await outcome.events.aclose()  # closing the first one again gives back nothing of the second's
    assert await held(counters, key) == 1
    await again.events.aclose()
    service.fail = TaskNotFoundError()
    with pytest.raises(TaskNotFoundError):
        await serve()
    assert await held(counters, key) == 0


# --- two replicas, one budget ---------------------------------------------------------------------------------


@REDIS
async def test_two_replicas_enforce_one_request_budget(make: Make):
    """burst=5 (one token every 10 s): of 20 concurrent requests by alice, spread over two limiters on two
    RedisCounters, exactly 5 pass; the refusals say when the next token is due (10 s)."""
    limits = LimitSettings(requests_per_minute=6, burst=5)
    replicas = [Limiter(limits, counters=await make()), Limiter(limits, counters=await make())]
    results = await asyncio.gather(*(replicas[i % 2].acquire(access(), ALICE) for i in range(20)),
                                   return_exceptions=True)
    passed = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(passed) == 5 and len(failed) == 15
    assert all(isinstance(e, RateLimitedError) for e in failed), failed
    assert sorted(g.headers["RateLimit"] for g in passed) == [f'"default";r={n};t=10' for n in range(5)]
    assert {e.headers["Retry-After"] for e in failed} == {"10"}  # type: ignore[union-attr]
    bob = await replicas[1].acquire(access(), BOB)  # another principal has a bucket of its own
    assert bob.headers["RateLimit"] == '"default";r=4;t=10'


@REDIS
async def test_two_replicas_share_stream_and_task_slots(make: Make):
    """streams_per_principal=2 and tasks_per_agent=1 over two limiters: what one replica holds, the other
    counts; a slot given back on one is free on the other."""
    limits = LimitSettings(streams_per_principal=2, tasks_per_agent=1)
    one, two = (Limiter(limits, counters=await make()), Limiter(limits, counters=await make()))
    first = await one.acquire(access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    second = await two.acquire(access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    for limiter in (one, two):
        await refused(limiter, access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    task = await one.acquire(access(Operation.SEND, request=send_request()), BOB)
    err = await refused(two, access(Operation.SEND, request=send_request()), ALICE)
    assert "running as many tasks as it may (1)" in err.message
    first.done()
    task.done()
    counters = two.counters
    assert isinstance(counters, RedisCounters)
    await one.counters.flush()  # type: ignore[attr-defined]
    assert await counters.held(streams_key("alice")) == 1 and await counters.held(tasks_key("echo")) == 0
    await two.acquire(access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    await two.acquire(access(Operation.SEND, request=send_request()), ALICE)
    second.done()


@REDIS
async def test_every_key_is_under_the_namespace_and_expires(make: Make, raw: Any, redis_namespace: tuple[str, str]):
    """A bucket is a hash {tokens, at} that expires when it would be full again; a slot key is a sorted set
    of tokens scored by lease expiry (Redis time, ms) that expires with its last lease."""
    namespace = redis_namespace[1]
    # A name of this test's own: the scan covers all of Redis (a key outside the namespace would be found), and
    # other tests' principals (another run's "alice") must not be.
    who = f"alice-{uuid.uuid4().hex}"
    counters = await make(slot_seconds=30.0)
    await counters.take(bucket_key("echo", who), 1.0, 5)  # one token short: full again in 1 s
    slot = await counters.acquire(streams_key(who), 3)
    keys = sorted([k async for k in raw.scan_iter(match=f"*{who}*")])
    assert keys == [f"{namespace}:rl:rate/echo/{who}", f"{namespace}:rl:streams/{who}"]
    bucket = await raw.hgetall(f"{namespace}:rl:rate/echo/{who}")
    assert set(bucket) == {"tokens", "at"} and float(bucket["tokens"]) == pytest.approx(4.0, abs=0.01)
    assert 0 < await raw.pttl(f"{namespace}:rl:rate/echo/{who}") <= 1000
    now = await redis_ms(raw)
    [(token, expiry)] = await raw.zrange(f"{namespace}:rl:streams/{who}", 0, -1, withscores=True)
    assert token == slot.token and now < expiry <= now + 30_000
    assert 0 < await raw.pttl(f"{namespace}:rl:streams/{who}") <= 30_001


# --- leases ---------------------------------------------------------------------------------------------------


@REDIS
async def test_a_held_slot_outlives_many_leases_while_its_holder_lives(make: Make, raw: Any,
                                                                       redis_namespace: tuple[str, str]):
    """slot_seconds=1: a holder that keeps running (a stream open for minutes) keeps its slot well past its
    first lease; the other replica stays refused until the holder releases it."""
    holder, other = await make(slot_seconds=SLOT), await make(slot_seconds=SLOT)
    key = streams_key("alice")
    slot = await holder.acquire(key, 1)
    assert slot.acquired
    first_expiry = await raw.zscore(f"{redis_namespace[1]}:rl:{key}", slot.token)
    assert first_expiry is not None

    async def three_leases_later() -> bool:
        return await redis_ms(raw) > first_expiry + 2 * SLOT * 1000

    await eventually(three_leases_later, "Redis time passes the end of the slot's third lease")
    assert not (await other.acquire(key, 1)).acquired
    assert await other.held(key) == 1 and holder.holding() == 1
    holder.release(key, slot.token or "")

    async def free() -> bool:
        return (await other.acquire(key, 1)).acquired

    await eventually(free, "the released slot is free for the other replica")


HOLDER = """
import asyncio, sys
from parley.security.redis_counters import RedisCounters

async def main():
    counters = RedisCounters(sys.argv[1], namespace=sys.argv[2], slot_seconds=float(sys.argv[3]))
    slot = await counters.acquire(sys.argv[4], 1)
    print(slot.token, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@REDIS
async def test_the_slot_of_a_replica_that_died_is_freed_after_its_lease(make: Make, raw: Any,
                                                                        redis_namespace: tuple[str, str]):
    """Another process holds the only slot and renews it past its first lease; killed with SIGKILL (no
    release, no goodbye), its slot is free again once the lease runs out, and is not revived by a renewal."""
    url, namespace = redis_namespace
    key = streams_key("alice")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", HOLDER, url, namespace, str(SLOT), key,
                                                stdout=asyncio.subprocess.PIPE)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), WAIT)  # type: ignore[union-attr]
        token = line.decode().strip()
        assert token and token != "None", f"the holder process did not get the slot: {line!r}"
        first_expiry = await raw.zscore(f"{namespace}:rl:{key}", token)
        assert first_expiry is not None
        other = await make(slot_seconds=SLOT)

        async def past_first_lease() -> bool:
            return await redis_ms(raw) > first_expiry + SLOT * 1000

        await eventually(past_first_lease, "Redis time passes the end of the holder's second lease")
        assert not (await other.acquire(key, 1)).acquired  # renewed by the living holder
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), WAIT)
    assert proc.returncode == -signal.SIGKILL

    async def free() -> bool:
        return (await other.acquire(key, 1)).acquired

    await eventually(free, "the dead replica's slot is freed by its lease expiry")
    assert not await other.renew(key, token)  # a lapsed lease is not brought back
    assert await other.held(key) == 1


@REDIS
async def test_renew_extends_a_held_slot_and_reports_one_not_held(make: Make, raw: Any,
                                                                  redis_namespace: tuple[str, str]):
    counters = await make(slot_seconds=30.0)
    key = streams_key("alice")
    slot = await counters.acquire(key, 2)
    token = slot.token or ""
    before = await raw.zscore(f"{redis_namespace[1]}:rl:{key}", token)

    async def later() -> bool:
        return await redis_ms(raw) > before - 30_000

    await eventually(later, "Redis time moves on by a millisecond")
    assert await counters.renew(key, token)
    assert await raw.zscore(f"{redis_namespace[1]}:rl:{key}", token) > before
    assert not await counters.renew(key, "never-held")
    assert await counters.renew_all() == 1
    counters.release(key, token)
    await counters.flush()
    assert not await counters.renew(key, token)
    assert counters.holding() == 0 and await counters.renew_all() == 0


@REDIS
async def test_a_release_from_synchronous_code_frees_the_slot(make: Make):
    """Grant.done() is synchronous: it schedules the ZREM on the running loop; the slot is free for the other
    replica without any await by the caller of done()."""
    one, two = await make(), await make()
    limits = LimitSettings(streams_per_principal=1)
    grant = await Limiter(limits, counters=one).acquire(access(Operation.STREAM, request=send_request()), ALICE)

    def finish() -> None:  # plain synchronous code, as the pipeline's finally
        grant.done()

    finish()
    key = streams_key("alice")

    async def free() -> bool:
        return await two.held(key) == 0

    await eventually(free, "the slot released by synchronous code is free")
    assert one.holding() == 0
    await Limiter(limits, counters=two).acquire(access(Operation.STREAM, request=send_request()), ALICE)


@REDIS
async def test_a_release_without_a_running_loop_does_nothing_and_the_lease_frees_the_slot(make: Make):
    """release() from a thread with no event loop neither blocks nor raises; the holder stops renewing the
    slot, so its lease frees it."""
    holder, other = await make(slot_seconds=SLOT), await make(slot_seconds=SLOT)
    key = streams_key("alice")
    slot = await holder.acquire(key, 1)
    errors: list[BaseException] = []

    def release() -> None:
        try:
            holder.release(key, slot.token or "")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=release)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive() and errors == []
    assert holder.holding() == 0  # no longer renewed

    async def free() -> bool:
        return (await other.acquire(key, 1)).acquired

    await eventually(free, "the lease of the slot released without a loop runs out")


@REDIS
async def test_close_gives_back_the_held_slots_and_refuses_further_use(make: Make):
    holder, other = await make(), await make()
    key = streams_key("alice")
    assert (await holder.acquire(key, 1)).acquired
    await holder.close()
    assert await other.held(key) == 0
    with pytest.raises(RuntimeError, match="^these Redis rate-limit counters are closed$"):
        await holder.take("k", 1.0, 1)
    with pytest.raises(RuntimeError, match="^these Redis rate-limit counters are closed$"):
        await holder.acquire(key, 1)
    holder.release(key, "anything")  # harmless
    await holder.close()  # idempotent


# --- bad input ------------------------------------------------------------------------------------------------


@REDIS
async def test_an_unreachable_redis_is_one_line_without_the_password():
    port = free_port()
    counters = RedisCounters(f"redis://:s3cret@127.0.0.1:{port}/0", namespace="parley_t_unreachable")
    try:
        with pytest.raises(RedisUnavailable, match=rf"^cannot reach Redis at redis://:\*\*\*@127\.0\.0\.1:{port}/0: ") as err:
            await counters.take("k", 1.0, 1)
        assert "s3cret" not in str(err.value) and "\n" not in str(err.value)
        with pytest.raises(RedisUnavailable, match="^cannot reach Redis at "):
            await counters.acquire("s", 1)
    finally:
        await counters.close()


@REDIS
@pytest.mark.parametrize("kwargs, message", [
    ({"url": "http://127.0.0.1:6379"}, r"^not a Redis URL: http://127\.0\.0\.1:6379 \(.*redis://.*\)$"),
    ({"namespace": ""}, r"^the Redis key namespace must not be empty$"),
    ({"slot_seconds": 0}, r"^slot_seconds must be a positive number of seconds, got 0$"),
    ({"slot_seconds": -1.0}, r"^slot_seconds must be a positive number of seconds, got -1\.0$"),
    ({"slot_seconds": float("inf")}, r"^slot_seconds must be a positive number of seconds, got inf$"),
    ({"slot_seconds": float("nan")}, r"^slot_seconds must be a positive number of seconds, got nan$"),
])
def test_bad_settings_are_refused_at_construction(kwargs: dict[str, Any], message: str):
    url = kwargs.pop("url", "redis://127.0.0.1:6379/0")
    with pytest.raises(ValueError, match=message):
        RedisCounters(url, **kwargs)
