"""The binding matrix with gRPC: create a task over one binding, then get, resubscribe to and cancel it over another.

tests/rest/test_rest_matrix.py covers JSON-RPC 1.0/0.3 and HTTP+JSON 1.0/0.3 among
themselves. Here gRPC 1.0 joins: a task created over gRPC is read, resubscribed to
and canceled over each HTTP binding, a task created over each HTTP binding is read,
resubscribed to and canceled over gRPC, and gRPC with itself. The server is one
Parley app with `Settings.grpc_port` set, so its own lifespan starts the gRPC server
(what `parley serve --grpc-port` does); every client is Parley's own
`A2AClient.connect(url, version=..., bindings=[...])`, which picks the interface from
the agent's card. The agent (tests/rest/rest_support.slow_app) emits one artifact
chunk and then waits until it is canceled, so every step is observed, never timed.

gRPC streams carry no event ids (see parley.client.grpc). Where the HTTP matrix
replays "after the creator's first event id", a gRPC creator has none to give: the
replay then starts after entry 1 of the task's log, the task itself, which is the id
an HTTP creator's first event carries (asserted below).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for _sub in ("grpc", "rest"):
    if str(_TESTS / _sub) not in sys.path:
        sys.path.append(str(_TESTS / _sub))

# grpc_support first: without grpcio it skips this module with the reason (and fails it under CI=true).
from grpc_support import free_port

# isort: split
from rest_support import SLOW_ARTIFACT_ID, SLOW_FIRST, WAIT, slow_app

from parley.client import A2AClient, user_message
from parley.protocol import models as m
from parley.protocol.operations import Operation
from support import Gate

S = m.TaskState
GRPC = "grpc-1.0"
HTTP = {
    "jsonrpc-1.0": ("JSONRPC", "1.0"),
    "jsonrpc-0.3": ("JSONRPC", "0.3"),
    "rest-1.0": ("HTTP+JSON", "1.0"),
    "rest-0.3": ("HTTP+JSON", "0.3"),
}
BINDINGS = {**HTTP, GRPC: ("GRPC", "1.0")}
PAIRS = [(GRPC, other) for other in HTTP] + [(other, GRPC) for other in HTTP] + [(GRPC, GRPC)]
TASK_ENTRY_ID = "1"  # the task's creation is entry 1 of its log (docs/architecture.md, "One event log per task")


async def connect(url: str, binding: str) -> A2AClient:
    """Parley's client for `binding`, chosen from the agent's card like any caller would."""
    name, version = BINDINGS[binding]
    client = await A2AClient.connect(url, version=version, bindings=[name])
    assert (client.binding, client.version) == (name, version)
    return client


def chunk_text(ev: m.StreamEvent) -> str:
    assert isinstance(ev, m.TaskArtifactUpdateEvent), ev
    return "".join(p.text or "" for p in ev.artifact.parts)


@pytest.fixture
def grpc_server(serve):
    """The slow agent's app served over HTTP and, through Settings.grpc_port, over gRPC."""
    gate = Gate()
    app = slow_app(gate)
    app.settings.grpc_port = free_port()
    srv = serve(app)
    yield srv, gate, app.settings.grpc_port
    assert not gate.opened  # every task here ends by being canceled, never by the gate


async def test_card_offers_grpc_next_to_the_http_bindings(grpc_server):
    srv, _, port = grpc_server
    async with await connect(f"{srv.url}/a2a/slow", GRPC) as client:
        offered = {(i.protocol_binding, i.protocol_version) for i in client.card.supported_interfaces}
        assert offered == set(BINDINGS.values())
        grpc_iface = next(i for i in client.card.supported_interfaces if i.protocol_binding == "GRPC")
        assert grpc_iface.url == f"127.0.0.1:{port}" and grpc_iface.tenant == "slow"


@pytest.mark.parametrize(("creator", "reader"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
async def test_create_over_one_binding_and_follow_over_another(grpc_server, creator, reader):
    srv, _, _ = grpc_server
    url = f"{srv.url}/a2a/slow"
    async with await connect(url, creator) as a, await connect(url, reader) as b:
        # Create over `creator`: stream until the first chunk, then hang up.
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
        if creator == GRPC:
            assert all(item.event_id is None for item in seen)  # gRPC has no per-message id
        else:
            assert all(item.event_id is not None for item in seen)
            assert seen[0].event_id == TASK_ENTRY_ID
        replay_from = seen[0].event_id or TASK_ENTRY_ID

        # Get over `reader`.
        got = await asyncio.wait_for(b.get(task.id), WAIT)
        assert got.id == task.id and got.context_id == task.context_id
        assert got.status.state is S.WORKING
        assert [x.artifact_id for x in got.artifacts] == [SLOW_ARTIFACT_ID]
        assert "".join(p.text or "" for p in got.artifacts[0].parts) == SLOW_FIRST
        assert [msg.text() for msg in got.history] == ["go slowly"]

        # Resubscribe over `reader` after the task's first entry: the same events, then live ones.
        replay = b.resubscribe(task.id, last_event_id=replay_from)
        replayed = []
        async with asyncio.timeout(WAIT):
            async for ev in replay:
                replayed.append(ev)
                if isinstance(ev, m.TaskArtifactUpdateEvent):
                    break
        assert [type(ev) for ev in replayed] == [type(item.event) for item in seen[1:]]
        assert all(ev.task_id == task.id for ev in replayed)
        assert chunk_text(replayed[-1]) == SLOW_FIRST

        # Resubscribe over `reader` without an id: the snapshot first.
        resub = b.resubscribe(task.id)
        first = await asyncio.wait_for(anext(resub), WAIT)
        assert isinstance(first, m.Task) and first.id == task.id and first.status.state is S.WORKING
        assert [x.artifact_id for x in first.artifacts] == [SLOW_ARTIFACT_ID]

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
        assert [msg.text() for msg in final.history] == ["go slowly"]
