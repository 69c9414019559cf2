"""A non-blocking send returns the task as soon as it exists, in an in-progress state, even when its agent
finishes at once (issue 27, item 9).

A2A 1.0.1 section 3.2.2 (`returnImmediately`; 0.3 `blocking: false`): "The operation MUST return immediately
after creating the task, even if processing is still in progress. The returned task will have an
in-progress state". Parley writes a new task together with what its agent produced before its first wait,
so an agent that never waits has already completed when the task is stored: the answer must still be the
task as created (submitted), not what the agent made of it since. Checked on every binding: JSON-RPC 1.0
and 0.3, HTTP+JSON 1.0 and 0.3, gRPC; and for the continuation of a task waiting for input (working).
The client then sees the task complete by polling GetTask, as the spec tells it to.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
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

IN_PROGRESS_10 = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
IN_PROGRESS_03 = {"submitted", "working"}


def make_app(grpc_port: int) -> Parley:
    app = Parley()

    @app.agent("instant", default=True)
    async def instant(ctx):
        yield f"done: {ctx.text}"  # never waits: finished within the loop turn that creates the task

    @app.agent("asker")
    async def asker(ctx):
        if ctx.turn == 1:
            yield ctx.ask("Why?")
            return
        yield "thanks"

    return with_grpc(app, grpc_port)


@pytest.fixture(scope="module")
def server():
    grpc_port = free_port()
    with running(make_app(grpc_port)) as srv:
        yield srv, grpc_port


def mid() -> str:
    return f"m-{uuid.uuid4().hex[:10]}"


def msg10(text: str, task_id: str | None = None) -> dict:
    out = {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        out["taskId"] = task_id
    return out


def msg03(text: str) -> dict:
    return {"kind": "message", "messageId": mid(), "role": "user", "parts": [{"kind": "text", "text": text}]}


def rpc(url: str, method: str, params: dict, version: str) -> dict:
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                   headers={"A2A-Version": version}, timeout=30)
    assert r.status_code == 200, r.text
    assert "result" in r.json(), r.text
    return r.json()["result"]


def completes(url: str, task_id: str) -> dict:
    """Poll GetTask (1.0) until the task is completed (a deadline, no fixed sleep)."""
    deadline = time.monotonic() + 20
    while True:
        task = rpc(url, "GetTask", {"id": task_id}, "1.0")
        if task["status"]["state"] == "TASK_STATE_COMPLETED":
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.02)


def test_jsonrpc_1_0(server) -> None:
    srv, _ = server
    url = f"{srv.url}/a2a/instant"
    task = rpc(url, "SendMessage", {"message": msg10("a"), "configuration": {"returnImmediately": True}},
               "1.0")["task"]
    assert task["status"]["state"] in IN_PROGRESS_10, task
    assert "artifacts" not in task
    assert completes(url, task["id"])["artifacts"][0]["parts"] == [{"text": "done: a"}]


def test_jsonrpc_0_3(server) -> None:
    srv, _ = server
    url = f"{srv.url}/a2a/instant"
    task = rpc(url, "message/send", {"message": msg03("b"), "configuration": {"blocking": False}}, "0.3")
    assert task["kind"] == "task" and task["status"]["state"] in IN_PROGRESS_03, task
    completes(url, task["id"])


@pytest.mark.parametrize("prefix, version, body", [
    ("", "1.0", lambda: {"message": msg10("c"), "configuration": {"returnImmediately": True}}),
    ("/v1", "0.3", lambda: {"message": {"messageId": mid(), "role": "ROLE_USER", "content": [{"text": "c"}]},
                            "configuration": {"blocking": False}}),
], ids=["1.0", "0.3"])
def test_http_json(server, prefix, version, body) -> None:
    srv, _ = server
    url = f"{srv.url}/a2a/instant"
    r = httpx.post(f"{url}{prefix}/message:send", json=body(), headers={"A2A-Version": version}, timeout=30)
    assert r.status_code == 200, r.text
    task = r.json()["task"]
    assert task["status"]["state"] in IN_PROGRESS_10, task  # ProtoJSON enum names in both versions
    completes(url, task["id"])


def test_grpc(server) -> None:
    srv, grpc_port = server

    async def send() -> pb.Task:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            request = pb.SendMessageRequest(
                tenant="instant", message=pb.Message(message_id=mid(), role=pb.ROLE_USER, parts=[pb.Part(text="d")]),
                configuration=pb.SendMessageConfiguration(return_immediately=True))
            response = await stub.SendMessage(request, timeout=30)
            assert response.WhichOneof("payload") == "task"
            return response.task

    task = asyncio.run(send())
    assert task.status.state in (pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING), task
    completes(f"{srv.url}/a2a/instant", task.id)


def test_continuing_a_task_returns_it_working(server) -> None:
    """A non-blocking message answering `input-required` returns the task working (it is in progress
    again), not completed, though the agent finishes at once."""
    srv, _ = server
    url = f"{srv.url}/a2a/asker"
    asked = rpc(url, "SendMessage", {"message": msg10("first")}, "1.0")["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task = rpc(url, "SendMessage", {"message": msg10("because", asked["id"]),
                                    "configuration": {"returnImmediately": True}}, "1.0")["task"]
    assert task["status"]["state"] == "TASK_STATE_WORKING", task
    completes(url, task["id"])
