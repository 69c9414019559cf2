"""Rate limits (token buckets per principal and agent) and concurrency limits, with RateLimit headers.

:class:`Limiter` is the rate-limit step of the request pipeline (:mod:`parley.server.pipeline`),
configured by :class:`~parley.settings.LimitSettings` (`[server.limits]` in parley.toml):

* **Requests**: one token bucket per (agent, principal). It holds `burst` tokens (default: a tenth
  of `requests_per_minute`, at least 1) and refills at `requests_per_minute / 60` tokens a second.
  *Every* A2A request that reaches the pipeline takes one token, whatever its operation (send,
  stream, get, list, cancel, subscribe, push-config, extended card, 0.3 card, trace): reads cost the
  server too, and one rule is easy to predict. A request refused by this limit takes nothing; a
  request refused by a concurrency limit below has taken its token (it was a request).
* **Streams**: `streams_per_principal` SendStreamingMessage / SubscribeToTask streams open at once
  per principal, over every agent and binding. A stream holds its slot until it ends, however it
  ends (finished, closed early by the client, failed): the pipeline calls :meth:`Grant.done`.
* **Tasks**: `tasks_per_agent` tasks running at once on an agent. A send that would *start a new
  task* (its message names no `taskId`) is refused while the agent runs that many. Messages that
  continue a task (answers to input-required) are never refused by this limit: a conversation in
  progress is not cut off. The count is the larger of what `running(agent_id)` reports (the engine's
  runs of that agent) and the sends admitted and still in flight (which closes the window between
  the check and the engine registering the new run, for concurrent sends).
* **A principal's share of the tasks**: `tasks_per_principal` of an agent's `tasks_per_agent` (default:
  half, rounded up) may be started by one principal at once, so one caller cannot take every slot and
  leave everyone else with 429. Counted the same way, per (agent, principal): the larger of the engine's
  runs of that agent owned by that principal (`running_of`) and that principal's new-task sends in flight.

Every response to a request under a rate limit carries the current state of its bucket, in the
syntax of draft-ietf-httpapi-ratelimit-headers-11 (Structured Fields, RFC 9651)::

    RateLimit-Policy: "default";q=<burst>;w=<seconds to refill a full bucket>
    RateLimit: "default";r=<whole tokens left>;t=<seconds until one more token>

`q` / `w` describe the bucket: it holds `q` requests and refills completely in `w` seconds
(rounded up, at least 1), so the long-run rate is q/w. `r` is what the client may send right now;
`t` is the effective window of the draft, "the time within which the client can use no more than
the available quota": the time until the next token accrues (rounded up, at least 1). A refusal
is :class:`~parley.protocol.errors.RateLimitedError` (HTTP 429, gRPC RESOURCE_EXHAUSTED) with
`Retry-After: <seconds>` and the same two fields; for the request limit `Retry-After` equals `t`
(the draft: Retry-After SHOULD NOT be earlier than the end of the effective window). For a
concurrency refusal no one knows when a slot frees up: `Retry-After` is `busy_retry_after` (1 s).

Calls inside this server (a delegation to one of its own agents, principal kind `internal`) carry
the principal of the task that delegates; the request that started that task was already counted,
so by default they take no token and hold no stream slot (`exempt_internal=False` counts them).
The tasks-per-agent limit applies to them: it protects the agent, whoever calls it.

The counters live behind :class:`RateCounters`; :class:`LocalCounters` keeps them in this process.
A shared implementation (Redis, for several replicas) implements the same three operations.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

from parley.protocol.errors import RateLimitedError
from parley.protocol.operations import Operation
from parley.server.access import NO_GRANT, Access, Grant, Principal
from parley.settings import LimitSettings

Clock = Callable[[], float]  # seconds, monotonic
Running = Callable[[str], "int | Awaitable[int]"]  # agent id -> tasks it runs now
RunningOf = Callable[[str, str], "int | Awaitable[int]"]  # (agent id, principal id) -> that principal's tasks there

POLICY = "default"  # the name of the one request policy in RateLimit-Policy / RateLimit
EPSILON = 1e-9  # float slack: a token due at time T is there at T


# --- the counters -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Take:
    """The answer of a bucket to one request."""

    allowed: bool  # a token was taken
    remaining: int  # whole tokens left (after this request's)
    wait: float  # seconds until the bucket holds one more whole token (refused: until the request would pass)


@dataclass(frozen=True, slots=True)
class Slot:
    """The answer of a concurrency key to one acquire."""

    acquired: bool
    held: int  # slots held in the key now (including this one when acquired)
    token: str | None = None  # give it back to `release` (None when not acquired)


class RateCounters(Protocol):
    """Where the limiter keeps its counters: token buckets and concurrency slots, by key.

    Keys are opaque strings made by the limiter (`rate/<agent>/<principal>`, `streams/<principal>`,
    `tasks/<agent>`, `tasks/<agent>/<principal>`, each part percent-encoded). Each operation must be atomic with respect to every
    other process sharing the counters. A shared (Redis) implementation:

    * `take`: one Lua script over a hash `{tokens, at}`: refill by `(now - at) * rate` up to `burst`,
      take one token if there is one, store, `PEXPIRE` the key after the time it takes to refill
      (a full bucket is the same as no key); `now` from Redis `TIME`, so replicas' clocks don't matter.
    * `acquire`: a sorted set of holder tokens scored by a lease expiry: drop expired members (the slots
      of a replica that died), `ZCARD`, `ZADD` a new token when under `limit`; one script. Holders of
      long streams renew their score (a heartbeat), as the engine does for run leases.
    * `release`: `ZREM` the token. It is called from synchronous code (`Grant.done`) and must not block:
      schedule the command on the running loop; a lost release is cleaned up by the lease expiry.
    """

    async def take(self, key: str, rate: float, burst: int) -> Take:
        """Take one token from bucket `key` (refilling `rate` tokens a second, holding at most `burst`)."""
        ...

    async def acquire(self, key: str, limit: int) -> Slot:
        """Take one of `limit` slots of `key`, if one is free."""
        ...

    def release(self, key: str, token: str) -> None:
        """Give back the slot `token` of `key`; releasing it again (or a token never held) does nothing."""
        ...


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float
    rate: float
    burst: int


class LocalCounters:
    """The counters in this process's memory (one process; thread-safe).

    A bucket that has refilled completely is forgotten (it equals a new one), so memory follows the
    number of callers active within a refill window, not every caller ever seen.
    """

    SWEEP_EVERY = 1024  # takes between two sweeps of full buckets

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        self._slots: dict[str, set[str]] = {}
        self._ids = itertools.count(1)
        self._takes = 0

    async def take(self, key: str, rate: float, burst: int) -> Take:
        return self.take_now(key, rate, burst)

    def take_now(self, key: str, rate: float, burst: int) -> Take:
        """:meth:`take`, synchronously."""
        if rate <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs a positive rate and a burst of at least 1 ({rate}, {burst})")
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(key)
            tokens = float(burst) if bucket is None else _refilled(bucket, now, rate, burst)
            allowed = tokens + EPSILON >= 1.0
            if allowed:
                tokens = max(0.0, tokens - 1.0)
            self._buckets[key] = _Bucket(tokens, now, rate, burst)
            self._takes += 1
            if self._takes % self.SWEEP_EVERY == 0:
                self._sweep(now)
        whole = min(burst, math.floor(tokens + EPSILON))
        return Take(allowed, whole, max(0.0, (whole + 1 - tokens) / rate))

    async def acquire(self, key: str, limit: int) -> Slot:
        return self.acquire_now(key, limit)

    def acquire_now(self, key: str, limit: int) -> Slot:
        """:meth:`acquire`, synchronously."""
        with self._lock:
            held = self._slots.get(key)
            count = len(held) if held else 0
            if count >= limit:
                return Slot(False, count)
            token = str(next(self._ids))
            if held is None:
                held = self._slots[key] = set()
            held.add(token)
            return Slot(True, count + 1, token)

    def release(self, key: str, token: str) -> None:
        with self._lock:
            held = self._slots.get(key)
            if held is None:
                return
            held.discard(token)
            if not held:
                del self._slots[key]

    def held(self, key: str) -> int:
        """Slots held in `key` now."""
        with self._lock:
            return len(self._slots.get(key, ()))

    def tracked(self) -> int:
        """Buckets and concurrency keys in memory (buckets not yet full, keys with a slot held)."""
        with self._lock:
            return len(self._buckets) + len(self._slots)

    def _sweep(self, now: float) -> None:
        full = [k for k, b in self._buckets.items() if _refilled(b, now, b.rate, b.burst) + EPSILON >= b.burst]
        for key in full:
            del self._buckets[key]


def _refilled(bucket: _Bucket, now: float, rate: float, burst: int) -> float:
    return min(float(burst), bucket.tokens + max(0.0, now - bucket.at) * rate)


# --- the limits of one agent ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentLimits:
    """The limits that apply to requests to one agent (the server's, with that agent's overrides)."""

    requests_per_minute: int | None
    burst: int
    tasks: int | None
    share: int | None = None  # tasks one principal may run at once (None: no share, only `tasks`)

    @property
    def rate(self) -> float:
        """Tokens a second."""
        return (self.requests_per_minute or 0) / 60.0

    @property
    def window(self) -> int:
        """Seconds an empty bucket takes to fill (rounded up, at least 1): the `w` of RateLimit-Policy."""
        rpm = self.requests_per_minute or 1
        return max(1, -(-self.burst * 60 // rpm))

    def policy(self) -> str:
        """The RateLimit-Policy field value."""
        return f'"{POLICY}";q={self.burst};w={self.window}'

    def state(self, took: Take) -> str:
        """The RateLimit field value after `took`."""
        return f'"{POLICY}";r={took.remaining};t={seconds(took.wait)}'


def seconds(delay: float) -> int:
    """A delay as the whole seconds of `Retry-After` / `t`: rounded up, at least 1."""
    return max(1, math.ceil(delay - EPSILON))


def default_burst(requests_per_minute: int) -> int:
    """The bucket size when `burst` is not set: a tenth of a minute's requests, at least 1."""
    return max(1, requests_per_minute // 10)


def resolve(limits: LimitSettings, override: LimitSettings | None = None, *, where: str = "limits") -> AgentLimits:
    """The limits of one agent: `limits`, with the fields `override` sets (not None) replacing them.

    `burst` follows its rate: an override that sets `requests_per_minute` but no `burst` gets the
    default burst of its own rate, not the server's burst."""
    rpm, burst, tasks = limits.requests_per_minute, limits.burst, limits.tasks_per_agent
    share = limits.tasks_per_principal
    if override is not None:
        if override.streams_per_principal is not None:
            raise ValueError(f"{where}.streams_per_principal: streams are limited per principal over every agent; "
                             f"set it for the server, not for one agent")
        if override.requests_per_minute is not None:
            rpm, burst = override.requests_per_minute, override.burst
        elif override.burst is not None:
            burst = override.burst
        if override.tasks_per_agent is not None:
            tasks = override.tasks_per_agent
        if override.tasks_per_principal is not None:
            share = override.tasks_per_principal
    for name, value in (("requests_per_minute", rpm), ("burst", burst), ("tasks_per_agent", tasks),
                        ("tasks_per_principal", share)):
        if value is not None and value < 1:
            raise ValueError(f"{where}.{name}: must be at least 1 (leave it out for no limit), got {value}")
    if burst is None:
        burst = default_burst(rpm) if rpm is not None else 1
    if tasks is None:
        share = None  # no pool to share (a share alone would be a per-principal pool: set tasks_per_agent)
    else:
        share = min(tasks, share if share is not None else default_share(tasks))
    return AgentLimits(rpm, burst, tasks, share)


def default_share(tasks: int) -> int:
    """A principal's share of an agent's `tasks_per_agent` when `tasks_per_principal` is not set: half,
    rounded up (a pool of one is its callers' to share in turn)."""
    return max(1, -(-tasks // 2))


# --- the limiter --------------------------------------------------------------------------------------------


class Limiter:
    """The RateLimiter of the request pipeline, configured by `LimitSettings`.

    Args:
        limits: the server's limits (`Settings.limits`).
        per_agent: limits of single agents, by agent id. A field set in an agent's entry replaces the
            server's (`requests_per_minute` with its `burst`, `burst`, `tasks_per_agent`); fields left
            unset (None) keep the server's. `streams_per_principal` is server-wide only (ValueError).
        running: how many tasks an agent runs now (`agent_id -> int`, or an awaitable of it); needed for an
            exact `tasks_per_agent`. Without it, only the new-task sends in flight are counted.
        running_of: how many tasks an agent runs now for one principal (`(agent_id, principal_id) -> int`);
            the same for the principal's share (`tasks_per_principal`).
        counters: where the counters live (default: :class:`LocalCounters`, this process).
        busy_retry_after: the `Retry-After` seconds of a refusal by a concurrency limit.
        exempt_internal: in-process delegations (principal kind `internal`) take no token and no stream slot.
    """

    def __init__(self, limits: LimitSettings, *, per_agent: Mapping[str, LimitSettings] | None = None,
                 running: Running | None = None, counters: RateCounters | None = None,
                 busy_retry_after: int = 1, exempt_internal: bool = True,
                 running_of: RunningOf | None = None) -> None:
        self.limits = limits
        self.default = resolve(limits)
        self.per_agent = {agent_id: resolve(limits, override, where=f"limits.agents.{agent_id}")
                          for agent_id, override in (per_agent or {}).items()}
        streams = limits.streams_per_principal
        if streams is not None and streams < 1:
            raise ValueError(f"limits.streams_per_principal: must be at least 1, got {streams}")
        self.streams = streams
        self.running = running
        self.running_of = running_of
        self.counters: RateCounters = counters if counters is not None else LocalCounters()
        self.busy_retry_after = max(1, int(busy_retry_after))
        self.exempt_internal = exempt_internal

    def limits_of(self, agent_id: str) -> AgentLimits:
        """The limits that apply to requests to `agent_id`."""
        return self.per_agent.get(agent_id, self.default)

    async def acquire(self, access: Access, principal: Principal) -> Grant:
        agent_id = access.agent_id
        plan = self.limits_of(agent_id)
        counted = not (self.exempt_internal and principal.kind == "internal")
        headers: dict[str, str] = {}
        if plan.requests_per_minute is not None and counted:
            took = await self.counters.take(bucket_key(agent_id, principal.id), plan.rate, plan.burst)
            headers = {"RateLimit-Policy": plan.policy(), "RateLimit": plan.state(took)}
            if not took.allowed:
                retry = seconds(took.wait)
                raise RateLimitedError(
                    f"Too many requests to agent {agent_id!r}: at most {plan.burst} at once and "
                    f"{plan.requests_per_minute} a minute; retry in {retry} s",
                    headers={"Retry-After": str(retry), **headers})
        held: list[tuple[str, str]] = []
        try:
            if self.streams is not None and counted and access.op.streams:
                key = streams_key(principal.id)
                slot = await self.counters.acquire(key, self.streams)
                if not slot.acquired:
                    raise self._busy(headers, f"Too many open streams: at most {self.streams} at once per caller")
                held.append((key, slot.token or ""))
            if plan.share is not None and starts_task(access):
                mine = (f"You are running as many tasks on agent {agent_id!r} as one caller may "
                        f"({plan.share} of its {plan.tasks}); retry when one of them has finished")
                if self.running_of is not None:
                    running = self.running_of(agent_id, principal.id)
                    if inspect.isawaitable(running):
                        running = await running
                    if running >= plan.share:
                        raise self._busy(headers, mine)
                key = share_key(agent_id, principal.id)
                slot = await self.counters.acquire(key, plan.share)
                if not slot.acquired:
                    raise self._busy(headers, mine)
                held.append((key, slot.token or ""))
            if plan.tasks is not None and starts_task(access):
                busy = f"Agent {agent_id!r} is running as many tasks as it may ({plan.tasks}); retry later"
                if self.running is not None:
                    running = self.running(agent_id)
                    if inspect.isawaitable(running):
                        running = await running
                    if running >= plan.tasks:
                        raise self._busy(headers, busy)
                key = tasks_key(agent_id)
                slot = await self.counters.acquire(key, plan.tasks)
                if not slot.acquired:
                    raise self._busy(headers, busy)
                held.append((key, slot.token or ""))
        except BaseException:
            self._release(held)
            raise
        if not held:
            return Grant(headers) if headers else NO_GRANT
        return HeldGrant(headers, self._releaser(held), asyncio.get_running_loop())

    def _busy(self, headers: dict[str, str], message: str) -> RateLimitedError:
        return RateLimitedError(message, headers={"Retry-After": str(self.busy_retry_after), **headers})

    def _releaser(self, held: list[tuple[str, str]]) -> Callable[[], None]:
        def release() -> None:  # Grant.done calls it once; popping makes a second call harmless anyway
            taken = held[:]
            held.clear()
            self._release(taken)

        return release

    def _release(self, held: list[tuple[str, str]]) -> None:
        for key, token in held:
            self.counters.release(key, token)


class HeldGrant(Grant):
    """A grant that holds slots. Normally the pipeline calls :meth:`done` when the request or its stream is
    over. A stream that is dropped without ever being iterated (the client went away before its first
    event) never runs the pipeline's `finally`; when such a grant is garbage-collected with its slots still
    held, they are given back on the loop that took them (once: `done` clears `release`)."""

    def __init__(self, headers: dict[str, str], release: Callable[[], None], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(headers, release)
        self.loop = loop

    def __del__(self) -> None:
        release, self.release = self.release, None
        if release is None:
            return
        try:
            self.loop.call_soon_threadsafe(release)
        except RuntimeError:  # the loop is closed: nothing else runs on it any more
            release()


def starts_task(access: Access) -> bool:
    """Whether the request is a send that would start a new task (its message names no task)."""
    if access.op not in (Operation.SEND, Operation.STREAM):
        return False
    message = getattr(access.request, "message", None)
    return message is None or not getattr(message, "task_id", None)


def _part(value: str) -> str:
    return quote(value, safe="")


def bucket_key(agent_id: str, principal_id: str) -> str:
    return f"rate/{_part(agent_id)}/{_part(principal_id)}"


def streams_key(principal_id: str) -> str:
    return f"streams/{_part(principal_id)}"


def tasks_key(agent_id: str) -> str:
    return f"tasks/{_part(agent_id)}"


def share_key(agent_id: str, principal_id: str) -> str:
    return f"tasks/{_part(agent_id)}/{_part(principal_id)}"


__all__ = ["AgentLimits", "Limiter", "LocalCounters", "RateCounters", "Slot", "Take", "bucket_key",
           "default_burst", "default_share", "resolve", "seconds", "share_key", "starts_task", "streams_key",
           "tasks_key"]
