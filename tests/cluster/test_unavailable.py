"""A backend that cannot be reached is a retryable 503, not a 500 (docs/operations.md, "Health and
stopping"): here the shared rate-limit counters point at a Redis port nothing listens on (a real
redis-py client, a real refused connection). JSON-RPC answers HTTP 503 with Retry-After and the
UNAVAILABLE error (-31503), the HTTP+JSON binding 503 with a google.rpc.Status (A2A 1.0 section 11.6)."""

from __future__ import annotations

import asyncio

import httpx

from parley.agents.builtin import builtin_agents
from parley.protocol.errors import ServiceUnavailableError
from parley.runtime import Runtime
from parley.security.ratelimit import Limiter
from parley.security.redis_counters import RedisCounters
from parley.server.app import create_app
from parley.settings import LimitSettings, Settings
from parley.tasks.store import StoreError, unavailable
from support import free_port


def test_unreachable_redis_counters_make_requests_503_with_retry_after() -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"

    async def scenario() -> None:
        counters = RedisCounters(dead, namespace="t_unavailable")
        limiter = Limiter(LimitSettings(requests_per_minute=60), counters=counters)
        runtime = Runtime({a.id: a for a in builtin_agents()}, settings=Settings(db="memory"), limiter=limiter)
        app = create_app(runtime)
        await runtime.start()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
                body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}}
                r = await client.post("/a2a/echo", json=body, headers={"A2A-Version": "1.0"})
                assert r.status_code == 503
                assert r.headers["retry-after"] == "1"
                assert r.json()["error"]["code"] == ServiceUnavailableError.code
                assert r.json()["id"] == 7
                rest = await client.get("/a2a/echo/tasks/x", headers={"A2A-Version": "1.0"})
                assert rest.status_code == 503
                assert rest.json()["error"]["status"] == "UNAVAILABLE"
        finally:
            await runtime.stop()
            await counters.close()

    asyncio.run(scenario())


def test_what_counts_as_unavailable() -> None:
    """Connection failures of the drivers and the OS are 'unavailable'; a bug is not."""
    import asyncpg
    import redis.exceptions

    assert unavailable(StoreError("x"))
    assert unavailable(ConnectionRefusedError())
    assert unavailable(asyncpg.exceptions.ConnectionDoesNotExistError("gone"))
    # pg_terminate_backend (a failover, a proxy restart): 57P01, and asyncpg's state error on the connection it
    # cut (issue 27: a send meeting a dropped connection answered -32603 instead of -31503, then -32013)
    assert unavailable(asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"))
    assert unavailable(asyncpg.exceptions._base.InternalClientError("cannot switch to state 15"))
    assert unavailable(redis.exceptions.ConnectionError("refused"))
    assert not unavailable(ValueError("a bug"))
    assert not unavailable(asyncpg.exceptions.UniqueViolationError("dup"))
