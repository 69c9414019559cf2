"""The real PostgreSQL and Redis the cluster tests use (never mocks): where they are, and a clean
namespace per test.

The machine runs PostgreSQL on 127.0.0.1:5432 (trust auth, database `test`) and Redis on 6379;
`PARLEY_TEST_POSTGRES` and `PARLEY_TEST_REDIS` point elsewhere. Without the service a developer's
run skips the test with the reason; under CI=true it FAILS (the CI machine runs both).

Each test gets its own PostgreSQL schema (the URL carries `?search_path=<schema>`, which asyncpg
passes to the server) and its own Redis key prefix, removed afterwards.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import pytest

from support import in_ci

POSTGRES = os.environ.get("PARLEY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("PARLEY_TEST_REDIS", "redis://127.0.0.1:6379/0")
T = TypeVar("T")


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2):
            return True
    except OSError:
        return False


def _missing(service: str, url: str) -> NoReturn:
    __tracebackhide__ = True
    message = f"{service} is not reachable at {url}"
    if in_ci():
        pytest.fail(f"CI=true and {message}: the CI machine runs it; these tests need the real service",
                    pytrace=False)
    pytest.skip(f"{message} (set CI=true to make this a failure)")


def require_postgres() -> str:
    """The PostgreSQL server URL; skips the test without it (fails under CI=true)."""
    __tracebackhide__ = True
    if not _reachable(POSTGRES, 5432):
        _missing("PostgreSQL", POSTGRES)
    return POSTGRES


def require_redis() -> str:
    """The Redis server URL; skips the test without it (fails under CI=true)."""
    __tracebackhide__ = True
    if not _reachable(REDIS, 6379):
        _missing("Redis", REDIS)
    return REDIS


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, even inside a running event loop (in a thread)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def unique(prefix: str) -> str:
    """A name no other test uses (schema, key prefix)."""
    return f"{prefix}_{secrets.token_hex(5)}"


async def _create_schema(schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    finally:
        await conn.close()


async def _drop_schema(schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


class PostgresSchema:
    """A fresh schema on the test PostgreSQL; `url` selects it."""

    def __init__(self) -> None:
        self.name = unique("parley_t")
        sep = "&" if "?" in POSTGRES else "?"
        self.url = f"{POSTGRES}{sep}search_path={self.name}"

    def create(self) -> PostgresSchema:
        run_sync(_create_schema(self.name))
        return self

    def drop(self) -> None:
        run_sync(_drop_schema(self.name))


async def _drop_keys(prefix: str) -> None:
    import redis.asyncio as redis

    client = redis.from_url(REDIS)
    try:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def drop_redis_keys(prefix: str) -> None:
    """Remove every Redis key a test made under `prefix`."""
    run_sync(_drop_keys(prefix))


__all__ = ["POSTGRES", "REDIS", "PostgresSchema", "drop_redis_keys", "require_postgres", "require_redis",
           "run_sync", "unique"]
