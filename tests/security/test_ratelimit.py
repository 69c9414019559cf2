"""Rate limits and concurrency limits (parley.security.ratelimit), with the IETF RateLimit fields.

Unit tests drive the token bucket with an injected clock (no sleeping), the concurrency slots, the
limiter's refusals and the exact syntax of `RateLimit-Policy` / `RateLimit` (Structured Fields,
draft-ietf-httpapi-ratelimit-headers-11). End-to-end tests run a real uvicorn server (and its gRPC
port) with a test authenticator (the `X-Test-User` header / `x-test-user` metadata names the
principal) and check what a client sees on the wire: 429 with Retry-After and the RateLimit fields
over JSON-RPC and HTTP+JSON, RESOURCE_EXHAUSTED over gRPC, separate buckets per principal, stream
slots held while a stream is open and freed when it ends (also when the client closes it early),
and the tasks-per-agent limit.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from parley.agents.base import RunContext, Status
from parley.app import Parley
from parley.protocol import models as m
from parley.protocol.errors import RateLimitedError, TaskNotFoundError, UnauthenticatedError
from parley.protocol.operations import Operation
from parley.runtime import Runtime
from parley.security.ratelimit import Limiter, LocalCounters, resolve, streams_key, tasks_key
from parley.server.access import NO_GRANT, Access, Credentials, Principal
from parley.server.app import create_app
from parley.settings import LimitSettings
from support import (
    Gate,
    LiveServer,
    access,
    free_port,
    grpc_error_infos,
    needs,
    refused,
    send_request,
    stream_pipeline,
)

from .secured import Sse, sf_item

try:  # the gRPC binding needs the parley-a2a[grpc] extra (installed by the dev extra)
    import grpc  # noqa: F401

    HAVE_GRPC = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_GRPC = False

WAIT = 15.0  # the longest one observable step may take before the test fails; never a pacing delay
USER_HEADER = "X-Test-User"
USER_METADATA = "x-test-user"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
ALICE = Principal("alice", kind="token")
BOB = Principal("bob", kind="token")


# --- helpers: a clock, the Structured Fields syntax -------------------------------------------------------


class Clock:
    """A clock the test moves by hand (read by the server thread: a float attribute is safe to share)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds




# --- the token bucket -------------------------------------------------------------------------------------


async def test_a_bucket_gives_its_burst_then_one_token_per_interval():
    """3 tokens, one more every 20 s (3 a minute): three requests pass at once (2, 1, 0 left), the
    fourth is refused with a wait of 20 s; at 19.5 s still refused (0.5 s to go); at 20 s it passes."""
    clock = Clock()
    counters = LocalCounters(clock)
    rate = 3 / 60
    assert [(t.allowed, t.remaining) for t in [await counters.take("k", rate, 3) for _ in range(3)]] == [
        (True, 2), (True, 1), (True, 0)]
    over = await counters.take("k", rate, 3)
    assert (over.allowed, over.remaining) == (False, 0) and over.wait == pytest.approx(20.0)
    clock.advance(19.5)
    still = await counters.take("k", rate, 3)
    assert not still.allowed and still.wait == pytest.approx(0.5)
    clock.advance(0.5)
    now = await counters.take("k", rate, 3)
    assert (now.allowed, now.remaining) == (True, 0) and now.wait == pytest.approx(20.0)


async def test_a_bucket_refills_at_its_rate_and_never_above_its_burst():
    """Half a token accrues in 10 s (r=2 with 10 s to the next token); after an hour idle the bucket holds
    its burst, not more."""
    clock = Clock()
    counters = LocalCounters(clock)
    rate = 3 / 60
    await counters.take("k", rate, 3)  # 2 left
    clock.advance(10)
    half = await counters.take("k", rate, 3)  # 2.5 -> 1.5 after this request
    assert (half.allowed, half.remaining) == (True, 1) and half.wait == pytest.approx(10.0)
    clock.advance(3600)
    full = [await counters.take("k", rate, 3) for _ in range(4)]
    assert [t.allowed for t in full] == [True, True, True, False]


async def test_buckets_are_separate_per_key():
    counters = LocalCounters(Clock())
    assert (await counters.take("a", 1.0, 1)).allowed
    assert not (await counters.take("a", 1.0, 1)).allowed
    assert (await counters.take("b", 1.0, 1)).allowed


async def test_full_buckets_are_forgotten():
    """Memory follows active callers: a sweep drops the buckets that have refilled completely."""
    clock = Clock()
    counters = LocalCounters(clock)
    counters.SWEEP_EVERY = 4
    for key in ("a", "b", "c"):
        await counters.take(key, 1.0, 2)
    assert counters.tracked() == 3
    clock.advance(1.0)  # every bucket is full again
    await counters.take("d", 1.0, 2)  # the 4th take sweeps: a, b, c go; d is not full
    assert counters.tracked() == 1


# --- concurrency slots ------------------------------------------------------------------------------------


async def test_slots_refuse_over_the_limit_and_a_release_counts_once():
    counters = LocalCounters(Clock())
    one, two = await counters.acquire("s", 2), await counters.acquire("s", 2)
    assert (one.acquired, one.held, two.acquired, two.held) == (True, 1, True, 2)
    third = await counters.acquire("s", 2)
    assert (third.acquired, third.held, third.token) == (False, 2, None)
    assert one.token is not None
    counters.release("s", one.token)
    counters.release("s", one.token)  # again: nothing more is freed
    counters.release("s", "never-held")
    assert counters.held("s") == 1
    assert (await counters.acquire("s", 2)).acquired
    assert not (await counters.acquire("s", 2)).acquired


# --- the limiter: headers, refusals, what counts ------------------------------------------------------------


async def test_every_response_carries_the_bucket_in_the_drafts_syntax():
    """requests_per_minute=60 gives a burst of 6 that refills in 6 s: `"default";q=6;w=6`; after the first
    request 5 are left and the next token is 1 s away: `"default";r=5;t=1`."""
    limiter = Limiter(LimitSettings(requests_per_minute=60), counters=LocalCounters(Clock()))
    grant = await limiter.acquire(access(), ALICE)
    assert grant.headers == {"RateLimit-Policy": '"default";q=6;w=6', "RateLimit": '"default";r=5;t=1'}
    assert sf_item(grant.headers["RateLimit-Policy"]) == ("default", {"q": 6, "w": 6})
    assert sf_item(grant.headers["RateLimit"]) == ("default", {"r": 5, "t": 1})
    assert grant.release is None  # nothing held open


async def test_a_refusal_is_429_with_retry_after_and_the_same_fields():
    clock = Clock()
    limiter = Limiter(LimitSettings(requests_per_minute=3, burst=2), counters=LocalCounters(clock))
    for _ in range(2):
        await limiter.acquire(access(), ALICE)
    err = await refused(limiter, access(), ALICE)
    assert (err.http_status, err.grpc_status, err.code) == (429, "RESOURCE_EXHAUSTED", -31429)
    assert err.headers == {"Retry-After": "20", "RateLimit-Policy": '"default";q=2;w=40',
                           "RateLimit": '"default";r=0;t=20'}
    clock.advance(12.5)
    err = await refused(limiter, access(), ALICE)
    assert err.headers is not None and err.headers["Retry-After"] == "8"  # 7.5 s, rounded up
    assert sf_item(err.headers["RateLimit"]) == ("default", {"r": 0, "t": 8})
    clock.advance(7.5)
    assert (await limiter.acquire(access(), ALICE)).headers["RateLimit"] == '"default";r=0;t=20'


@pytest.mark.parametrize("rpm, burst, policy", [
    (5, None, '"default";q=1;w=12'),  # a tenth of 5 is 0: at least 1
    (100, None, '"default";q=10;w=6'),
    (7, None, '"default";q=1;w=9'),  # 60/7 = 8.57 s, rounded up
    (600, 600, '"default";q=600;w=60'),
])
async def test_the_default_burst_and_the_policy_window(rpm, burst, policy):
    limiter = Limiter(LimitSettings(requests_per_minute=rpm, burst=burst), counters=LocalCounters(Clock()))
    assert (await limiter.acquire(access(), ALICE)).headers["RateLimit-Policy"] == policy


async def test_every_operation_counts_against_the_bucket():
    """One bucket per (principal, agent) that every operation takes from."""
    limiter = Limiter(LimitSettings(requests_per_minute=60, burst=len(Operation)), counters=LocalCounters(Clock()))
    for op in Operation:
        await limiter.acquire(access(op, request=send_request()), ALICE)
    err = await refused(limiter, access(Operation.CARD), ALICE)
    assert err.headers is not None and err.headers["RateLimit"].startswith('"default";r=0;')


async def test_buckets_are_per_principal_and_per_agent():
    limiter = Limiter(LimitSettings(requests_per_minute=60, burst=1), counters=LocalCounters(Clock()))
    await limiter.acquire(access(agent="echo"), ALICE)
    await refused(limiter, access(agent="echo"), ALICE)
    assert (await limiter.acquire(access(agent="echo"), BOB)).headers["RateLimit"] == '"default";r=0;t=1'
    assert (await limiter.acquire(access(agent="other"), ALICE)).headers["RateLimit"] == '"default";r=0;t=1'


async def test_no_limits_configured_means_no_grant():
    limiter = Limiter(LimitSettings())
    assert await limiter.acquire(access(Operation.STREAM, request=send_request()), ALICE) is NO_GRANT


async def test_per_agent_limits_replace_the_servers_field_by_field():
    """`per_agent`: an agent's own requests_per_minute (with the default burst of that rate), another agent
    keeps the server's; an entry that only sets tasks_per_agent keeps the server's rate."""
    limiter = Limiter(LimitSettings(requests_per_minute=600, burst=50),
                      per_agent={"tiny": LimitSettings(requests_per_minute=20),
                                 "busy": LimitSettings(tasks_per_agent=1)},
                      counters=LocalCounters(Clock()))
    assert (await limiter.acquire(access(agent="tiny"), ALICE)).headers["RateLimit-Policy"] == '"default";q=2;w=6'
    assert (await limiter.acquire(access(agent="echo"), ALICE)).headers["RateLimit-Policy"] == '"default";q=50;w=5'
    busy = await limiter.acquire(access(Operation.SEND, agent="busy", request=send_request()), ALICE)
    assert busy.headers["RateLimit-Policy"] == '"default";q=50;w=5' and busy.release is not None
    await refused(limiter, access(Operation.SEND, agent="busy", request=send_request()), BOB)
    await limiter.acquire(access(Operation.SEND, agent="echo", request=send_request()), BOB)  # no task limit there


def test_bad_limits_are_refused_at_construction():
    with pytest.raises(ValueError, match="limits.agents.x.requests_per_minute"):
        Limiter(LimitSettings(), per_agent={"x": LimitSettings(requests_per_minute=0)})
    with pytest.raises(ValueError, match="streams_per_principal"):
        Limiter(LimitSettings(), per_agent={"x": LimitSettings(streams_per_principal=2)})
    assert resolve(LimitSettings(requests_per_minute=30, burst=4), LimitSettings(burst=9)).burst == 9


# --- the limiter: streams and tasks -----------------------------------------------------------------------


async def test_a_stream_holds_a_slot_until_its_grant_is_done_once():
    """streams_per_principal=1: an open stream (STREAM or SUBSCRIBE) refuses alice's next one with 429 and
    Retry-After; unary calls and bob are not affected; done() twice frees the slot once."""
    counters = LocalCounters(Clock())
    limiter = Limiter(LimitSettings(streams_per_principal=1), counters=counters)
    grant = await limiter.acquire(access(Operation.STREAM, request=send_request()), ALICE)
    assert grant.release is not None and counters.held(streams_key("alice")) == 1
    err = await refused(limiter, access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    assert err.headers == {"Retry-After": "1"}
    assert await limiter.acquire(access(Operation.GET), ALICE) is NO_GRANT
    bob = await limiter.acquire(access(Operation.STREAM, request=send_request()), BOB)
    grant.done()
    grant.done()
    assert counters.held(streams_key("alice")) == 0 and counters.held(streams_key("bob")) == 1
    again = await limiter.acquire(access(Operation.SUBSCRIBE, request=m.SubscribeToTaskRequest(id="t")), ALICE)
    assert counters.held(streams_key("alice")) == 1
    again.done()
    bob.done()
    assert counters.tracked() == 0


async def test_tasks_per_agent_counts_running_tasks_and_sends_in_flight():
    """tasks_per_agent=2 with `running` reporting the engine's runs: a new-task send is refused while 2 run;
    continuing a task and reading are not; with none running, two sends still in flight fill the limit."""
    counters = LocalCounters(Clock())
    runs = {"echo": 2}
    limiter = Limiter(LimitSettings(tasks_per_agent=2, tasks_per_principal=2), running=lambda agent: runs.get(agent, 0),
                      counters=counters)
    err = await refused(limiter, access(Operation.SEND, request=send_request()), ALICE)
    assert err.headers == {"Retry-After": "1"} and "running" in err.message
    await refused(limiter, access(Operation.STREAM, request=send_request()), ALICE)
    assert await limiter.acquire(access(Operation.SEND, request=send_request(task_id="t1")), ALICE) is NO_GRANT
    assert await limiter.acquire(access(Operation.GET), ALICE) is NO_GRANT
    runs["echo"] = 0
    first = await limiter.acquire(access(Operation.SEND, request=send_request()), ALICE)
    second = await limiter.acquire(access(Operation.SEND, request=send_request()), BOB)
    await refused(limiter, access(Operation.SEND, request=send_request()), BOB)  # both still in flight
    first.done()
    assert counters.held(tasks_key("echo")) == 1
    third = await limiter.acquire(access(Operation.SEND, request=send_request()), BOB)
    second.done()
    third.done()
    assert counters.held(tasks_key("echo")) == 0


async def test_an_async_running_counter_is_awaited():
    async def running(agent_id: str) -> int:
        return 1

    limiter = Limiter(LimitSettings(tasks_per_agent=1), running=running)
    await refused(limiter, access(Operation.SEND, request=send_request()), ALICE)


async def test_a_refusal_by_one_limit_gives_back_what_the_others_took():
    """A stream that starts a task: the stream slot is taken, then the task limit refuses; the stream slot is
    free again, and the refusal carries the bucket's fields (the request took its token)."""
    counters = LocalCounters(Clock())
    limiter = Limiter(LimitSettings(requests_per_minute=60, burst=5, streams_per_principal=1, tasks_per_agent=1),
                      running=lambda agent: 1, counters=counters)
    err = await refused(limiter, access(Operation.STREAM, request=send_request()), ALICE)
    assert err.headers == {"Retry-After": "1", "RateLimit-Policy": '"default";q=5;w=5',
                           "RateLimit": '"default";r=4;t=1'}
    assert counters.held(streams_key("alice")) == 0 and counters.tracked() == 1  # only the bucket


async def test_in_process_delegations_take_no_token_and_no_stream_slot():
    """A delegation inside the server (principal kind `internal`) was paid for by the request that started
    its task; the tasks limit still protects the agent. exempt_internal=False counts them like any call."""
    internal = Principal("alice", kind="internal")
    limits = LimitSettings(requests_per_minute=60, burst=1, streams_per_principal=1, tasks_per_agent=1)
    limiter = Limiter(limits, running=lambda agent: 1, counters=LocalCounters(Clock()))
    for _ in range(3):
        assert await limiter.acquire(access(Operation.SUBSCRIBE), internal) is NO_GRANT
    await refused(limiter, access(Operation.SEND, request=send_request()), internal)
    strict = Limiter(limits, counters=LocalCounters(Clock()), exempt_internal=False)
    await strict.acquire(access(Operation.GET), internal)
    await refused(strict, access(Operation.GET), internal)


# --- through the pipeline: a stream's slot is freed when it ends, however it ends -----------------------------


async def test_closing_a_stream_early_frees_its_slot_once():
    """A stream read for one event and then closed (the client went away) frees its slot, once: closing it
    again frees nothing more, and a stream whose service call fails gives its slot back too."""
    counters = LocalCounters(Clock())
    service, serve = stream_pipeline(counters)
    key = streams_key("alice")
    outcome = await serve()
    assert await outcome.events.__anext__() == 1
    with pytest.raises(RateLimitedError):
        await serve()
    assert counters.held(key) == 1
    await outcome.events.aclose()
    assert counters.held(key) == 0
    again = await serve()  # the slot is free: a new stream is accepted and holds exactly one slot
    assert await again.events.__anext__() == 1
    await outcome.events.aclose()  # closing the first one again gives back nothing of the second's
    assert counters.held(key) == 1
    await again.events.aclose()
    assert counters.held(key) == 0
    service.fail = TaskNotFoundError()
    with pytest.raises(TaskNotFoundError):
        await serve()
    assert counters.tracked() == 0


async def test_a_stream_dropped_before_its_first_event_frees_its_slot():
    """A stream the binding never iterates (the client hung up before the first event) never runs the
    pipeline's `finally`; its grant gives the slot back when it is collected, on the loop, once."""
    counters = LocalCounters(Clock())
    _, serve = stream_pipeline(counters)
    key = streams_key("alice")
    outcome = await serve()
    assert counters.held(key) == 1
    del outcome  # dropped unread: nothing ever calls Grant.done
    await asyncio.sleep(0)  # one loop turn: the release was handed to the loop with call_soon
    assert counters.held(key) == 0
    kept = await serve()
    await kept.events.__anext__()
    assert counters.held(key) == 1
    await kept.events.aclose()
    del kept
    await asyncio.sleep(0)
    assert counters.held(key) == 0 and counters.tracked() == 0


# --- end to end: a live server ----------------------------------------------------------------------------


class HeaderAuthenticator:
    """The principal is what `X-Test-User` (gRPC metadata `x-test-user`) says; without it, 401."""

    async def authenticate(self, acc: Access, credentials: Credentials) -> Principal:
        user = credentials.headers.get(USER_METADATA)
        if not user:
            raise UnauthenticatedError(f"send {USER_HEADER}")
        return Principal(user, kind="token")


class WatchedCounters(LocalCounters):
    """LocalCounters whose releases a test can wait for (the server releases on its own thread)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self.changed = threading.Condition()

    def release(self, key: str, token: str) -> None:
        super().release(key, token)
        with self.changed:
            self.changed.notify_all()

    def wait_free(self, key: str, timeout: float = WAIT) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.held(key) == 0, timeout)


def limited_app(gate: Gate) -> Parley:
    app = Parley()

    @app.agent(id="quick", description="Answers at once", default=True)
    async def quick(ctx: RunContext):
        yield f"quick: {ctx.text}"

    @app.agent(id="slow", description="Says it is working, waits for the gate, then answers")
    async def slow(ctx: RunContext):
        yield Status(m.TaskState.WORKING, "waiting")
        await gate.wait()
        yield "done"

    return app


@dataclass
class Live:
    srv: LiveServer
    runtime: Runtime
    counters: WatchedCounters
    clock: Clock
    gate: Gate
    grpc_port: int | None

    def url(self, agent: str) -> str:
        return f"{self.srv.url}/a2a/{agent}"


@pytest.fixture
def live() -> Iterator[Callable[..., Live]]:
    """Factory: `live(limits, grpc=False, tasks=False)` serves the test agents with a Limiter over
    WatchedCounters and a hand-moved clock; `tasks=True` wires `running` to the engine's runs."""
    started: list[Live] = []

    def start(limits: LimitSettings, *, grpc: bool = False, tasks: bool = False) -> Live:
        clock, gate = Clock(), Gate()
        counters = WatchedCounters(clock)
        app = limited_app(gate)
        port = free_port() if grpc else None
        app.settings.grpc_port = port
        runtimes: list[Runtime] = []

        def running(agent_id: str) -> int:  # what the runtime will pass: the engine's runs of that agent
            return sum(1 for run in list(runtimes[0].engine.runs.values()) if run.record.agent_id == agent_id)

        limiter = Limiter(limits, counters=counters, running=running if tasks else None)
        runtime = app.runtime(authenticator=HeaderAuthenticator(), limiter=limiter)
        runtimes.append(runtime)
        asgi = create_app(runtime)
        app.asgi = lambda settings=None: asgi  # type: ignore[method-assign]
        one = Live(LiveServer(app).start(), runtime, counters, clock, gate, port)
        started.append(one)
        return one

    yield start
    for one in started:
        one.gate.open()  # let parked agents finish so the server can stop
        one.srv.stop()


def message(text: str, task_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        msg["taskId"] = task_id
    return msg


def headers_of(user: str) -> dict[str, str]:
    return {"A2A-Version": "1.0", USER_HEADER: user}


async def jsonrpc(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], user: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await http.post(url, json=body, headers=headers_of(user))


async def list_tasks(http: httpx.AsyncClient, binding: str, url: str, user: str) -> httpx.Response:
    if binding == "JSONRPC":
        return await jsonrpc(http, url, "ListTasks", {}, user)
    return await http.get(f"{url}/tasks", headers=headers_of(user))


def error_reason(binding: str, resp: httpx.Response) -> tuple[int | None, str | None]:
    """(JSON-RPC error code or None, ErrorInfo reason) of an error response."""
    if binding == "JSONRPC":
        err = resp.json()["error"]
        infos = [d.get("reason") for d in err.get("data") or [] if d.get("@type") == ERROR_INFO]
        return err["code"], infos[0] if infos else None
    infos = [d.get("reason") for d in resp.json()["error"].get("details") or [] if d.get("@type") == ERROR_INFO]
    return None, infos[0] if infos else None


@asynccontextmanager
async def stream(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any],
                 user: str) -> AsyncIterator[httpx.Response]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.stream("POST", url, json=body, headers=headers_of(user)) as resp:
        yield resp


def final_state(events: list[dict[str, Any]]) -> str:
    last = events[-1]["result"]
    return (last.get("statusUpdate") or last.get("task"))["status"]["state"]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_request_after_the_burst_gets_429_with_retry_after_and_the_ratelimit_fields(live, binding):
    """3 requests a minute, burst 3: the first three ListTasks of a principal pass, each telling what is left
    (r=2, 1, 0; the next token in 20 s); the fourth is HTTP 429 with Retry-After: 20, the same fields and
    the RATE_LIMITED reason (JSON-RPC code -31429); 19 s later still refused (Retry-After: 1); at 20 s it
    passes again."""
    srv = live(LimitSettings(requests_per_minute=3, burst=3))
    url = srv.url("quick")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        for left in (2, 1, 0):
            resp = await list_tasks(http, binding, url, "alice")
            assert resp.status_code == 200, resp.text
            assert resp.headers["ratelimit-policy"] == '"default";q=3;w=60'
            assert resp.headers["ratelimit"] == f'"default";r={left};t=20'
            assert "retry-after" not in resp.headers
        resp = await list_tasks(http, binding, url, "alice")
        assert resp.status_code == 429, resp.text
        assert resp.headers["retry-after"] == "20"
        assert resp.headers["ratelimit-policy"] == '"default";q=3;w=60'
        assert resp.headers["ratelimit"] == '"default";r=0;t=20'
        assert error_reason(binding, resp) == ((-31429 if binding == "JSONRPC" else None), "RATE_LIMITED")
        srv.clock.advance(19)
        resp = await list_tasks(http, binding, url, "alice")
        assert (resp.status_code, resp.headers["retry-after"], resp.headers["ratelimit"]) == (
            429, "1", '"default";r=0;t=1')
        srv.clock.advance(1)
        resp = await list_tasks(http, binding, url, "alice")
        assert resp.status_code == 200 and resp.headers["ratelimit"] == '"default";r=0;t=20'


async def test_two_principals_have_separate_buckets(live):
    """alice spends her burst on `quick` and is refused; bob's first request there passes with his full
    bucket; alice's bucket on another agent is untouched."""
    srv = live(LimitSettings(requests_per_minute=60, burst=2))
    async with httpx.AsyncClient(timeout=WAIT) as http:
        assert [(await jsonrpc(http, srv.url("quick"), "ListTasks", {}, "alice")).status_code
                for _ in range(3)] == [200, 200, 429]
        bob = await jsonrpc(http, srv.url("quick"), "ListTasks", {}, "bob")
        assert bob.status_code == 200 and bob.headers["ratelimit"] == '"default";r=1;t=1'
        other = await jsonrpc(http, srv.url("slow"), "ListTasks", {}, "alice")
        assert other.status_code == 200 and other.headers["ratelimit"] == '"default";r=1;t=1'
        assert (await jsonrpc(http, srv.url("quick"), "ListTasks", {}, "alice")).status_code == 429


@needs("grpc", "grpc")
async def test_grpc_refuses_with_resource_exhausted_and_shares_the_bucket(live):
    """Over gRPC (tenant = agent) the third ListTasks of a burst of 2 is RESOURCE_EXHAUSTED with the
    RATE_LIMITED ErrorInfo; the bucket is the principal's on that agent whatever the binding, so JSON-RPC
    is refused too."""
    import grpc.aio

    from parley.grpc import a2a_pb2_grpc, convert

    srv = live(LimitSettings(requests_per_minute=60, burst=2), grpc=True)
    metadata = [("a2a-version", "1.0"), (USER_METADATA, "alice")]
    request = convert.encode_request(Operation.LIST, m.ListTasksRequest(), "quick")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
        rpc = getattr(a2a_pb2_grpc.A2AServiceStub(channel), convert.RPCS[Operation.LIST])
        for _ in range(2):
            await rpc(request, metadata=metadata, timeout=WAIT)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await rpc(request, metadata=metadata, timeout=WAIT)
    exc = caught.value
    assert exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert [info.reason for info in grpc_error_infos(exc)] == ["RATE_LIMITED"]
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await jsonrpc(http, srv.url("quick"), "ListTasks", {}, "alice")
    assert resp.status_code == 429 and resp.headers["ratelimit"] == '"default";r=0;t=1'


async def test_an_open_stream_counts_against_streams_per_principal_and_its_end_frees_it(live):
    """streams_per_principal=1: while alice's SendStreamingMessage is open (its agent waits), her second
    stream and a SubscribeToTask are 429 with Retry-After; her unary calls and bob's stream pass. Once her
    stream ends (the task completes) the slot is free and a new stream of hers is served. Stream responses
    carry the RateLimit fields too."""
    srv = live(LimitSettings(requests_per_minute=600, burst=100, streams_per_principal=1))
    slow, quick = srv.url("slow"), srv.url("quick")
    key = streams_key("alice")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        async with stream(http, slow, "SendStreamingMessage", {"message": message("wait")}, "alice") as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            assert resp.headers["ratelimit"] == '"default";r=99;t=1'
            sse = Sse(resp)
            first = await sse.next()
            assert first is not None
            task_id = first["result"]["task"]["id"]
            assert srv.counters.held(key) == 1

            second = await jsonrpc(http, quick, "SendStreamingMessage", {"message": message("again")}, "alice")
            assert second.status_code == 429 and second.headers["retry-after"] == "1"
            assert second.json()["error"]["code"] == -31429
            assert second.headers["ratelimit"] == '"default";r=99;t=1'  # its own bucket, on another agent
            sub = await jsonrpc(http, slow, "SubscribeToTask", {"id": task_id}, "alice")
            assert sub.status_code == 429
            assert sub.headers["ratelimit"] == '"default";r=98;t=1'  # a refused request took its token
            assert (await jsonrpc(http, slow, "GetTask", {"id": task_id}, "alice")).status_code == 200
            async with stream(http, quick, "SendStreamingMessage", {"message": message("bob")}, "bob") as theirs:
                assert theirs.status_code == 200
                assert final_state(await Sse(theirs).rest()) == "TASK_STATE_COMPLETED"

            srv.gate.open()
            assert final_state([first, *await sse.rest()]) == "TASK_STATE_COMPLETED"
        assert await asyncio.to_thread(srv.counters.wait_free, key), "the stream's slot was not released"
        async with stream(http, quick, "SendStreamingMessage", {"message": message("now")}, "alice") as resp:
            assert resp.status_code == 200
            assert final_state(await Sse(resp).rest()) == "TASK_STATE_COMPLETED"
    assert await asyncio.to_thread(srv.counters.wait_free, key)


async def test_a_stream_the_client_closes_early_frees_its_slot(live):
    """alice reads the first event of a stream whose agent waits, then hangs up: the server notices, the
    slot is released (while the task still runs), and her next stream is served."""
    srv = live(LimitSettings(streams_per_principal=1))
    key = streams_key("alice")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        async with stream(http, srv.url("slow"), "SendStreamingMessage", {"message": message("bye")}, "alice") as r:
            assert r.status_code == 200
            assert await Sse(r).next() is not None
            refused_now = await jsonrpc(http, srv.url("quick"), "SendStreamingMessage", {"message": message("x")},
                                        "alice")
            assert refused_now.status_code == 429  # the slot is held while the stream is open
        # leaving the block closes the response before its end: the client went away
    assert await asyncio.to_thread(srv.counters.wait_free, key), "closing the stream did not free its slot"
    assert srv.runtime.engine.runs, "the task should still be running: only the stream ended"
    async with httpx.AsyncClient(timeout=WAIT) as http:
        async with stream(http, srv.url("quick"), "SendStreamingMessage", {"message": message("y")}, "alice") as r:
            assert r.status_code == 200
            assert final_state(await Sse(r).rest()) == "TASK_STATE_COMPLETED"


async def test_tasks_per_agent_refuses_a_new_task_while_the_limit_runs_and_accepts_once_one_finishes(live):
    """tasks_per_agent=1, `running` counting the engine's runs: alice starts a task on `slow` and gets it back
    at once (returnImmediately: no request is in flight any more, only the run counts); bob's new task there
    is 429 with Retry-After and leaves no task behind; another agent is not limited by it. When alice's
    task completes, bob's new task is accepted."""
    srv = live(LimitSettings(tasks_per_agent=1), tasks=True)
    slow, quick = srv.url("slow"), srv.url("quick")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await jsonrpc(http, slow, "SendMessage",
                             {"message": message("first"), "configuration": {"returnImmediately": True}}, "alice")
        assert resp.status_code == 200, resp.text
        task_id = resp.json()["result"]["task"]["id"]
        assert await asyncio.to_thread(srv.gate.reached.wait, WAIT)

        bob = await jsonrpc(http, slow, "SendMessage", {"message": message("second")}, "bob")
        assert bob.status_code == 429 and bob.headers["retry-after"] == "1"
        assert bob.json()["error"]["code"] == -31429
        assert (await jsonrpc(http, slow, "ListTasks", {}, "bob")).json()["result"]["tasks"] == []
        other = await jsonrpc(http, quick, "SendMessage", {"message": message("elsewhere")}, "bob")
        assert other.status_code == 200 and other.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        async with stream(http, slow, "SubscribeToTask", {"id": task_id}, "alice") as sub:
            assert sub.status_code == 200
            sse = Sse(sub)
            assert await sse.next() is not None
            srv.gate.open()
            assert final_state(await sse.rest()) == "TASK_STATE_COMPLETED"

        again = await jsonrpc(http, slow, "SendMessage", {"message": message("second")}, "bob")
        assert again.status_code == 200, again.text
        assert again.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert srv.counters.held(tasks_key("slow")) == 0
