"""One task, four bindings: create it over one, then get, resubscribe to and cancel it over each other one.

The bindings are JSON-RPC 1.0, JSON-RPC 0.3, HTTP+JSON 1.0 and HTTP+JSON 0.3, all
served by the same Parley server for the same agent; Parley's client speaks each.
The agent emits one artifact chunk and then waits until it is canceled, so every
step is observed, never timed.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from rest_support import SLOW_ARTIFACT_ID, SLOW_FIRST, WAIT, slow_app

from parley.client import A2AClient, user_message
from parley.client.jsonrpc import JsonRpcTransport
from parley.client.rest import RestTransport
from parley.protocol import models as m
from parley.protocol.operations import Operation
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


def chunk_text(ev: m.StreamEvent) -> str:
    assert isinstance(ev, m.TaskArtifactUpdateEvent)
    return "".join(p.text or "" for p in ev.artifact.parts)


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
        stream = a.transport.stream(Operation.STREAM, m.SendMessageRequest(message=user_message("go slowly")))
        seen = []
        async with asyncio.timeout(WAIT):
            async for item in stream:
                seen.append(item)
                if isinstance(item.event, m.TaskArtifactUpdateEvent):
                    break
        await stream.aclose()
        task = seen[0].event
        assert isinstance(task, m.Task)
        assert chunk_text(seen[-1].event) == SLOW_FIRST
        assert all(item.event_id is not None for item in seen)

        # Get over `reader`.
        got = await asyncio.wait_for(b.get(task.id), WAIT)
        assert got.id == task.id and got.context_id == task.context_id
        assert got.status.state is S.WORKING
        assert [a.artifact_id for a in got.artifacts] == [SLOW_ARTIFACT_ID]
        assert "".join(p.text or "" for p in got.artifacts[0].parts) == SLOW_FIRST
        assert [msg.text() for msg in got.history] == ["go slowly"]

        # Resubscribe over `reader` from the creator's first event id: the same events, then live ones.
        replay = b.resubscribe(task.id, last_event_id=seen[0].event_id)
        replayed = []
        async with asyncio.timeout(WAIT):
            async for ev in replay:
                replayed.append(ev)
                if isinstance(ev, m.TaskArtifactUpdateEvent):
                    break
        assert [type(ev) for ev in replayed] == [type(item.event) for item in seen[1:]]
        assert chunk_text(replayed[-1]) == SLOW_FIRST

        # Resubscribe over `reader` without an id: the snapshot first.
        resub = b.resubscribe(task.id)
        first = await asyncio.wait_for(anext(resub), WAIT)
        assert isinstance(first, m.Task) and first.id == task.id and first.status.state is S.WORKING

        # Cancel over `reader`: both open streams see it and close.
        canceled = await asyncio.wait_for(b.cancel(task.id), WAIT)
        assert canceled.id == task.id and canceled.status.state is S.CANCELED
        async with asyncio.timeout(WAIT):
            rest = [ev async for ev in resub]
            more = [ev async for ev in replay]
        assert isinstance(rest[-1], m.TaskStatusUpdateEvent) and rest[-1].status.state is S.CANCELED
        assert isinstance(more[-1], m.TaskStatusUpdateEvent) and more[-1].status.state is S.CANCELED

        # And the creator sees the same final task.
        final = await asyncio.wait_for(a.get(task.id), WAIT)
        assert final.status.state is S.CANCELED
        assert [x.artifact_id for x in final.artifacts] == [SLOW_ARTIFACT_ID]
    assert not gate.opened
