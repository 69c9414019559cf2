"""An agent can answer with a Message instead of a Task (A2A 1.0 section 3.1.1: SendMessage returns "a Task
or a Message"; 3.1.2: a stream "MUST" then carry exactly one Message). In Parley an agent declared with
`replies=True` that yields `ctx.reply(...)` before anything else answers so, on every binding and version:
JSON-RPC 1.0 `{"message": ...}`, 0.3 `kind: "message"`, HTTP+JSON, gRPC `SendMessageResponse.message`,
and a stream of that single message. Anything else it yields first makes the answer a Task as usual."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import grpc
import httpx
import pytest

from parley.app import Parley
from parley.grpc import a2a_pb2 as pb
from parley.grpc import a2a_pb2_grpc
from support import free_port, running

sys.path.insert(0, str(Path(__file__).parents[1] / "grpc"))
from grpc_support import with_grpc


def make_app(grpc_port: int) -> Parley:
    app = Parley()

    @app.agent("greeter", replies=True)
    async def greeter(ctx):
        yield ctx.reply(f"Hello, {ctx.text}!", metadata={"mood": "cheerful"})

    @app.agent("thinker", replies=True)
    async def thinker(ctx):
        yield "Let me think... "  # something visible first: this answer is a task
        yield ctx.reply("42")

    return with_grpc(app, grpc_port)


@pytest.fixture(scope="module")
def server():
    grpc_port = free_port()
    with running(make_app(grpc_port)) as srv:
        yield srv, grpc_port


def msg(text: str, mid: str = "m-1") -> dict:
    return {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}


def rpc(url: str, method: str, params: dict, version: str) -> dict:
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                   headers={"A2A-Version": version}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["result"]


def sse(url: str, body: dict, headers: dict) -> list[dict]:
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as r:
        assert r.status_code == 200
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]


def test_jsonrpc_1_0_send_returns_the_message(server) -> None:
    srv, _ = server
    result = rpc(f"{srv.url}/a2a/greeter", "SendMessage", {"message": msg("Ada")}, "1.0")
    assert set(result) == {"message"}
    reply = result["message"]
    assert reply["role"] == "ROLE_AGENT"
    assert reply["parts"] == [{"text": "Hello, Ada!"}]
    assert reply["metadata"] == {"mood": "cheerful"}  # the agent's metadata; Parley's own marker is not shown
    assert "taskId" not in reply and reply["contextId"]


def test_a_retry_of_the_same_message_gets_the_same_reply(server) -> None:
    srv, _ = server
    first = rpc(f"{srv.url}/a2a/greeter", "SendMessage", {"message": msg("Bo", "m-retry")}, "1.0")["message"]
    again = rpc(f"{srv.url}/a2a/greeter", "SendMessage", {"message": msg("Bo", "m-retry")}, "1.0")["message"]
    assert again == first


def test_jsonrpc_0_3_send_returns_kind_message(server) -> None:
    srv, _ = server
    result = rpc(f"{srv.url}/a2a/greeter", "message/send",
                 {"message": {"messageId": "m-03", "role": "user", "kind": "message",
                              "parts": [{"kind": "text", "text": "Cy"}]}}, "0.3")
    assert result["kind"] == "message" and result["role"] == "agent"
    assert result["parts"] == [{"kind": "text", "text": "Hello, Cy!"}]


@pytest.mark.parametrize("version,method,text_of", [
    ("1.0", "SendStreamingMessage", lambda ev: ev["message"]["parts"][0]["text"]),
    ("0.3", "message/stream", lambda ev: ev["parts"][0]["text"]),
])
def test_a_stream_is_that_one_message(server, version, method, text_of) -> None:
    srv, _ = server
    message = msg("Di", f"m-stream-{version}") if version == "1.0" else {
        "messageId": "m-stream-03", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "Di"}]}
    frames = sse(f"{srv.url}/a2a/greeter", {"jsonrpc": "2.0", "id": 1, "method": method,
                                             "params": {"message": message}}, {"A2A-Version": version})
    assert len(frames) == 1
    assert text_of(frames[0]["result"]) == "Hello, Di!"


def test_rest_send_and_stream(server) -> None:
    srv, _ = server
    r = httpx.post(f"{srv.url}/a2a/greeter/message:send", json={"message": msg("Ed", "m-rest")},
                   headers={"A2A-Version": "1.0"}, timeout=30)
    assert r.status_code == 200 and r.json()["message"]["parts"] == [{"text": "Hello, Ed!"}]
    frames = sse(f"{srv.url}/a2a/greeter/message:stream", {"message": msg("Flo", "m-rest-s")}, {"A2A-Version": "1.0"})
    assert [f["message"]["parts"][0]["text"] for f in frames] == ["Hello, Flo!"]


def test_grpc_send_and_stream(server) -> None:
    _, grpc_port = server

    async def scenario() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            request = pb.SendMessageRequest(tenant="greeter", message=pb.Message(
                message_id="m-grpc", role=pb.ROLE_USER, parts=[pb.Part(text="Gus")]))
            response = await stub.SendMessage(request, timeout=30)
            assert response.WhichOneof("payload") == "message"
            assert response.message.parts[0].text == "Hello, Gus!"
            request.message.message_id = "m-grpc-stream"
            events = [ev async for ev in stub.SendStreamingMessage(request, timeout=30)]
            assert [ev.WhichOneof("payload") for ev in events] == ["message"]

    asyncio.run(scenario())


def test_something_visible_first_makes_it_a_task(server) -> None:
    srv, _ = server
    task = rpc(f"{srv.url}/a2a/thinker", "SendMessage", {"message": msg("?", "m-think")}, "1.0")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"] == [{"text": "42"}]  # the reply completes the task
    assert task["artifacts"][0]["parts"][0]["text"] == "Let me think... "
    frames = sse(f"{srv.url}/a2a/thinker", {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                                             "params": {"message": msg("?", "m-think-s")}}, {"A2A-Version": "1.0"})
    kinds = [next(iter(f["result"])) for f in frames]
    assert kinds[0] == "task" and kinds[-1] == "statusUpdate"
    assert frames[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_official_sdk_client_receives_a_message(server) -> None:
    """a2a-sdk 1.x, as a user would call it: the response of a send to a replying agent is a Message."""
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest

    srv, _ = server

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(
                f"{srv.url}/a2a/greeter")
            request = SendMessageRequest(message=Message(message_id="m-sdk", role=Role.ROLE_USER,
                                                         parts=[Part(text="Hal")]))
            got = [ev async for ev in client.send_message(request)]
            assert len(got) == 1
            assert got[0].WhichOneof("payload") == "message"
            assert got[0].message.parts[0].text == "Hello, Hal!"
            await client.close()

    asyncio.run(scenario())
