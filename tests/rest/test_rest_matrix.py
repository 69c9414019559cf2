"""One task, four bindings: create it over one, then get, resubscribe to and cancel it over each other one.

The bindings are JSON-RPC 1.0, JSON-RPC 0.3, HTTP+JSON 1.0 and HTTP+JSON 0.3, all
served by the same Parley server for the same agent; Parley's client speaks each.
The agent emits one artifact chunk and then waits until it is canceled, so every
step is observed, never timed.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from rest_support import (
    WAIT,
    create_slow_task,
    follow_and_cancel_over,
    slow_app,
)

from parley.client import A2AClient
from parley.client.jsonrpc import JsonRpcTransport
from parley.client.rest import RestTransport
from parley.protocol import models as m
from support import Gate

S = m.TaskState
BINDINGS = {
    "jsonrpc-1.0": (JsonRpcTransport, "1.0"),
    "jsonrpc-0.3": (JsonRpcTransport, "0.3"),
    "rest-1.0": (RestTransport, "1.0"),
    "rest-0.3": (RestTransport, "0.3"),
}
PAIRS = list(itertools.product(BINDINGS, BINDINGS))


@asynccontextmanager
async def client_for(http: httpx.AsyncClient, url: str, binding: str) -> AsyncIterator[A2AClient]:
    cls, version = BINDINGS[binding]
    yield A2AClient(cls(http, url, version))


@pytest.mark.parametrize(("creator", "reader"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
async def test_create_over_one_binding_and_follow_over_another(serve, creator, reader):
    gate = Gate()
    srv = serve(slow_app(gate))
    url = f"{srv.url}/a2a/slow"
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(WAIT, read=WAIT)) as http,
        client_for(http, url, creator) as a,
        client_for(http, url, reader) as b,
    ):
        # Create over `creator`: stream until the first chunk, with the SSE ids, then hang up.
        seen = await create_slow_task(a)
        assert all(item.event_id is not None for item in seen)
        # Resubscribe over `reader` from the creator's first event id.
        await follow_and_cancel_over(b, a, seen, replay_from=seen[0].event_id)
    assert not gate.opened
