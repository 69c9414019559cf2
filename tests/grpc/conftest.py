"""Fixtures for the gRPC tests: a Parley server serving HTTP (the shared `serve` fixture) and gRPC.

grpc_support is imported inside the fixtures: without grpcio each test module skips itself with
the reason (grpc_support does that at import), which a conftest cannot do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class GrpcLive:
    """A live Parley server: HTTP at `http.url`, gRPC at `target` (host:port)."""

    http: Any  # tests/conftest.py's LiveServer
    target: str
    gate: Any  # grpc_support.Gate


@pytest.fixture
def gate() -> Iterator[Any]:
    from support import Gate

    g = Gate()
    yield g
    g.open()  # let slow agents finish before the server stops


@pytest.fixture
def grpc_live(serve: Callable[..., Any], gate: Any) -> GrpcLive:
    from grpc_support import free_port, grpc_app, with_grpc

    port = free_port()
    http = serve(with_grpc(grpc_app(gate), port))
    return GrpcLive(http=http, target=f"127.0.0.1:{port}", gate=gate)


@pytest.fixture
async def parley_client(grpc_live: GrpcLive) -> AsyncIterator[Callable[..., object]]:
    """Factory: `parley_client(tenant)` is an A2AClient over gRPC for that agent (closed after the test)."""
    from parley.client.client import A2AClient
    from parley.client.grpc import GrpcTransport

    made: list[A2AClient] = []

    def make(tenant: str | None = None, **kwargs: object) -> A2AClient:
        client = A2AClient(GrpcTransport(None, grpc_live.target, "1.0", tenant=tenant, **kwargs))
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
