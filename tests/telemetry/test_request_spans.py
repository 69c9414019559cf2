"""SERVER spans per A2A request, task spans, and trace context from callers, against live servers."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry.trace import SpanKind, StatusCode
from otelkit import Otel, hex_id, make_app

from parley.client import A2AClient
from parley.protocol import models as m
from support import free_port, require, rpc

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
S = m.TaskState


def message(text: str, **extra: object) -> dict:
    return {"message": {"messageId": f"m-{text}-{free_port()}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}}


def task_span(otel: Otel, task_id: str):
    found = [s for s in otel.finished() if s.name.startswith("a2a task ")
             and (s.attributes or {}).get("a2a.task_id") == task_id]
    assert found, f"no task span for {task_id}: {[s.name for s in otel.finished()]}"
    return found


# --- JSON-RPC and REST ----------------------------------------------------------------------


def test_a_jsonrpc_call_is_one_server_span_named_by_its_method(spans, serve):
    srv = serve(make_app())
    resp = rpc(f"{srv.url}/a2a/echo", "SendMessage", message("hi"), version="1.0")
    task_id = resp.json()["result"]["task"]["id"]
    span = spans.one("a2a SendMessage", SpanKind.SERVER)
    attrs = dict(span.attributes)
    assert attrs["rpc.system"] == "a2a" and attrs["rpc.method"] == "SendMessage"
    assert attrs["a2a.method"] == "SendMessage" and attrs["a2a.binding"] == "JSONRPC"
    assert attrs["a2a.protocol_version"] == "1.0" and attrs["a2a.agent_id"] == "echo"
    assert attrs["a2a.task_id"] == task_id and attrs["http.response.status_code"] == 200
    assert attrs["url.path"] == "/a2a/echo" and attrs["http.request.method"] == "POST"
    assert span.parent is None  # no traceparent came with the request: a new trace
    assert span.status.status_code is not StatusCode.ERROR


def test_a_0_3_jsonrpc_call_is_named_by_the_1_0_method(spans, serve):
    srv = serve(make_app())
    resp = rpc(f"{srv.url}/a2a/echo", "message/send",
               {"message": {"messageId": "m-03", "role": "user", "kind": "message", "parts": [{"kind": "text",
                                                                                               "text": "hi"}]}})
    assert resp.json()["result"]["status"]["state"] == "completed"
    span = spans.one("a2a SendMessage", SpanKind.SERVER)
    assert span.attributes["a2a.protocol_version"] == "0.3"
    assert span.attributes["a2a.task_id"] == resp.json()["result"]["id"]


def test_a_jsonrpc_error_names_its_reason(spans, serve):
    srv = serve(make_app())
    resp = rpc(f"{srv.url}/a2a/echo", "GetTask", {"id": "no-such-task"}, version="1.0")
    assert "error" in resp.json()
    span = spans.one("a2a GetTask", SpanKind.SERVER)
    assert span.attributes["error.type"] == "TASK_NOT_FOUND"
    assert span.attributes["a2a.task_id"] == "no-such-task"
    assert span.attributes["http.response.status_code"] == 200  # JSON-RPC errors travel with HTTP 200


def test_rest_calls_are_server_spans_too(spans, serve):
    srv = serve(make_app())
    headers = {"A2A-Version": "1.0"}
    sent = httpx.post(f"{srv.url}/a2a/echo/message:send", json=message("rest"), headers=headers, timeout=30)
    assert sent.status_code == 200, sent.text
    task_id = sent.json()["task"]["id"]
    got = httpx.get(f"{srv.url}/a2a/echo/tasks/{task_id}", headers=headers, timeout=30)
    missing = httpx.get(f"{srv.url}/a2a/echo/tasks/nope", headers=headers, timeout=30)
    assert got.status_code == 200 and missing.status_code == 404
    send = spans.one("a2a SendMessage", SpanKind.SERVER)
    assert send.attributes["a2a.binding"] == "HTTP+JSON" and send.attributes["a2a.task_id"] == task_id
    assert send.attributes["url.path"] == "/a2a/echo/message:send"
    ok, = spans.named("a2a GetTask", SpanKind.SERVER, a2a__task_id=task_id)
    assert ok.attributes["http.response.status_code"] == 200
    bad, = spans.named("a2a GetTask", SpanKind.SERVER, a2a__task_id="nope")
    assert bad.attributes["http.response.status_code"] == 404 and bad.attributes["error.type"] == "TASK_NOT_FOUND"


def test_cards_health_and_dashboard_get_no_span(spans, serve):
    srv = serve(make_app())
    for path in ("/.well-known/agent-card.json", "/a2a/ask/.well-known/agent-card.json", "/healthz", "/agents", "/"):
        assert httpx.get(srv.url + path, timeout=30).status_code == 200
    assert spans.finished() == []


async def test_a_stream_has_a_server_span_and_a_task_span(spans, serve):
    srv = serve(make_app())
    async with await A2AClient.connect(f"{srv.url}/a2a/echo") as client:
        events = [ev async for ev in client.stream("streamed")]
    task_id = events[0].id
    server = spans.one("a2a SendStreamingMessage", SpanKind.SERVER)
    assert server.attributes["a2a.task_id"] == task_id
    task, = task_span(spans, task_id)
    assert task.parent.span_id == server.context.span_id
    assert task.attributes["a2a.task.state"] == "completed"


# --- task spans ------------------------------------------------------------------------------


async def test_a_task_span_runs_from_creation_to_its_final_state(spans, serve):
    srv = serve(make_app())
    async with await A2AClient.connect(f"{srv.url}/a2a/echo") as client:
        task = await client.send("hello")
    request = spans.one("a2a SendMessage", SpanKind.SERVER)
    span, = task_span(spans, task.id)
    assert span.name == "a2a task echo" and span.kind is SpanKind.INTERNAL
    assert span.parent.span_id == request.context.span_id
    assert span.context.trace_id == request.context.trace_id
    attrs = dict(span.attributes)
    assert attrs["a2a.task_id"] == task.id and attrs["a2a.context_id"] == task.context_id
    assert attrs["a2a.agent_id"] == "echo" and attrs["a2a.task.state"] == "completed"
    assert request.start_time <= span.start_time <= span.end_time <= request.end_time


async def test_a_failed_task_span_is_an_error_with_the_reason(spans, serve):
    srv = serve(make_app())
    async with await A2AClient.connect(f"{srv.url}/a2a/boom") as client:
        task = await client.send("go")
    assert task.status.state is S.FAILED
    span, = task_span(spans, task.id)
    assert span.attributes["a2a.task.state"] == "failed"
    # the span carries the task's reason: the error id that finds the exception in the server's log
    # (the exception's own text stays out of the task, which the client reads)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == task.status.message.text()
    assert "(error " in span.status.description and "kaput" not in span.status.description


async def test_each_turn_of_a_task_is_a_span_of_its_own(spans, serve):
    srv = serve(make_app())
    async with await A2AClient.connect(f"{srv.url}/a2a/ask") as client:
        first = await client.send("hi")
        assert first.status.state is S.INPUT_REQUIRED
        second = await client.send("Ada", task_id=first.id)
        assert second.status.state is S.COMPLETED
    turns = sorted(task_span(spans, first.id), key=lambda s: s.start_time)
    assert [t.attributes["a2a.task.state"] for t in turns] == ["input-required", "completed"]
    assert [t.attributes["a2a.task.turn"] for t in turns] == [1, 2]
    requests = sorted(spans.named("a2a SendMessage", SpanKind.SERVER), key=lambda s: s.start_time)
    assert [t.parent.span_id for t in turns] == [r.context.span_id for r in requests]
    assert requests[1].attributes["a2a.task_id"] == first.id  # the continuing message named the task


async def test_a_canceled_task_ends_its_span_as_canceled(spans, serve):
    srv = serve(make_app())
    async with await A2AClient.connect(f"{srv.url}/a2a/wait") as client:
        task = await client.send("wait for it", blocking=False)
        canceled = await client.cancel(task.id)
    assert canceled.status.state is S.CANCELED
    span, = task_span(spans, task.id)
    assert span.attributes["a2a.task.state"] == "canceled"
    cancel = spans.one("a2a CancelTask", SpanKind.SERVER)
    assert cancel.attributes["a2a.task_id"] == task.id


# --- trace context in and out ------------------------------------------------------------------


def test_a_traceparent_from_the_caller_is_the_parent_of_the_server_span(spans, serve):
    srv = serve(make_app())
    resp = httpx.post(
        f"{srv.url}/a2a/echo", timeout=30,
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("traced")},
        headers={"A2A-Version": "1.0", "traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "vendor=1"})
    task_id = resp.json()["result"]["task"]["id"]
    server = spans.one("a2a SendMessage", SpanKind.SERVER)
    assert hex_id(server.context.trace_id) == TRACE
    assert server.parent is not None and server.parent.is_remote
    assert hex_id(server.parent.span_id, 16) == PARENT
    assert server.context.trace_state.get("vendor") == "1"
    task, = task_span(spans, task_id)
    assert hex_id(task.context.trace_id) == TRACE


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_the_client_sends_its_span_as_the_parent_of_the_server_span(spans, serve, binding):
    if binding == "GRPC":
        require("parley.client.grpc", "grpc")  # registers the transport
    srv = serve(make_app(grpc_port=free_port() if binding == "GRPC" else None))
    tracer = spans.tracer_provider.get_tracer("tests")
    with tracer.start_as_current_span("caller") as caller:
        async with await A2AClient.connect(f"{srv.url}/a2a/echo", bindings=[binding]) as client:
            task = await client.send("across")
            again = await client.get(task.id)
    assert again.status.state is S.COMPLETED
    client_span = spans.one("a2a SendMessage", SpanKind.CLIENT)
    server_span = spans.one("a2a SendMessage", SpanKind.SERVER)
    trace_id = caller.get_span_context().trace_id
    assert client_span.parent.span_id == caller.get_span_context().span_id
    assert client_span.attributes["a2a.binding"] == binding and client_span.attributes["rpc.method"] == "SendMessage"
    assert server_span.parent.span_id == client_span.context.span_id and server_span.parent.is_remote
    assert server_span.attributes["a2a.binding"] == binding and server_span.attributes["a2a.agent_id"] == "echo"
    assert server_span.attributes["a2a.task_id"] == task.id
    get_client = spans.one("a2a GetTask", SpanKind.CLIENT)
    get_server = spans.one("a2a GetTask", SpanKind.SERVER)
    assert get_client.attributes["a2a.task_id"] == task.id
    assert get_server.parent.span_id == get_client.context.span_id
    assert {s.context.trace_id for s in spans.finished()} == {trace_id}
    if binding == "GRPC":
        assert server_span.attributes["rpc.grpc.status_code"] == 0
    else:
        assert server_span.attributes["http.response.status_code"] == 200


async def test_a_grpc_error_is_its_status_code(spans, serve):
    require("parley.client.grpc", "grpc")  # registers the transport
    from parley.protocol.errors import TaskNotFoundError

    srv = serve(make_app(grpc_port=free_port()))
    async with await A2AClient.connect(f"{srv.url}/a2a/echo", bindings=["GRPC"]) as client:
        with pytest.raises(TaskNotFoundError):
            await client.get("nope")
    server = spans.one("a2a GetTask", SpanKind.SERVER)
    assert server.attributes["rpc.grpc.status_code"] == 5  # NOT_FOUND
    assert server.attributes["error.type"] == "TASK_NOT_FOUND"
    client_span = spans.one("a2a GetTask", SpanKind.CLIENT)
    assert client_span.status.status_code is StatusCode.ERROR
    assert client_span.attributes["error.type"] == "TASK_NOT_FOUND"
