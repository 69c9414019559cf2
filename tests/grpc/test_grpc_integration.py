"""`Settings.grpc_port` end to end: the app's own lifespan serves gRPC and its cards advertise it.

These need the integration in server/app.py (start/stop in the lifespan), server/cards.py (a
`GRPC` 1.0 interface: url `host:port`, tenant = agent id) and parley/client (import
parley.client.grpc so that the binding registers; pass the interface's tenant to the
transport). Until then they are expected to fail (non-strict xfail).
"""

from __future__ import annotations

import httpx
import pytest
from grpc_support import CHUNKS, WAIT, artifact_text, free_port, grpc_app

from support import require

# isort: split
# (grpc_support first: without grpcio it skips this module, or fails it under CI=true)
import grpc.aio

from parley.client.client import A2AClient
from parley.client.grpc import GrpcTransport
from parley.protocol import models as m


@pytest.fixture
def configured(serve, gate):
    app = grpc_app(gate)
    app.settings.grpc_port = free_port()
    live = serve(app)
    return live, f"127.0.0.1:{app.settings.grpc_port}"


async def test_settings_grpc_port_serves_grpc(configured):
    _, target = configured
    client = A2AClient(GrpcTransport(None, target, "1.0", tenant="chunks", timeout=WAIT))
    try:
        task = await client.send("hello")
    finally:
        await client.close()
    assert task.status.state is m.TaskState.COMPLETED and artifact_text(task) == "".join(CHUNKS)


async def test_card_lists_the_grpc_interface(configured):
    live, target = configured
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = (await http.get(f"{live.url}/a2a/slow/.well-known/agent-card.json",
                               headers={"A2A-Version": "1.0"})).json()
    grpc_ifaces = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert grpc_ifaces == [{"url": target, "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "slow"}]


async def test_parley_client_connects_over_grpc_from_the_card(configured):
    live, _ = configured
    async with await A2AClient.connect(f"{live.url}/a2a/ask", bindings=["GRPC"]) as client:
        assert client.binding == "GRPC"
        task = await client.send("hi")
    assert task.status.state is m.TaskState.INPUT_REQUIRED  # the tenant reached the `ask` agent


@pytest.mark.interop
async def test_sdk_client_connects_over_grpc_from_the_card(configured):
    require("a2a.client.transports.grpc", "dev")  # a2a-sdk[grpc] 1.3
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    live, _ = configured
    async with httpx.AsyncClient(timeout=WAIT) as http:
        config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=["GRPC"],
                              grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url))
        client = await ClientFactory(config).create_from_url(f"{live.url}/a2a/ask")
        try:
            msg = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")])
            events = [ev async for ev in client.send_message(SendMessageRequest(message=msg))]
        finally:
            await client.close()
    assert events[-1].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
