"""Metrics after a few requests: requests by method and status, task durations by state, active tasks, SSE."""

from __future__ import annotations

import httpx
from otelkit import Otel, make_app

from parley.client import A2AClient
from parley.protocol import models as m


def requests(otel: Otel, **attrs: object) -> int:
    return otel.value("a2a.server.requests", **attrs) or 0


def tasks(otel: Otel, state: str, agent: str) -> int:
    return otel.value("a2a.server.task.duration", a2a__task__state=state, a2a__agent_id=agent) or 0


async def test_requests_and_task_durations_are_counted(otel, serve):
    srv = serve(make_app())
    before = {
        "send": requests(otel, a2a__method="SendMessage", a2a__binding="JSONRPC", http__response__status_code=200),
        "rest": requests(otel, a2a__method="SendMessage", a2a__binding="HTTP+JSON", http__response__status_code=200),
        "stream": requests(otel, a2a__method="SendStreamingMessage", a2a__binding="JSONRPC"),
        "missing": requests(otel, a2a__method="GetTask", error__type="TASK_NOT_FOUND"),
        "completed": tasks(otel, "completed", "echo"),
        "failed": tasks(otel, "failed", "boom"),
        "asked": tasks(otel, "input-required", "ask"),
    }
    async with await A2AClient.connect(f"{srv.url}/a2a/echo") as client:
        await client.send("one")
        await client.send("two")
        [ev async for ev in client.stream("three")]
    async with await A2AClient.connect(f"{srv.url}/a2a/echo", bindings=["HTTP+JSON"]) as client:
        await client.send("four")
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(f"{srv.url}/a2a/echo", json=body, headers={"A2A-Version": "1.0"})
    assert "error" in answer.json()
    async with httpx.AsyncClient(timeout=30) as http:
        missing = await http.get(f"{srv.url}/a2a/echo/tasks/nope", headers={"A2A-Version": "1.0"})
    assert missing.status_code == 404
    async with await A2AClient.connect(f"{srv.url}/a2a/boom") as client:
        await client.send("fail")
    async with await A2AClient.connect(f"{srv.url}/a2a/ask") as client:
        await client.send("question")

    assert requests(otel, a2a__method="SendMessage", a2a__binding="JSONRPC",
                    http__response__status_code=200) - before["send"] == 4  # echo x2, boom, ask
    assert requests(otel, a2a__method="SendMessage", a2a__binding="HTTP+JSON",
                    http__response__status_code=200) - before["rest"] == 1
    assert requests(otel, a2a__method="SendStreamingMessage", a2a__binding="JSONRPC") - before["stream"] == 1
    assert requests(otel, a2a__method="GetTask", error__type="TASK_NOT_FOUND") - before["missing"] == 2
    assert requests(otel, a2a__method="GetTask", a2a__binding="HTTP+JSON", http__response__status_code=404) >= 1
    assert tasks(otel, "completed", "echo") - before["completed"] == 4
    assert tasks(otel, "failed", "boom") - before["failed"] == 1
    assert tasks(otel, "input-required", "ask") - before["asked"] == 1
    durations = [p for p in otel.points("a2a.server.request.duration")
                 if dict(p.attributes).get("a2a.method") == "SendMessage"]
    assert durations and all(p.sum >= 0 for p in durations)


async def test_active_tasks_and_sse_subscribers_go_back_to_zero(otel, serve):
    srv = serve(make_app())
    assert otel.value("a2a.server.active_tasks", a2a__agent_id="wait") == 0
    async with await A2AClient.connect(f"{srv.url}/a2a/wait") as client:
        task = await client.send("hold on", blocking=False)
        assert otel.value("a2a.server.active_tasks", a2a__agent_id="wait") == 1
        stream = client.resubscribe(task.id)
        first = await stream.__anext__()  # the snapshot: the server is streaming to us now
        assert isinstance(first, m.Task)
        assert otel.value("a2a.server.sse.subscribers", a2a__agent_id="wait", a2a__binding="JSONRPC") == 1
        await client.cancel(task.id)
        rest = [ev async for ev in stream]  # ends once the task is canceled
        assert rest[-1].status.state is m.TaskState.CANCELED
    assert otel.value("a2a.server.active_tasks", a2a__agent_id="wait") == 0
    assert otel.value("a2a.server.sse.subscribers", a2a__agent_id="wait", a2a__binding="JSONRPC") == 0
    assert tasks(otel, "canceled", "wait") >= 1
