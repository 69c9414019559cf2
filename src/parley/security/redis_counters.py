"""Rate-limit counters in Redis, shared by every replica of a server (needs parley-a2a[redis]: redis-py).

:class:`RedisCounters` implements :class:`~parley.security.ratelimit.RateCounters` as its docstring
describes, so several `parley serve` processes enforce ONE budget per bucket and ONE set of slots per
concurrency key. Every operation on a key is one Lua script (atomic on the Redis server) and reads the
time from Redis `TIME`, so the replicas' clocks do not matter.

Keys (every one starts with `<namespace>:`)::

    <namespace>:rl:<limiter key>    e.g. parley:rl:rate/echo/alice  a hash {tokens, at}: a token bucket
                                         parley:rl:streams/alice     a sorted set: holder token -> lease expiry

* A **bucket** holds `tokens` (a float, "%.17g") as of `at` (Redis time in microseconds). `take` refills
  it by `(now - at) * rate` up to `burst`, takes one token if there is one, stores it and `PEXPIRE`s the
  key after the time it takes to refill completely (a full bucket is the same as no key).
* A **concurrency key** is a sorted set of holder tokens scored by their lease expiry (Redis time in
  milliseconds). `acquire` drops the expired members (the slots of a replica that died), counts the rest
  and adds a new token when under the limit. A lease lasts `slot_seconds`; while this process holds a
  slot, a heartbeat renews it every `slot_seconds / 3`, so a stream open for an hour keeps its slot, and
  the slots of a replica that died are free `slot_seconds` after its last heartbeat. A lease that lapsed
  anyway (this process stalled for longer than `slot_seconds`) is not revived: its slot may already be
  someone else's; the holder keeps running, uncounted, and a warning is logged.
* `release` is synchronous (the pipeline calls it from `Grant.done`): it forgets the token at once (no
  more renewals) and schedules the `ZREM` on the running event loop; the next `acquire` of this process
  waits for it, so a client that closes a stream and opens another at once is not refused by its own
  slot. Without a running loop nothing is sent; the lease expiry frees the slot.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from typing import Any

from parley.postgres import redact
from parley.security.ratelimit import EPSILON, Slot, Take
from parley.tasks.store import StoreError

log = logging.getLogger("parley.ratelimit")

EXTRA = "parley-a2a[redis]"

# KEYS[1] the bucket; ARGV rate (tokens a second), burst, epsilon. Returns {allowed 0|1, tokens left as a string}.
TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local epsilon = tonumber(ARGV[3])
local tokens = burst
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
if state[1] and state[2] then
  local elapsed = math.max(0, now - tonumber(state[2])) / 1000000
  tokens = math.min(burst, tonumber(state[1]) + elapsed * rate)
end
local allowed = 0
if tokens + epsilon >= 1 then
  allowed = 1
  tokens = math.max(0, tokens - 1)
end
local left = string.format('%.17g', tokens)
redis.call('HSET', KEYS[1], 'tokens', left, 'at', string.format('%d', now))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.max(1, math.ceil((burst - tokens) / rate * 1000))))
return {allowed, left}
"""

# Shared by the slot scripts: now in ms, drop the expired members; the key lives as long as its longest lease.
_SLOTS_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local function keep_alive()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', KEYS[1], string.format('%d', tonumber(last[2]) + 1))
  end
end
"""

# KEYS[1] the slots; ARGV limit, token, lease (ms). Returns {acquired 0|1, held}.
ACQUIRE = _SLOTS_PRELUDE + """
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[1]) then
  return {0, held}
end
redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[3])), ARGV[2])
keep_alive()
return {1, held + 1}
"""

# KEYS[1] the slots; ARGV lease (ms), token... Extends the leases still held (never revives a lapsed one).
# Returns one 0|1 per token.
RENEW = _SLOTS_PRELUDE + """
local expiry = string.format('%d', now + tonumber(ARGV[1]))
local kept = {}
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i])
    kept[#kept + 1] = 1
  else
    kept[#kept + 1] = 0
  end
end
keep_alive()
return kept
"""

# KEYS[1] the slots. Returns the slots held now (unexpired leases).
HELD = _SLOTS_PRELUDE + """
return redis.call('ZCARD', KEYS[1])
"""


class RedisUnavailable(StoreError):
    """Redis cannot be used (the extra is missing, the server cannot be reached): one readable line."""


def _redis() -> Any:
    try:
        import redis.asyncio as redis
    except ImportError:
        raise RedisUnavailable(f"Redis rate-limit counters need the {EXTRA} extra: pip install '{EXTRA}'") from None
    return redis


class RedisCounters:
    """:class:`~parley.security.ratelimit.RateCounters` in Redis, shared by the replicas that use the same
    server and `namespace`.

    Args:
        url: redis://[[user]:password@]host[:port][/db], rediss://... or unix://...
        namespace: the prefix of every key (`<namespace>:`); replicas of one server share it.
        slot_seconds: the lease of a concurrency slot: how long the slots of a replica that died stay
            taken. Held slots are renewed every `slot_seconds / 3`.

    Raises:
        RedisUnavailable: redis-py is not installed.
        ValueError: a URL that is not a Redis URL, an empty namespace, a slot lease that is not positive.
    """

    def __init__(self, url: str, *, namespace: str = "parley", slot_seconds: float = 60.0) -> None:
        if not namespace:
            raise ValueError("the Redis key namespace must not be empty")
        if not slot_seconds > 0 or math.isinf(slot_seconds):
            raise ValueError(f"slot_seconds must be a positive number of seconds, got {slot_seconds}")
        redis = _redis()
        self.url = url
        self.namespace = namespace
        self.slot_seconds = float(slot_seconds)
        self.lease_ms = max(1, round(self.slot_seconds * 1000))
        try:
            self._client = redis.from_url(url, decode_responses=True, socket_connect_timeout=5, socket_timeout=10)
        except ValueError as exc:
            raise ValueError(f"not a Redis URL: {redact(url)} ({exc})") from None
        self._errors: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)
        self._take = self._client.register_script(TAKE)
        self._acquire = self._client.register_script(ACQUIRE)
        self._renew = self._client.register_script(RENEW)
        self._held_script = self._client.register_script(HELD)
        self._held: dict[str, set[str]] = {}  # limiter key -> tokens this process holds (renewed by the heartbeat)
        self._pending: set[asyncio.Task[None]] = set()  # releases under way (referenced until done)
        self._heartbeat: asyncio.Task[None] | None = None
        self._closed = False

    def key(self, key: str) -> str:
        """The Redis key of a limiter key."""
        return f"{self.namespace}:rl:{key}"

    # --- RateCounters ---------------------------------------------------------------------------------------

    async def take(self, key: str, rate: float, burst: int) -> Take:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs a positive rate and a burst of at least 1 ({rate}, {burst})")
        allowed, left = await self._call(self._take, key, repr(float(rate)), int(burst), repr(EPSILON))
        tokens = float(left)
        whole = min(burst, math.floor(tokens + EPSILON))
        return Take(bool(allowed), whole, max(0.0, (whole + 1 - tokens) / rate))

    async def acquire(self, key: str, limit: int) -> Slot:
        if self._pending:  # a slot given back here just before is free for this acquire
            await self.flush()
        token = secrets.token_hex(12)
        acquired, held = await self._call(self._acquire, key, int(limit), token, self.lease_ms)
        if not acquired:
            return Slot(False, int(held))
        self._held.setdefault(key, set()).add(token)
        self._start_heartbeat()
        return Slot(True, int(held), token)

    def release(self, key: str, token: str) -> None:
        held = self._held.get(key)
        if held is not None:
            held.discard(token)
            if not held:
                del self._held[key]
        if self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to send it on: the lease expiry frees the slot
            return
        task = loop.create_task(self._remove(key, token))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    # --- leases ---------------------------------------------------------------------------------------------

    async def renew(self, key: str, token: str) -> bool:
        """Extend the lease of slot `token` of `key` by `slot_seconds` from now; False when it is not held
        (released, never held, or lapsed: a lapsed lease is not revived)."""
        (kept,) = await self._call(self._renew, key, self.lease_ms, token)
        if not kept:
            self._forget(key, token)
        return bool(kept)

    async def renew_all(self) -> int:
        """Renew every slot this process holds (what the heartbeat does); returns how many are still held."""
        held = {key: sorted(tokens) for key, tokens in self._held.items() if tokens}
        replies = await asyncio.gather(*(self._call(self._renew, key, self.lease_ms, *tokens)
                                         for key, tokens in held.items()))
        kept = 0
        for (key, tokens), flags in zip(held.items(), replies, strict=True):
            for token, flag in zip(tokens, flags, strict=True):
                if flag:
                    kept += 1
                elif token in self._held.get(key, ()):  # not released meanwhile: its lease lapsed
                    log.warning("the lease of a rate-limit slot of %s lapsed before it was renewed (this process "
                                "stalled for more than %s s); the slot is no longer counted", key, self.slot_seconds)
                    self._forget(key, token)
        return kept

    async def held(self, key: str) -> int:
        """Slots of `key` held now, by every replica (unexpired leases)."""
        return int(await self._call(self._held_script, key))

    def holding(self) -> int:
        """Slots this process holds (and renews)."""
        return sum(len(tokens) for tokens in self._held.values())

    async def flush(self) -> None:
        """Wait for the releases scheduled so far to reach Redis."""
        while self._pending:
            await asyncio.gather(*list(self._pending))

    async def close(self) -> None:
        """Stop renewing, give back the slots still held, close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            self._heartbeat = None
        await self.flush()
        held, self._held = self._held, {}
        await asyncio.gather(*(self._remove(key, token) for key, tokens in held.items() for token in tokens))
        await self._client.aclose()

    # --- internals ------------------------------------------------------------------------------------------

    async def _call(self, script: Any, key: str, *args: Any) -> Any:
        if self._closed:
            raise RuntimeError("these Redis rate-limit counters are closed")
        try:
            return await script(keys=[self.key(key)], args=args)
        except self._errors as exc:
            raise RedisUnavailable(f"cannot reach Redis at {redact(self.url)}: {exc}") from None

    async def _remove(self, key: str, token: str) -> None:
        try:
            await self._client.zrem(self.key(key), token)
        except Exception as exc:  # noqa: BLE001 - a lost release is cleaned up by the lease expiry
            log.warning("releasing a rate-limit slot of %s failed (%s); its lease frees it within %s s",
                        key, exc, self.slot_seconds)

    def _forget(self, key: str, token: str) -> None:
        held = self._held.get(key)
        if held is not None:
            held.discard(token)
            if not held:
                del self._held[key]

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat(), name="parley-ratelimit-leases")

    async def _beat(self) -> None:
        interval = self.slot_seconds / 3
        while True:
            await asyncio.sleep(interval)
            if not self._held:  # nothing to renew: the next acquire starts another heartbeat
                return
            try:
                await self.renew_all()
            except Exception as exc:  # noqa: BLE001 - Redis away for a moment: the next beat tries again
                log.warning("renewing the rate-limit slots of this process failed: %s", exc)


__all__ = ["RedisCounters", "RedisUnavailable"]
