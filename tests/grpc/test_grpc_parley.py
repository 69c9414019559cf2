"""Parley's gRPC client against Parley's gRPC server (A2A 1.0, lf.a2a.v1), over real sockets.

The server runs in uvicorn's thread with the HTTP side (tests/conftest.py's
`serve`); its gRPC server shares the app's event loop and task engine. The
status-code tests call the raw stub so that they see exactly what goes on the
wire: the code, the message and the google.rpc.Status trailer.
"""

from __future__ import annotations

import uuid
from contextlib import aclosing

import pytest
from grpc_support import CHUNKS, EXTENSION, SLOW_ARTIFACT, SLOW_FIRST, SLOW_LAST, STREAMED, WAIT, artifact_text, text_of

# isort: split
# (grpc_support first: without grpcio it skips this module, or fails it under CI=true)
import grpc
import grpc.aio
from google.rpc import error_details_pb2, status_pb2

from parley.client.client import A2AClient, user_message
from parley.client.errors import ClientError
from parley.client.grpc import GrpcTransport
from parley.grpc import a2a_pb2 as pb
from parley.grpc import a2a_pb2_grpc
from parley.protocol import models as m
from parley.protocol.errors import (
    ExtensionSupportRequiredError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from parley.protocol.operations import Operation
from support import drain_within

TEXT = "".join(CHUNKS)


async def collect(stream, until=None) -> list:
    """Events of a Parley client stream until it ends (or `until(event)` is true), within WAIT."""
    return await drain_within(stream, WAIT, until)


def kinds(events: list) -> list[str]:
    return [type(ev).__name__ for ev in events]


# --- send, stream, get, list ---------------------------------------------------------


async def test_send_blocking_returns_the_completed_task(parley_client):
    client = parley_client("chunks")
    assert client.binding == "GRPC" and client.version == "1.0"
    task = await client.send("hello")
    assert isinstance(task, m.Task)
    assert task.status.state is m.TaskState.COMPLETED
    assert artifact_text(task) == TEXT
    assert [text_of(msg.parts) for msg in task.history or []] == ["hello"]
    assert task.history[0].task_id == task.id and task.history[0].context_id == task.context_id


async def test_empty_tenant_is_the_default_agent(parley_client):
    task = await parley_client(None).send("hi")
    assert artifact_text(task) == TEXT


async def test_stream_yields_task_then_chunks_then_completed(parley_client):
    events = await collect(parley_client("chunks").stream("hello"))
    first, last = events[0], events[-1]
    assert isinstance(first, m.Task) and first.status.state is m.TaskState.SUBMITTED
    assert isinstance(last, m.TaskStatusUpdateEvent) and last.status.state is m.TaskState.COMPLETED
    assert all(getattr(ev, "task_id", first.id) == first.id for ev in events[1:])
    chunks = [ev for ev in events if isinstance(ev, m.TaskArtifactUpdateEvent)]
    assert [text_of(c.artifact.parts) for c in chunks] == STREAMED
    assert [c.append for c in chunks] == [False, True, True, True]
    assert [c.last_chunk for c in chunks] == [False, False, False, True]
    assert len({c.artifact.artifact_id for c in chunks}) == 1
    states = [ev.status.state for ev in events if isinstance(ev, m.TaskStatusUpdateEvent)]
    assert states.count(m.TaskState.COMPLETED) == 1 and states[-1] is m.TaskState.COMPLETED


async def test_get_with_history_length(parley_client):
    client = parley_client("ask")
    first = await client.send("hi")
    assert first.status.state is m.TaskState.INPUT_REQUIRED
    done = await client.send("Ada", task_id=first.id)
    assert done.status.state is m.TaskState.COMPLETED and artifact_text(done) == "Hello, Ada!"
    got = await client.get(first.id)
    assert got.id == first.id and got.context_id == first.context_id
    assert len(got.history or []) == 3  # user, agent question, user
    last_only = await client.get(first.id, history_length=1)
    assert [text_of(msg.parts) for msg in last_only.history or []] == ["Ada"]


async def test_list_filters_by_context_and_pages(parley_client):
    client = parley_client("chunks")
    a = await client.send("a")
    b = await client.send("b", context_id=a.context_id)
    await client.send("elsewhere")
    page = await client.list(context_id=a.context_id, page_size=1)
    assert page.total_size == 2 and page.page_size == 1 and len(page.tasks) == 1
    assert page.next_page_token
    rest = await client.list(context_id=a.context_id, page_size=1, page_token=page.next_page_token)
    assert {page.tasks[0].id, rest.tasks[0].id} == {a.id, b.id}
    assert rest.next_page_token == ""
    done = await client.list(state=m.TaskState.COMPLETED, include_artifacts=True)
    assert done.total_size == 3 and all(artifact_text(t) == TEXT for t in done.tasks)
    assert (await client.list(state=m.TaskState.CANCELED)).tasks == []


async def test_tasks_are_per_agent(parley_client):
    task = await parley_client("chunks").send("x")
    with pytest.raises(TaskNotFoundError):
        await parley_client("ask").get(task.id)
    assert (await parley_client("ask").list()).total_size == 0


async def test_parts_of_every_kind_round_trip(parley_client):
    parts = [
        m.Part(text="plain"),
        m.Part(raw=b"\x00\x01binary\xff", media_type="application/octet-stream", filename="b.bin"),
        m.Part(url="https://example.com/a.png", media_type="image/png"),
        m.Part(data={"list": [1, "two", None, True], "nested": {"x": 1.5}}, metadata={"k": "v"}),
    ]
    msg = user_message(parts=parts, metadata={"trace": "abc", "n": 2})
    task = await parley_client("mirror").send(msg)
    art = task.artifacts[0]
    assert art.parts[0].text == "plain"
    assert art.parts[1].raw == b"\x00\x01binary\xff" and art.parts[1].filename == "b.bin"
    assert art.parts[1].media_type == "application/octet-stream"
    assert art.parts[2].url == "https://example.com/a.png" and art.parts[2].media_type == "image/png"
    assert art.parts[3].data == {"list": [1, "two", None, True], "nested": {"x": 1.5}}
    assert art.parts[3].metadata == {"k": "v"}
    assert art.metadata == {"trace": "abc", "n": 2}


# --- cancel and subscribe ---------------------------------------------------------------


async def _until_first_chunk(stream) -> list:
    return await collect(stream, until=lambda ev: isinstance(ev, m.TaskArtifactUpdateEvent))


async def test_cancel_running_task(parley_client, gate):
    client = parley_client("slow")
    async with aclosing(client.stream("go slowly")) as stream:
        seen = await _until_first_chunk(stream)
        task_id = seen[0].id
        assert text_of(seen[-1].artifact.parts) == SLOW_FIRST

        canceled = await parley_client("slow").cancel(task_id)
        assert canceled.id == task_id and canceled.status.state is m.TaskState.CANCELED

        rest = await collect(stream)
        assert rest and isinstance(rest[-1], m.TaskStatusUpdateEvent)
        assert rest[-1].status.state is m.TaskState.CANCELED
        assert not [ev for ev in rest if isinstance(ev, m.TaskArtifactUpdateEvent)]

    got = await client.get(task_id)
    assert got.status.state is m.TaskState.CANCELED and artifact_text(got) == SLOW_FIRST
    with pytest.raises(TaskNotCancelableError):
        await client.cancel(task_id)


async def test_subscribe_to_running_task_gets_snapshot_then_the_rest(parley_client, gate):
    client = parley_client("slow")
    started = await client.send("go", blocking=False)
    assert started.status.state in (m.TaskState.SUBMITTED, m.TaskState.WORKING)
    async with aclosing(client.resubscribe(started.id)) as stream:
        first = await collect(stream, until=lambda ev: True)
        assert isinstance(first[0], m.Task) and first[0].id == started.id
        if not first[0].artifacts:  # the first chunk may still be on its way
            await _until_first_chunk(stream)
        gate.open()
        rest = await collect(stream)
    chunks = [ev for ev in rest if isinstance(ev, m.TaskArtifactUpdateEvent)]
    assert [(c.artifact.artifact_id, text_of(c.artifact.parts), c.append, c.last_chunk) for c in chunks] == [
        (SLOW_ARTIFACT, SLOW_LAST, True, True)
    ]
    assert isinstance(rest[-1], m.TaskStatusUpdateEvent) and rest[-1].status.state is m.TaskState.COMPLETED
    assert artifact_text(await client.get(started.id)) == SLOW_FIRST + SLOW_LAST


async def test_subscribe_with_last_event_id_replays_the_log(grpc_live, parley_client):
    """Parley's extension: `last-event-id` metadata on SubscribeToTask replays the log after that entry."""
    task = await parley_client("chunks").send("hello")
    transport = GrpcTransport(None, grpc_live.target, "1.0", tenant="chunks")
    try:
        stream = transport.stream(Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=task.id), "1")
        items = await collect(stream)
    finally:
        await transport.close()
    events = [item.event for item in items]
    assert all(item.event_id is None for item in items)
    assert not isinstance(events[0], m.Task)  # no snapshot: entries after seq 1 (the task itself)
    assert [text_of(ev.artifact.parts) for ev in events if isinstance(ev, m.TaskArtifactUpdateEvent)] == STREAMED
    assert events[-1].status.state is m.TaskState.COMPLETED


async def test_subscribe_to_finished_task_is_unsupported(parley_client):
    client = parley_client("chunks")
    done = await client.send("x")
    with pytest.raises(UnsupportedOperationError):
        await collect(client.resubscribe(done.id))


# --- errors through the Parley client -----------------------------------------------------


async def test_errors_come_back_as_a2a_errors(parley_client):
    client = parley_client("chunks")
    with pytest.raises(TaskNotFoundError, match="no-such-task"):
        await client.get("no-such-task")
    done = await client.send("x")
    with pytest.raises(TaskNotCancelableError):
        await client.cancel(done.id)
    with pytest.raises(InvalidParamsError, match="historyLength"):
        await client.get(done.id, history_length=-1)
    with pytest.raises(ExtensionSupportRequiredError):
        await parley_client("ext").send("x")


async def test_extensions_metadata_activates_an_extension(parley_client):
    client = parley_client("ext", metadata=[("a2a-extensions", f"urn:other, {EXTENSION}")])
    task = await client.send("x")
    assert task.status.state is m.TaskState.COMPLETED and artifact_text(task) == "extended"


async def test_unreachable_server_is_a_client_error():
    from grpc_support import free_port

    client = A2AClient(GrpcTransport(None, f"127.0.0.1:{free_port()}", "1.0", timeout=WAIT))
    try:
        with pytest.raises(ClientError, match="cannot reach"):
            await client.get("x")
    finally:
        await client.close()


# --- status codes on the wire ---------------------------------------------------------------


@pytest.fixture
async def stub(grpc_live):
    async with grpc.aio.insecure_channel(grpc_live.target) as channel:
        yield a2a_pb2_grpc.A2AServiceStub(channel)


V1 = (("a2a-version", "1.0"),)


def rich_status(err: grpc.aio.AioRpcError) -> tuple[status_pb2.Status, error_details_pb2.ErrorInfo]:
    raw = next(v for k, v in err.trailing_metadata() or () if k == "grpc-status-details-bin")
    status = status_pb2.Status.FromString(raw)
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return status, info


async def expect(coro, code: grpc.StatusCode, reason: str) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await coro
    err = caught.value
    assert err.code() == code, (err.code(), err.details())
    status, info = rich_status(err)
    assert status.code == code.value[0] and status.message == err.details()
    assert info.reason == reason and info.domain == "a2a-protocol.org"
    return err.details()


def message(text: str = "hi", **fields) -> pb.Message:
    msg = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)])
    for key, value in fields.items():
        setattr(msg, key, value)
    return msg


async def test_unknown_task_is_not_found(stub):
    details = await expect(stub.GetTask(pb.GetTaskRequest(tenant="chunks", id="nope"), metadata=V1),
                           grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
    assert "nope" in details
    await expect(stub.CancelTask(pb.CancelTaskRequest(id="nope"), metadata=V1),
                 grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")


async def test_cancel_of_finished_task_is_failed_precondition(stub):
    sent = await stub.SendMessage(pb.SendMessageRequest(tenant="chunks", message=message()), metadata=V1)
    assert sent.WhichOneof("payload") == "task" and sent.task.status.state == pb.TASK_STATE_COMPLETED
    await expect(stub.CancelTask(pb.CancelTaskRequest(tenant="chunks", id=sent.task.id), metadata=V1),
                 grpc.StatusCode.FAILED_PRECONDITION, "TASK_NOT_CANCELABLE")
    stream = stub.SubscribeToTask(pb.SubscribeToTaskRequest(tenant="chunks", id=sent.task.id), metadata=V1)
    await expect(stream.read(), grpc.StatusCode.FAILED_PRECONDITION, "UNSUPPORTED_OPERATION")


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (pb.SendMessageRequest(), "message"),
        (pb.SendMessageRequest(message=pb.Message(message_id="m1", parts=[pb.Part(text="x")])), "role"),
        (pb.SendMessageRequest(message=pb.Message(message_id="m1", role=pb.ROLE_USER)), "parts"),
        (pb.SendMessageRequest(message=pb.Message(role=pb.ROLE_USER, parts=[pb.Part(text="x")])), "messageId"),
        (pb.SendMessageRequest(message=pb.Message(message_id="m1", role=pb.ROLE_USER, parts=[pb.Part()])), "part"),
    ],
    ids=["no-message", "no-role", "no-parts", "no-message-id", "empty-part"],
)
async def test_bad_send_request_is_invalid_argument(stub, request_, field):
    details = await expect(stub.SendMessage(request_, metadata=V1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    assert field in details
    stream = stub.SendStreamingMessage(request_, metadata=V1)
    await expect(stream.read(), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")


async def test_other_bad_requests_are_invalid_argument(stub):
    await expect(stub.GetTask(pb.GetTaskRequest(id=""), metadata=V1), grpc.StatusCode.INVALID_ARGUMENT,
                 "INVALID_PARAMS")
    await expect(stub.GetTask(pb.GetTaskRequest(id="x", history_length=-1), metadata=V1),
                 grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    bad_mode = pb.SendMessageRequest(tenant="chunks", message=message(),
                                     configuration=pb.SendMessageConfiguration(accepted_output_modes=["image/png"]))
    await expect(stub.SendMessage(bad_mode, metadata=V1), grpc.StatusCode.INVALID_ARGUMENT,
                 "CONTENT_TYPE_NOT_SUPPORTED")


async def test_unknown_tenant_is_not_found(stub):
    details = await expect(stub.SendMessage(pb.SendMessageRequest(tenant="nobody", message=message()), metadata=V1),
                           grpc.StatusCode.NOT_FOUND, "METHOD_NOT_FOUND")
    assert "nobody" in details


@pytest.mark.parametrize("version", ["0.3", "2.0", "one"])
async def test_unsupported_version_is_failed_precondition(stub, version):
    await expect(stub.GetTask(pb.GetTaskRequest(id="x"), metadata=(("a2a-version", version),)),
                 grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")


async def test_missing_version_is_taken_as_1_0(stub):
    sent = await stub.SendMessage(pb.SendMessageRequest(message=message()))
    assert sent.task.status.state == pb.TASK_STATE_COMPLETED


async def test_push_configs_over_grpc_and_no_extended_card(stub):
    """Spec 3.1.7-3.1.10 and 13.2 over gRPC: an unsafe webhook URL is INVALID_ARGUMENT (loopback is not
    allowed on this server), an unknown config NOT_FOUND, a task without configs lists none; the
    extended card of an open server is UNSUPPORTED_OPERATION."""
    sent = await stub.SendMessage(pb.SendMessageRequest(message=message()), metadata=V1)
    task_id = sent.task.id
    details = await expect(stub.CreateTaskPushNotificationConfig(
        pb.TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:9/hook"), metadata=V1),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    assert "127.0.0.1, a loopback address" in details
    await expect(stub.GetTaskPushNotificationConfig(
        pb.GetTaskPushNotificationConfigRequest(task_id=task_id, id="c"), metadata=V1),
        grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
    listed = await stub.ListTaskPushNotificationConfigs(
        pb.ListTaskPushNotificationConfigsRequest(task_id=task_id), metadata=V1)
    assert list(listed.configs) == []
    await expect(stub.GetExtendedAgentCard(pb.GetExtendedAgentCardRequest(), metadata=V1),
                 grpc.StatusCode.FAILED_PRECONDITION, "UNSUPPORTED_OPERATION")


async def test_a_webhook_secret_that_is_no_header_value_is_refused_over_grpc(stub):
    """Issue 28 item 11 over gRPC (spec 3.1.7 and 13.2): a push config whose token or credentials carry CR/LF,
    created or sent inline with a message, is INVALID_ARGUMENT naming the field, never quoting the value; nothing
    is stored."""
    mark = "s3cr3t-GRPC"
    sent = await stub.SendMessage(pb.SendMessageRequest(message=message()), metadata=V1)
    task_id = sent.task.id
    url = "https://hooks.example.com/hook"  # passes the URL guard (public, or resolved at delivery)
    bad = f"{mark}\r\nX-Injected: 1"
    details = await expect(stub.CreateTaskPushNotificationConfig(
        pb.TaskPushNotificationConfig(task_id=task_id, id="b", url=url, token=bad), metadata=V1),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    assert "`token`" in details and mark not in details
    details = await expect(stub.CreateTaskPushNotificationConfig(
        pb.TaskPushNotificationConfig(task_id=task_id, id="b", url=url, authentication=pb.AuthenticationInfo(
            scheme="Bearer", credentials=bad)), metadata=V1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    assert "`authentication.credentials`" in details and mark not in details
    inline = pb.SendMessageRequest(message=message(), configuration=pb.SendMessageConfiguration(
        task_push_notification_config=pb.TaskPushNotificationConfig(url=url, token=bad)))
    details = await expect(stub.SendMessage(inline, metadata=V1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    assert "`token`" in details and mark not in details
    listed = await stub.ListTaskPushNotificationConfigs(
        pb.ListTaskPushNotificationConfigsRequest(task_id=task_id), metadata=V1)
    assert list(listed.configs) == []


async def test_wire_shapes_of_stream_responses(stub):
    """The raw stream: a Task, then status and artifact updates, ProtoJSON-identical to the HTTP bindings."""
    stream = stub.SendStreamingMessage(pb.SendMessageRequest(tenant="chunks", message=message()), metadata=V1)
    responses = [r async for r in stream]
    payloads = [r.WhichOneof("payload") for r in responses]
    assert payloads[0] == "task" and payloads[-1] == "status_update"
    assert payloads.count("artifact_update") == len(STREAMED)
    task = responses[0].task
    assert task.status.timestamp.seconds > 0 and task.history[0].role == pb.ROLE_USER
    assert responses[-1].status_update.status.state == pb.TASK_STATE_COMPLETED


async def test_raw_bytes_travel_as_bytes(stub):
    part = pb.Part(raw=b"\xde\xad\xbe\xef", media_type="application/octet-stream")
    msg = pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[part])
    sent = await stub.SendMessage(pb.SendMessageRequest(tenant="mirror", message=msg), metadata=V1)
    assert sent.task.artifacts[0].parts[0].raw == b"\xde\xad\xbe\xef"


async def test_a_client_going_away_does_not_stop_the_task(parley_client, gate):
    client = parley_client("slow")
    async with aclosing(client.stream("go")) as stream:
        seen = await _until_first_chunk(stream)
    task_id = seen[0].id  # the stream is closed: the server's side of the call is cancelled
    async with aclosing(client.resubscribe(task_id)) as again:
        snapshot = await collect(again, until=lambda ev: True)
        assert snapshot[0].status.state is m.TaskState.WORKING
        gate.open()
        rest = await collect(again)
    assert rest[-1].status.state is m.TaskState.COMPLETED
    assert artifact_text(await client.get(task_id)) == SLOW_FIRST + SLOW_LAST


async def test_messages_over_max_body_bytes_are_refused(serve, gate):
    from grpc_support import free_port, grpc_app, with_grpc

    app = grpc_app(gate)
    app.settings.max_body_bytes = 4096
    port = free_port()
    serve(with_grpc(app, port))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SendMessage(pb.SendMessageRequest(message=message("x" * 5000)), metadata=V1)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        ok = await stub.SendMessage(pb.SendMessageRequest(message=message("x" * 1000)), metadata=V1)
        assert ok.task.status.state == pb.TASK_STATE_COMPLETED


@pytest.mark.parametrize("raw", ["9223372036854775808", "1" * 19, "-1", "1e5", "12a"])
async def test_a_last_event_id_that_is_no_event_id_is_invalid_argument(stub, raw):
    """Issue 27: `last-event-id` metadata is read by the same rule as HTTP's Last-Event-ID header (ASCII digits,
    at most 18): 2^63 once reached the store and came back INTERNAL (an SQLite OverflowError)."""
    sent = await stub.SendMessage(pb.SendMessageRequest(tenant="chunks", message=message()), metadata=V1)
    stream = stub.SubscribeToTask(pb.SubscribeToTaskRequest(tenant="chunks", id=sent.task.id),
                                  metadata=(*V1, ("last-event-id", raw)))
    details = await expect(stream.read(), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert "last-event-id" in details and raw[:40] in details
