"""gRPC interop with the official a2a-sdk 1.3, both ways.

* The SDK's gRPC client (`ClientFactory` with a `GRPC` 1.0 interface whose
  tenant names the agent) against Parley's gRPC server.
* Parley's gRPC client against an a2a-sdk 1.3 gRPC server (`GrpcHandler` over a
  `DefaultRequestHandler` with small test executors), run on the test's loop.

Assertions are on what each client returns, never on raw bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import pytest
from grpc_support import CHUNKS, SLOW_FIRST, SLOW_LAST, WAIT, artifact_text, text_of

from support import drain_within, require, sdk_message, sdk_parts_text

# isort: split
# (grpc_support first: without grpcio it skips this module, or fails it under CI=true)
import grpc
import grpc.aio

require("a2a.server.request_handlers.grpc_handler", "dev")  # a2a-sdk[grpc] 1.3, of the dev extra

# isort: split
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.types import InvalidParamsError as SdkInvalidParamsError
from a2a.types import TaskNotCancelableError as SdkTaskNotCancelableError
from a2a.types import TaskNotFoundError as SdkTaskNotFoundError
from a2a.types import UnsupportedOperationError as SdkUnsupportedOperationError

from parley.client.client import A2AClient
from parley.client.grpc import GrpcTransport
from parley.protocol import models as m
from parley.protocol.errors import TaskNotCancelableError, TaskNotFoundError

pytestmark = pytest.mark.interop

TEXT = "".join(CHUNKS)


# --- the SDK client -> Parley ----------------------------------------------------------------


def sdk_card(target: str, tenant: str, name: str = "parley") -> AgentCard:
    return AgentCard(
        name=name,
        description="Parley over gRPC",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=target, protocol_binding="GRPC", protocol_version="1.0", tenant=tenant)
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=tenant or name, name=tenant or name, description="test agent", tags=["test"])],
    )


@asynccontextmanager
async def sdk_client(target: str, tenant: str, *, streaming: bool) -> AsyncIterator[Any]:
    config = ClientConfig(
        streaming=streaming,
        grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url),
        supported_protocol_bindings=["GRPC"],
    )
    client = ClientFactory(config).create(sdk_card(target, tenant))
    try:
        yield client
    finally:
        await client.close()


def state(value: int) -> str:
    return TaskState.Name(value)


def summarize(ev: StreamResponse) -> tuple:
    kind = ev.WhichOneof("payload")
    if kind == "task":
        return ("task", state(ev.task.status.state))
    if kind == "status_update":
        return ("status", state(ev.status_update.status.state))
    if kind == "artifact_update":
        au = ev.artifact_update
        return ("artifact", sdk_parts_text(au.artifact.parts), au.append, au.last_chunk)
    return (kind,)


async def take(stream: AsyncIterator[Any], until=None) -> list:
    return await drain_within(stream, WAIT, until)


async def test_sdk_send_blocking(grpc_live):
    async with sdk_client(grpc_live.target, "chunks", streaming=False) as client:
        events = [ev async for ev in client.send_message(SendMessageRequest(message=sdk_message("hello")))]
    assert [ev.WhichOneof("payload") for ev in events] == ["task"]
    task = events[0].task
    assert state(task.status.state) == "TASK_STATE_COMPLETED"
    assert "".join(sdk_parts_text(a.parts) for a in task.artifacts) == TEXT
    assert sdk_parts_text(task.history[0].parts) == "hello" and task.history[0].role == Role.ROLE_USER


async def test_sdk_stream(grpc_live):
    async with sdk_client(grpc_live.target, "chunks", streaming=True) as client:
        events = [summarize(ev) async for ev in client.send_message(SendMessageRequest(message=sdk_message("x")))]
    assert events[0] == ("task", "TASK_STATE_SUBMITTED")
    assert events[-1] == ("status", "TASK_STATE_COMPLETED")
    assert [e for e in events if e[0] == "artifact"] == [
        ("artifact", CHUNKS[0], False, False), ("artifact", CHUNKS[1], True, False), ("artifact", CHUNKS[2], True, False),
        ("artifact", "", True, True),  # the answer's end, marked when every piece went out already (issue 25)
    ]


async def test_sdk_get_and_list(grpc_live):
    async with sdk_client(grpc_live.target, "chunks", streaming=False) as client:
        first = [ev async for ev in client.send_message(SendMessageRequest(message=sdk_message("a")))][-1].task
        again = sdk_message("b", context_id=first.context_id)
        second = [ev async for ev in client.send_message(SendMessageRequest(message=again))][-1].task
        got = await client.get_task(GetTaskRequest(id=first.id, history_length=1))
        listed = await client.list_tasks(ListTasksRequest(context_id=first.context_id, page_size=1))
        rest = await client.list_tasks(ListTasksRequest(context_id=first.context_id, page_token=listed.next_page_token))
    assert got.id == first.id and state(got.status.state) == "TASK_STATE_COMPLETED"
    assert [sdk_parts_text(msg.parts) for msg in got.history] == ["a"]
    assert listed.total_size == 2 and len(listed.tasks) == 1 and listed.next_page_token
    assert {listed.tasks[0].id, rest.tasks[0].id} == {first.id, second.id}


async def test_sdk_tenant_selects_the_agent(grpc_live):
    async with sdk_client(grpc_live.target, "ask", streaming=False) as client:
        asked = [ev async for ev in client.send_message(SendMessageRequest(message=sdk_message("hi")))][-1].task
        assert state(asked.status.state) == "TASK_STATE_INPUT_REQUIRED"
        reply = sdk_message("Ada", task_id=asked.id, context_id=asked.context_id)
        done = [ev async for ev in client.send_message(SendMessageRequest(message=reply))][-1].task
    assert state(done.status.state) == "TASK_STATE_COMPLETED"
    assert "".join(sdk_parts_text(a.parts) for a in done.artifacts) == "Hello, Ada!"


async def test_sdk_cancel_running_task(grpc_live):
    async with sdk_client(grpc_live.target, "slow", streaming=True) as client:
        stream = client.send_message(SendMessageRequest(message=sdk_message("go slowly")))
        async with aclosing(stream):
            seen = await take(stream, until=lambda ev: ev.WhichOneof("payload") == "artifact_update")
            task_id = seen[0].task.id
            canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.id == task_id and state(canceled.status.state) == "TASK_STATE_CANCELED"
            rest = [summarize(ev) for ev in await take(stream)]
        assert rest[-1] == ("status", "TASK_STATE_CANCELED")
        with pytest.raises(SdkTaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))


async def test_sdk_subscribe(grpc_live):
    async with sdk_client(grpc_live.target, "slow", streaming=True) as client:
        request = SendMessageRequest(message=sdk_message("go"),
                                     configuration=SendMessageConfiguration(return_immediately=True))
        stream = client.send_message(request)
        async with aclosing(stream):
            first = await take(stream, until=lambda ev: True)
        task_id = first[0].task.id
        sub = client.subscribe(SubscribeToTaskRequest(id=task_id))
        async with aclosing(sub):
            snapshot = await take(sub, until=lambda ev: True)
            assert snapshot[0].WhichOneof("payload") == "task" and snapshot[0].task.id == task_id
            grpc_live.gate.open()
            rest = [summarize(ev) for ev in await take(sub)]
        assert rest[-1] == ("status", "TASK_STATE_COMPLETED")
        assert ("artifact", SLOW_LAST, True, True) in rest
        got = await client.get_task(GetTaskRequest(id=task_id))
        assert "".join(sdk_parts_text(a.parts) for a in got.artifacts) == SLOW_FIRST + SLOW_LAST


async def test_sdk_sees_typed_errors(grpc_live):
    async with sdk_client(grpc_live.target, "chunks", streaming=True) as client:
        with pytest.raises(SdkTaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))
        done = await take(client.send_message(SendMessageRequest(message=sdk_message("x"))))
        task_id = done[0].task.id
        with pytest.raises(SdkTaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
        with pytest.raises(SdkUnsupportedOperationError):
            await take(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        with pytest.raises(SdkInvalidParamsError):
            bad = Message(message_id=str(uuid.uuid4()), parts=[Part(text="no role")])
            await take(client.send_message(SendMessageRequest(message=bad)))


# --- Parley's client -> an a2a-sdk 1.3 gRPC server -----------------------------------------


@asynccontextmanager
async def sdk_grpc_server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """An a2a-sdk 1.3 gRPC server on 127.0.0.1 with an echo agent; `slow` in the text waits for the event."""
    from a2a.helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import a2a_pb2_grpc

    release = asyncio.Event()

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            if context.current_task is None:
                await event_queue.enqueue_event(new_task_from_user_message(context.message))
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.start_work()
            text = context.get_user_input()
            if "slow" in text:
                await updater.add_artifact([Part(text=SLOW_FIRST)], artifact_id="echo", name="echo",
                                           last_chunk=False)
                await release.wait()
                await updater.add_artifact([Part(text=SLOW_LAST)], artifact_id="echo", name="echo",
                                           append=True, last_chunk=True)
            else:
                for i, piece in enumerate(CHUNKS):
                    await updater.add_artifact([Part(text=f"{piece}")], artifact_id="echo", name="echo",
                                               append=i > 0, last_chunk=i == len(CHUNKS) - 1)
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    target = f"127.0.0.1:{port}"
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(),
                                    agent_card=sdk_card(target, "", name="sdk13"))
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    await server.start()
    try:
        yield target, release
    finally:
        release.set()
        await server.stop(grace=None)
        with contextlib.suppress(Exception):
            await handler.aclose()


@pytest.fixture
async def sdk_server():
    async with sdk_grpc_server() as found:
        yield found


@pytest.fixture
async def client_for_sdk(sdk_server):
    client = A2AClient(GrpcTransport(None, sdk_server[0], "1.0"))
    yield client
    await client.close()


async def test_parley_client_sends_and_gets(client_for_sdk):
    task = await client_for_sdk.send("hello")
    assert isinstance(task, m.Task) and task.status.state is m.TaskState.COMPLETED
    assert artifact_text(task) == TEXT
    got = await client_for_sdk.get(task.id)
    assert got.id == task.id and got.context_id == task.context_id and artifact_text(got) == TEXT
    assert text_of(got.history[0].parts) == "hello"


async def test_parley_client_streams(client_for_sdk):
    events = []
    async with asyncio.timeout(WAIT):
        async for ev in client_for_sdk.stream("hello"):
            events.append(ev)
    assert isinstance(events[0], m.Task)
    chunks = [ev for ev in events if isinstance(ev, m.TaskArtifactUpdateEvent)]
    assert [(text_of(c.artifact.parts), c.append, c.last_chunk) for c in chunks] == [
        (CHUNKS[0], False, False), (CHUNKS[1], True, False), (CHUNKS[2], True, True)
    ]
    assert isinstance(events[-1], m.TaskStatusUpdateEvent) and events[-1].status.state is m.TaskState.COMPLETED


async def test_parley_client_lists(client_for_sdk):
    a = await client_for_sdk.send("a")
    await client_for_sdk.send("b", context_id=a.context_id)
    page = await client_for_sdk.list(context_id=a.context_id)
    assert {t.context_id for t in page.tasks} == {a.context_id} and len(page.tasks) == 2


async def test_parley_client_cancels_and_subscribes(client_for_sdk, sdk_server):
    _, release = sdk_server
    stream = client_for_sdk.stream("slow one")
    async with aclosing(stream):
        seen = await take(stream, until=lambda ev: isinstance(ev, m.TaskArtifactUpdateEvent))
        task_id = seen[0].id
        canceled = await client_for_sdk.cancel(task_id)
        assert canceled.status.state is m.TaskState.CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client_for_sdk.cancel(task_id)

    started = await client_for_sdk.send("slow two", blocking=False)
    sub = client_for_sdk.resubscribe(started.id)
    async with aclosing(sub):
        first = await take(sub, until=lambda ev: True)
        assert isinstance(first[0], m.Task) and first[0].id == started.id
        if not first[0].artifacts:  # the first chunk may still be on its way
            await take(sub, until=lambda ev: isinstance(ev, m.TaskArtifactUpdateEvent))
        release.set()
        rest = await take(sub)
    assert [text_of(ev.artifact.parts) for ev in rest if isinstance(ev, m.TaskArtifactUpdateEvent)] == [SLOW_LAST]
    assert isinstance(rest[-1], m.TaskStatusUpdateEvent) and rest[-1].status.state is m.TaskState.COMPLETED


async def test_parley_client_maps_sdk_errors(client_for_sdk):
    with pytest.raises(TaskNotFoundError):
        await client_for_sdk.get("no-such-task")
    done = await client_for_sdk.send("x")
    with pytest.raises(TaskNotCancelableError):
        await client_for_sdk.cancel(done.id)
