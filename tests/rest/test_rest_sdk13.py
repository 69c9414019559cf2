"""The official a2a-sdk 1.3 client over HTTP+JSON against a live Parley server.

Two flavours of the same client (`ClientConfig.supported_protocol_bindings=["HTTP+JSON"]`):

* "1.0": `ClientFactory.create_from_url`; the SDK's `RestTransport` (`POST {url}/message:send`, ...)
  with `A2A-Version: 1.0`;
* "0.3": the SDK's `CompatRestTransport` (`POST {url}/v1/message:send`, ProtoJSON of the 0.3
  schema), chosen by the factory because the card it is given lists only an HTTP+JSON 0.3
  interface.

Every test asserts on what the SDK returns, and on the requests it put on the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from rest_support import ECHO_CHUNKS, ECHO_TEXT, SLOW_FIRST, WAIT, slow_app

from support import (
    Gate,
    drain_within,
    interviewer_question,
    interviewer_thanks,
    next_within,
    sdk_artifact_text,
    sdk_history_texts,
    sdk_message,
    sdk_parts_text,
    sdk_state_name,
    sdk_summary,
)

pytestmark = pytest.mark.interop

FLAVOURS = ["1.0", "0.3"]


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return request.param


@dataclass
class Wire:
    """(HTTP method, path, A2A-Version header) of every request the SDK sent."""

    calls: list[tuple[str, str, str | None]] = field(default_factory=list)

    async def hook(self, request: httpx.Request) -> None:
        self.calls.append((request.method, request.url.path, request.headers.get("a2a-version")))

    def ops(self, base_path: str) -> list[str]:
        return [f"{m} {p.removeprefix(base_path)}" for m, p, _ in self.calls if not p.endswith("agent-card.json")]

    def versions(self) -> set[str | None]:
        return {v for _, p, v in self.calls if not p.endswith("agent-card.json")}


@dataclass
class Sdk:
    client: Client
    wire: Wire
    base_path: str
    flavour: str

    def ops(self) -> list[str]:
        return self.wire.ops(self.base_path)


def rest_0_3_card(card: AgentCard) -> AgentCard:
    """A copy of `card` offering only HTTP+JSON 0.3 (the listed entry, or one at the agent's URL)."""
    listed = [i for i in card.supported_interfaces
              if i.protocol_binding == "HTTP+JSON" and i.protocol_version.split(".")[:2] == ["0", "3"]]
    out = AgentCard()
    out.CopyFrom(card)
    del out.supported_interfaces[:]
    out.supported_interfaces.extend(listed or [AgentInterface(url=card.supported_interfaces[0].url,
                                                              protocol_binding="HTTP+JSON", protocol_version="0.3")])
    return out


@asynccontextmanager
async def sdk_client(agent_url: str, flavour: str, *, streaming: bool) -> AsyncIterator[Sdk]:
    wire = Wire()
    http = httpx.AsyncClient(timeout=WAIT, event_hooks={"request": [wire.hook]})
    config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=["HTTP+JSON"])
    try:
        if flavour == "1.0":
            client = await ClientFactory(config).create_from_url(agent_url)
        else:
            card = await A2ACardResolver(http, agent_url).get_agent_card()
            client = ClientFactory(config).create(rest_0_3_card(card))
        wire.calls.clear()
        try:
            yield Sdk(client, wire, urlsplit(agent_url).path.rstrip("/"), flavour)
        finally:
            await client.close()
    finally:
        await http.aclose()


def prefix(flavour: str) -> str:
    return "" if flavour == "1.0" else "/v1"


async def next_event(stream: AsyncIterator[StreamResponse]) -> StreamResponse:
    return await next_within(stream, WAIT)


async def drain(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return await drain_within(stream, WAIT)


async def send(c: Client, msg: Message) -> Task:
    events = await drain(c.send_message(SendMessageRequest(message=msg)))
    assert [ev.WhichOneof("payload") for ev in events][-1] in ("task", "status_update")
    return events[-1].task


# --- send, stream, get ------------------------------------------------------------------------


async def test_send_blocking(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        events = await drain(sdk.client.send_message(SendMessageRequest(message=sdk_message(ECHO_TEXT))))
        assert sdk.ops() == [f"POST {prefix(flavour)}/message:send"]
        assert sdk.wire.versions() == {flavour}
    assert [ev.WhichOneof("payload") for ev in events] == ["task"]
    task = events[0].task
    assert sdk_state_name(task.status.state) == "completed"
    assert sdk_artifact_text(task) == ECHO_TEXT
    assert sdk_history_texts(task) == [("user", ECHO_TEXT)]
    assert task.history[0].task_id == task.id and task.history[0].context_id == task.context_id


async def test_stream(server, flavour):
    async with sdk_client(server.url, flavour, streaming=True) as sdk:
        events = [sdk_summary(ev) for ev in
                  await drain(sdk.client.send_message(SendMessageRequest(message=sdk_message(ECHO_TEXT))))]
        assert sdk.ops() == [f"POST {prefix(flavour)}/message:stream"]
    first, last = events[0], events[-1]
    assert first["kind"] == "task" and first["state"] == "submitted"
    assert last == {"kind": "status", "taskId": first["taskId"], "contextId": first["contextId"], "state": "completed"}
    artifacts = [ev for ev in events if ev["kind"] == "artifact"]
    assert [a["text"] for a in artifacts] == ECHO_CHUNKS
    assert [a["append"] for a in artifacts] == [False, True, True]
    assert [a["lastChunk"] for a in artifacts] == [False, False, True]
    assert all(ev["taskId"] == first["taskId"] for ev in events)


async def test_get_task_with_history_length(server, flavour):
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=False) as sdk:
        t1 = await send(sdk.client, sdk_message("I want to learn Rust"))
        await send(sdk.client, sdk_message("it is fast", task_id=t1.id, context_id=t1.context_id))
        got = await sdk.client.get_task(GetTaskRequest(id=t1.id))
        last = await sdk.client.get_task(GetTaskRequest(id=t1.id, history_length=1))
        assert f"GET {prefix(flavour)}/tasks/{t1.id}" in sdk.ops()
    assert sdk_state_name(got.status.state) == "completed"
    assert sdk_history_texts(got) == [("user", "I want to learn Rust"), ("agent", interviewer_question("I want to learn Rust")),
                                  ("user", "it is fast")]
    assert sdk_history_texts(last) == [("user", "it is fast")]


async def test_get_unknown_task_is_task_not_found(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        with pytest.raises(TaskNotFoundError):
            await sdk.client.get_task(GetTaskRequest(id="no-such-task"))


async def test_list_tasks_over_rest_1_0(server):
    async with sdk_client(server.url, "1.0", streaming=False) as sdk:
        a = await send(sdk.client, sdk_message("alpha"))
        b = await send(sdk.client, sdk_message("beta", context_id=a.context_id))
        page = await sdk.client.list_tasks(ListTasksRequest(context_id=a.context_id, include_artifacts=True))
        assert {t.id for t in page.tasks} == {a.id, b.id} and page.total_size == 2
        assert {sdk_artifact_text(t) for t in page.tasks} == {"alpha", "beta"}
        done = await sdk.client.list_tasks(ListTasksRequest(context_id=a.context_id,
                                                            status=TaskState.TASK_STATE_COMPLETED, page_size=1))
        assert len(done.tasks) == 1 and done.next_page_token
        assert "GET /tasks" in sdk.ops()


# --- multi-turn ----------------------------------------------------------------------------------


async def test_multiturn_blocking(server, flavour):
    first, second = "I want to learn Rust", "it is fast and safe"
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=False) as sdk:
        t1 = await send(sdk.client, sdk_message(first))
        assert sdk_state_name(t1.status.state) == "input-required"
        assert sdk_parts_text(t1.status.message.parts) == interviewer_question(first)
        t2 = await send(sdk.client, sdk_message(second, task_id=t1.id, context_id=t1.context_id))
    assert t2.id == t1.id and t2.context_id == t1.context_id
    assert sdk_state_name(t2.status.state) == "completed"
    assert sdk_artifact_text(t2) == interviewer_thanks(first, second)


async def test_multiturn_streaming(server, flavour):
    first, second = "I want to learn Rust", "it is fast and safe"
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=True) as sdk:
        c = sdk.client
        turn1 = [sdk_summary(ev) for ev in await drain(c.send_message(SendMessageRequest(message=sdk_message(first))))]
        task_id, ctx = turn1[0]["taskId"], turn1[0]["contextId"]
        assert turn1[-1] == {"kind": "status", "taskId": task_id, "contextId": ctx, "state": "input-required",
                             "text": interviewer_question(first)}
        follow_up = sdk_message(second, task_id=task_id, context_id=ctx)
        turn2 = [sdk_summary(ev) for ev in await drain(c.send_message(SendMessageRequest(message=follow_up)))]
        assert sdk.ops() == [f"POST {prefix(flavour)}/message:stream"] * 2
    assert all(ev["taskId"] == task_id and ev["contextId"] == ctx for ev in turn2)
    assert turn2[-1]["kind"] == "status" and turn2[-1]["state"] == "completed"
    assert "".join(ev["text"] for ev in turn2 if ev["kind"] == "artifact") == interviewer_thanks(first, second)


async def test_message_to_a_finished_task_is_rejected(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        done = await send(sdk.client, sdk_message("x"))
        with pytest.raises(UnsupportedOperationError):
            await send(sdk.client, sdk_message("more", task_id=done.id, context_id=done.context_id))


# --- cancel and resubscribe (a slow agent this test controls) ---------------------------------------


async def _start_slow_stream(c: Client) -> tuple[AsyncIterator[StreamResponse], list[dict[str, Any]]]:
    stream = c.send_message(SendMessageRequest(message=sdk_message("go slowly")))
    seen = [sdk_summary(await next_event(stream))]
    assert seen[0]["kind"] == "task"
    while seen[-1]["kind"] != "artifact":
        seen.append(sdk_summary(await next_event(stream)))
    assert seen[-1]["text"] == SLOW_FIRST and seen[-1]["lastChunk"] is False
    return stream, seen


async def test_cancel_a_running_task(serve, flavour):
    gate = Gate()
    srv = serve(slow_app(gate))
    async with sdk_client(srv.url, flavour, streaming=True) as sdk:
        c = sdk.client
        stream, seen = await _start_slow_stream(c)
        async with aclosing(stream):
            task_id = seen[0]["taskId"]
            canceled = await c.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.id == task_id and sdk_state_name(canceled.status.state) == "canceled"
            rest = [sdk_summary(ev) for ev in await drain(stream)]
        assert rest[-1]["kind"] == "status" and rest[-1]["state"] == "canceled"
        got = await c.get_task(GetTaskRequest(id=task_id))
        assert sdk_state_name(got.status.state) == "canceled" and sdk_artifact_text(got) == SLOW_FIRST
        with pytest.raises(TaskNotCancelableError):
            await c.cancel_task(CancelTaskRequest(id=task_id))
        assert f"POST {prefix(flavour)}/tasks/{task_id}:cancel" in sdk.ops()
    assert not gate.opened


async def test_resubscribe_to_a_running_task(serve, flavour):
    srv = serve(slow_app())
    async with sdk_client(srv.url, flavour, streaming=True) as sdk:
        c = sdk.client
        stream, seen = await _start_slow_stream(c)
        await stream.aclose()  # disconnect; the task keeps running
        task_id = seen[0]["taskId"]
        async with aclosing(c.subscribe(SubscribeToTaskRequest(id=task_id))) as resub:
            first = sdk_summary(await next_event(resub))
            assert first["kind"] == "task" and first["taskId"] == task_id and first["state"] == "working"
            await c.cancel_task(CancelTaskRequest(id=task_id))
            rest = [sdk_summary(ev) for ev in await drain(resub)]
        assert rest[-1] == {"kind": "status", "taskId": task_id, "contextId": seen[0]["contextId"],
                            "state": "canceled"}
        assert f"POST {prefix(flavour)}/tasks/{task_id}:subscribe" in sdk.ops()


async def test_cancel_a_finished_task_is_not_cancelable(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        done = await send(sdk.client, sdk_message("x"))
        with pytest.raises(TaskNotCancelableError):
            await sdk.client.cancel_task(CancelTaskRequest(id=done.id))
