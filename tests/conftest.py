"""Shared fixtures: real Parley servers on 127.0.0.1 (see tests/support.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from parley.serve import default_app
from support import LiveServer, free_port, rpc, running


@pytest.fixture
def serve() -> Iterator[Callable[..., LiveServer]]:
    """Factory: `serve(app)` starts a live server that stops after the test."""
    started: list[LiveServer] = []

    def start(app, port: int | None = None) -> LiveServer:
        srv = LiveServer(app, port).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture
def server(serve: Callable[..., LiveServer]) -> LiveServer:
    """The default server (built-in agents, in-memory store) on 127.0.0.1."""
    return serve(default_app(None))


__all__ = ["LiveServer", "free_port", "rpc", "running"]
