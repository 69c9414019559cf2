"""Shared fixtures: real Parley servers on 127.0.0.1 (see tests/support.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from parley.serve import default_app
from support import LiveServer, free_port, require, rpc, running, stopped_at_end


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs_extra(module, extra): the test needs `module` of the parley-a2a[extra] extra; skipped "
        "without it, failed under CI=true (made by support.needs)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """support.needs: a test that needs an extra skips without it, or fails under CI=true."""
    for mark in item.iter_markers("needs_extra"):
        require(*mark.args)


@pytest.fixture
def serve() -> Iterator[Callable[..., LiveServer]]:
    """Factory: `serve(app)` starts a live server that stops after the test."""
    with stopped_at_end(lambda srv: srv.stop()) as started:
        def start(app, port: int | None = None) -> LiveServer:
            srv = LiveServer(app, port).start()
            started.append(srv)
            return srv

        yield start


@pytest.fixture
def server(serve: Callable[..., LiveServer]) -> LiveServer:
    """The default server (built-in agents, in-memory store) on 127.0.0.1."""
    return serve(default_app(None))


__all__ = ["LiveServer", "free_port", "rpc", "running"]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test (tests/services.py)."""
    from services import PostgresSchema, require_postgres

    require_postgres()
    schema = PostgresSchema().create()
    try:
        yield schema.url
    finally:
        schema.drop()


@pytest.fixture
def redis_namespace() -> Iterator[tuple[str, str]]:
    """(the Redis URL, a key prefix no other test uses); the prefix's keys are removed after the test."""
    from services import drop_redis_keys, require_redis, unique

    url = require_redis()
    prefix = unique("parley_t")
    try:
        yield url, prefix
    finally:
        drop_redis_keys(prefix)
