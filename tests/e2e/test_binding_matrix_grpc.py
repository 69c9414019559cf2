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
from rest_support import create_slow_task, follow_and_cancel_over, slow_app

from parley.client import A2AClient
from parley.protocol import models as m
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
        seen = await create_slow_task(a)
        if creator == GRPC:
            assert all(item.event_id is None for item in seen)  # gRPC has no per-message id
        else:
            assert all(item.event_id is not None for item in seen)
            assert seen[0].event_id == TASK_ENTRY_ID
        await follow_and_cancel_over(b, a, seen, replay_from=seen[0].event_id or TASK_ENTRY_ID)
