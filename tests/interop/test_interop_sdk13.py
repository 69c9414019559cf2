"""The official a2a-sdk 1.3 client against a live Parley server, over real HTTP.

Three flavours of the same client, parametrised as `flavour`:

* "1.0": `ClientFactory.create_from_url`; the SDK picks Parley's 1.0 JSON-RPC
  interface and sends `A2A-Version: 1.0` with 1.0 method names.
* "1.0-rest": the same, with the client restricted to the HTTP+JSON binding
  (`ClientConfig.supported_protocol_bindings=["HTTP+JSON"]`).
* "0.3-compat": the SDK's 0.3 compatibility transport, chosen by the factory
  because the card it is given only lists Parley's 0.3 interface; it sends
  `a2a-version: 0.3` and the 0.3 method names (`message/send`, ...).

Every test asserts on what the SDK client returns, never on raw JSON.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest
from a2a.client import create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from interop_support import (
    ECHO_CHUNKS,
    ECHO_TEXT,
    FLAVOURS,
    SLOW_ARTIFACT_ID,
    SLOW_FIRST,
    SLOW_SECOND,
    V1_FLAVOURS,
    Gate,
    OpenGateOnKeepalive,
    drain,
    next_event,
    sdk_client,
    slow_app,
)

from parley.app import Settings
from support import (
    interviewer_question,
    interviewer_thanks,
    sdk_artifact_text,
    sdk_history_texts,
    sdk_message,
    sdk_parts_text,
    sdk_state_name,
    sdk_summary,
)

pytestmark = pytest.mark.interop


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=V1_FLAVOURS)
def v1_flavour(request: pytest.FixtureRequest) -> str:
    """The A2A 1.0 flavours only (operations the SDK's 0.3 compat transport does not offer)."""
    return request.param


EXPECTED_WIRE = {
    "1.0": ("1.0", {"send": "SendMessage", "stream": "SendStreamingMessage", "get": "GetTask",
                    "cancel": "CancelTask", "subscribe": "SubscribeToTask", "list": "ListTasks"}),
    "1.0-rest": ("1.0", {"send": "POST /message:send", "stream": "POST /message:stream", "get": "GET /tasks/{id}",
                         "cancel": "POST /tasks/{id}:cancel", "subscribe": "POST /tasks/{id}:subscribe",
                         "list": "GET /tasks"}),
    "0.3-compat": ("0.3", {"send": "message/send", "stream": "message/stream", "get": "tasks/get",
                           "cancel": "tasks/cancel", "subscribe": "tasks/resubscribe"}),
}


def wire_method(flavour: str, op: str) -> str:
    return EXPECTED_WIRE[flavour][1][op]


def assert_wire_version(sdk, flavour: str) -> None:
    assert sdk.wire.versions == {EXPECTED_WIRE[flavour][0]}, sdk.wire.calls


# --- send (blocking) ------------------------------------------------------------


async def test_send_blocking_returns_completed_echo_task(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        events = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message(ECHO_TEXT)))]

    assert [ev.WhichOneof("payload") for ev in events] == ["task"]
    task = events[0].task
    assert sdk_state_name(task.status.state) == "completed"
    assert task.id and task.context_id
    assert sdk_artifact_text(task) == ECHO_TEXT
    assert [sdk_parts_text(a.parts) for a in task.artifacts] == [ECHO_TEXT]
    assert sdk_history_texts(task)[0] == ("user", ECHO_TEXT)
    assert task.history[0].task_id == task.id and task.history[0].context_id == task.context_id
    assert sdk.wire.methods == [wire_method(flavour, "send")]
    assert_wire_version(sdk, flavour)


async def test_send_on_named_agent_path(server, flavour):
    """The client resolves the card under /a2a/echo and talks to the URL the card names."""
    async with sdk_client(f"{server.url}/a2a/echo", flavour, streaming=False) as sdk:
        assert {i.url for i in sdk.card.supported_interfaces} == {f"{server.url}/a2a/echo"}
        events = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("hi there")))]
    task = events[-1].task
    assert sdk_state_name(task.status.state) == "completed"
    assert sdk_artifact_text(task) == "hi there"


async def test_create_client_with_defaults_streams(server):
    """`create_client(url)` with no config: JSON-RPC, A2A 1.0, streaming (the card says streaming: true)."""
    client = await create_client(server.url)
    try:
        events = [sdk_summary(ev) async for ev in client.send_message(SendMessageRequest(message=sdk_message(ECHO_TEXT)))]
    finally:
        await client.close()
    assert events[0]["kind"] == "task"
    assert "".join(ev["text"] for ev in events if ev["kind"] == "artifact") == ECHO_TEXT
    assert events[-1]["kind"] == "status" and events[-1]["state"] == "completed"


# --- stream -----------------------------------------------------------------------


async def test_stream_yields_task_then_chunks_then_completed(server, flavour):
    async with sdk_client(server.url, flavour, streaming=True) as sdk:
        events = [
            sdk_summary(ev)
            async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message(ECHO_TEXT)))
        ]
        assert sdk.wire.methods == [wire_method(flavour, "stream")]
        assert_wire_version(sdk, flavour)

    first, last = events[0], events[-1]
    assert first["kind"] == "task" and first["state"] == "submitted"
    assert last == {"kind": "status", "taskId": first["taskId"], "contextId": first["contextId"], "state": "completed"}
    assert all(ev["taskId"] == first["taskId"] and ev["contextId"] == first["contextId"] for ev in events)

    artifacts = [ev for ev in events if ev["kind"] == "artifact"]
    assert [a["text"] for a in artifacts] == ECHO_CHUNKS
    assert "".join(a["text"] for a in artifacts) == ECHO_TEXT
    assert len({a["artifactId"] for a in artifacts}) == 1
    assert [a["append"] for a in artifacts] == [False, True, True]
    assert [a["lastChunk"] for a in artifacts] == [False, False, True]

    # Nothing terminal before the end; only the task, status and artifact kinds.
    statuses = [ev["state"] for ev in events if ev["kind"] == "status"]
    assert statuses[-1] == "completed" and "completed" not in statuses[:-1]
    assert {ev["kind"] for ev in events} <= {"task", "status", "artifact"}


# --- get --------------------------------------------------------------------------


async def test_get_task_returns_the_finished_task(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        sent = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message(ECHO_TEXT)))]
        task_id = sent[-1].task.id
        got = await sdk.client.get_task(GetTaskRequest(id=task_id))
        assert sdk.wire.methods == [wire_method(flavour, "send"), wire_method(flavour, "get")]
        assert_wire_version(sdk, flavour)

    assert got.id == task_id
    assert got.context_id == sent[-1].task.context_id
    assert sdk_state_name(got.status.state) == "completed"
    assert sdk_artifact_text(got) == ECHO_TEXT
    assert sdk_history_texts(got) == [("user", ECHO_TEXT)]


async def test_get_unknown_task_raises_task_not_found(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        with pytest.raises(TaskNotFoundError):
            await sdk.client.get_task(GetTaskRequest(id="no-such-task"))


# --- list: only in 1.0 (the SDK's 0.3 compat transport raises NotImplementedError for ListTasks) ---


async def test_list_tasks_filters_by_context_and_pages(server, v1_flavour):
    async with sdk_client(server.url, v1_flavour, streaming=False) as sdk:
        c = sdk.client
        first = [ev async for ev in c.send_message(SendMessageRequest(message=sdk_message("alpha")))][-1].task
        ctx = first.context_id
        second = [
            ev async for ev in c.send_message(SendMessageRequest(message=sdk_message("beta", context_id=ctx)))
        ][-1].task
        other = [ev async for ev in c.send_message(SendMessageRequest(message=sdk_message("gamma")))][-1].task
        assert second.context_id == ctx and other.context_id != ctx

        in_ctx = await c.list_tasks(ListTasksRequest(context_id=ctx))
        assert {t.id for t in in_ctx.tasks} == {first.id, second.id}
        assert in_ctx.total_size == 2
        assert all(sdk_state_name(t.status.state) == "completed" for t in in_ctx.tasks)

        everything = await c.list_tasks(ListTasksRequest())
        assert {first.id, second.id, other.id} <= {t.id for t in everything.tasks}

        completed = await c.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED, context_id=ctx))
        assert {t.id for t in completed.tasks} == {first.id, second.id}
        working = await c.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING, context_id=ctx))
        assert list(working.tasks) == []

        # Artifacts only on request; historyLength 0 means no history.
        assert all(len(t.artifacts) == 0 for t in in_ctx.tasks)
        full = await c.list_tasks(ListTasksRequest(context_id=ctx, include_artifacts=True, history_length=0))
        assert {t.id: sdk_artifact_text(t) for t in full.tasks} == {first.id: "alpha", second.id: "beta"}
        assert all(len(t.history) == 0 for t in full.tasks)

        # statusTimestampAfter: ">=" the given time (spec 3.1.4).
        newest = max((t.status.timestamp for t in in_ctx.tasks), key=lambda ts: ts.ToNanoseconds())
        since = ListTasksRequest(context_id=ctx)
        since.status_timestamp_after.CopyFrom(newest)
        recent = await c.list_tasks(since)
        assert [t.id for t in recent.tasks] == [t.id for t in in_ctx.tasks if t.status.timestamp == newest]
        later = ListTasksRequest(context_id=ctx)
        later.status_timestamp_after.FromNanoseconds(newest.ToNanoseconds() + 3_600 * 10**9)
        assert list((await c.list_tasks(later)).tasks) == []

        page1 = await c.list_tasks(ListTasksRequest(context_id=ctx, page_size=1))
        assert len(page1.tasks) == 1 and page1.next_page_token
        page2 = await c.list_tasks(ListTasksRequest(context_id=ctx, page_size=1, page_token=page1.next_page_token))
        assert len(page2.tasks) == 1
        assert {page1.tasks[0].id, page2.tasks[0].id} == {first.id, second.id}
        assert sdk.wire.versions == {"1.0"}
        assert set(sdk.wire.methods) == {wire_method(v1_flavour, "send"), wire_method(v1_flavour, "list")}


# --- multi-turn (input-required, then continue with taskId + contextId) -----------


async def test_multiturn_blocking(server, flavour):
    first_text, second_text = "I want to learn Rust", "it is fast and safe"
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=False) as sdk:
        c = sdk.client
        turn1 = [ev async for ev in c.send_message(SendMessageRequest(message=sdk_message(first_text)))]
        assert [ev.WhichOneof("payload") for ev in turn1] == ["task"]
        t1 = turn1[0].task
        assert sdk_state_name(t1.status.state) == "input-required"
        assert sdk_parts_text(t1.status.message.parts) == interviewer_question(first_text)
        assert list(t1.artifacts) == []

        follow_up = sdk_message(second_text, task_id=t1.id, context_id=t1.context_id)
        turn2 = [ev async for ev in c.send_message(SendMessageRequest(message=follow_up))]
        t2 = turn2[-1].task
        assert t2.id == t1.id and t2.context_id == t1.context_id
        assert sdk_state_name(t2.status.state) == "completed"
        assert sdk_artifact_text(t2) == interviewer_thanks(first_text, second_text)

        got = await c.get_task(GetTaskRequest(id=t1.id))
        assert sdk_history_texts(got) == [
            ("user", first_text),
            ("agent", interviewer_question(first_text)),
            ("user", second_text),
        ]
        assert all(msg.context_id == t1.context_id for msg in got.history)
        last_only = await c.get_task(GetTaskRequest(id=t1.id, history_length=1))
        assert sdk_history_texts(last_only) == [("user", second_text)]


async def test_multiturn_streaming(server, flavour):
    first_text, second_text = "I want to learn Rust", "it is fast and safe"
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=True) as sdk:
        c = sdk.client
        turn1 = [sdk_summary(ev) async for ev in c.send_message(SendMessageRequest(message=sdk_message(first_text)))]
        assert turn1[0]["kind"] == "task"
        task_id, ctx = turn1[0]["taskId"], turn1[0]["contextId"]
        # The stream ends at the interrupted state, with the agent's question.
        assert turn1[-1] == {"kind": "status", "taskId": task_id, "contextId": ctx, "state": "input-required",
                             "text": interviewer_question(first_text)}

        follow_up = sdk_message(second_text, task_id=task_id, context_id=ctx)
        turn2 = [sdk_summary(ev) async for ev in c.send_message(SendMessageRequest(message=follow_up))]
        assert turn2[0]["kind"] == "task"
        assert all(ev["taskId"] == task_id and ev["contextId"] == ctx for ev in turn2)
        assert turn2[-1]["kind"] == "status" and turn2[-1]["state"] == "completed"
        text = "".join(ev["text"] for ev in turn2 if ev["kind"] == "artifact")
        assert text == interviewer_thanks(first_text, second_text)
        assert sdk.wire.methods == [wire_method(flavour, "stream")] * 2


async def test_continue_with_task_id_only_infers_context(server, flavour):
    """Spec 3.4.3: with only taskId, the agent infers the contextId from the task."""
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=False) as sdk:
        t1 = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("a")))][-1].task
        assert sdk_state_name(t1.status.state) == "input-required"
        follow_up = sdk_message("b", task_id=t1.id)
        t2 = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=follow_up))][-1].task
    assert t2.id == t1.id and t2.context_id == t1.context_id
    assert sdk_state_name(t2.status.state) == "completed"
    assert sdk_artifact_text(t2) == interviewer_thanks("a", "b")


async def test_mismatched_context_is_rejected(server, flavour):
    """Spec 3.4.3: a message whose contextId differs from its task's is rejected."""
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=False) as sdk:
        t1 = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("a")))][-1].task
        wrong = sdk_message("b", task_id=t1.id, context_id=t1.context_id + "-other")
        with pytest.raises(InvalidParamsError):
            [ev async for ev in sdk.client.send_message(SendMessageRequest(message=wrong))]
        still = await sdk.client.get_task(GetTaskRequest(id=t1.id))
    assert sdk_state_name(still.status.state) == "input-required"


async def test_message_to_unknown_task_is_task_not_found(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        with pytest.raises(TaskNotFoundError):
            [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("b", task_id="nope")))]


async def test_message_to_finished_task_is_rejected(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        done = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("x")))][-1].task
        again = sdk_message("more", task_id=done.id, context_id=done.context_id)
        with pytest.raises(UnsupportedOperationError):
            [ev async for ev in sdk.client.send_message(SendMessageRequest(message=again))]


# --- cancel -----------------------------------------------------------------------


async def test_cancel_running_task(serve, flavour):
    gate = Gate()
    srv = serve(slow_app(gate))
    async with sdk_client(srv.url, flavour, streaming=True) as sdk:
        c = sdk.client
        async with aclosing(c.send_message(SendMessageRequest(message=sdk_message("go slowly")))) as stream:
            first = sdk_summary(await next_event(stream))
            assert first["kind"] == "task"
            task_id = first["taskId"]
            seen = [first]
            while seen[-1]["kind"] != "artifact":
                seen.append(sdk_summary(await next_event(stream)))
            assert seen[-1]["text"] == SLOW_FIRST

            running = await c.get_task(GetTaskRequest(id=task_id))
            assert sdk_state_name(running.status.state) == "working"
            assert sdk_artifact_text(running) == SLOW_FIRST

            canceled = await c.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.id == task_id
            assert sdk_state_name(canceled.status.state) == "canceled"

            # The open stream reports the cancellation, then closes.
            rest = [sdk_summary(ev) for ev in await drain(stream)]
            assert rest, "the stream closed without reporting the canceled state"
            assert rest[-1]["kind"] == "status" and rest[-1]["state"] == "canceled"
            assert not [ev for ev in rest if ev["kind"] == "artifact"]

        got = await c.get_task(GetTaskRequest(id=task_id))
        assert sdk_state_name(got.status.state) == "canceled"
        assert sdk_artifact_text(got) == SLOW_FIRST

        with pytest.raises(TaskNotCancelableError):
            await c.cancel_task(CancelTaskRequest(id=task_id))
        assert wire_method(flavour, "cancel") in sdk.wire.methods
    assert not gate.opened


async def test_cancel_input_required_task(server, flavour):
    """An interrupted task is not terminal: it can be canceled, and then takes no more input."""
    async with sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=False) as sdk:
        t1 = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("a")))][-1].task
        assert sdk_state_name(t1.status.state) == "input-required"
        canceled = await sdk.client.cancel_task(CancelTaskRequest(id=t1.id))
        assert canceled.id == t1.id and sdk_state_name(canceled.status.state) == "canceled"
        late = sdk_message("b", task_id=t1.id, context_id=t1.context_id)
        with pytest.raises(UnsupportedOperationError):
            [ev async for ev in sdk.client.send_message(SendMessageRequest(message=late))]


async def test_cancel_finished_task_is_not_cancelable(server, flavour):
    async with sdk_client(server.url, flavour, streaming=False) as sdk:
        done = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("x")))][-1].task
        with pytest.raises(TaskNotCancelableError):
            await sdk.client.cancel_task(CancelTaskRequest(id=done.id))


# --- resubscribe ------------------------------------------------------------------


async def _start_slow_stream(c):
    """Start a streaming send to the slow agent; return (stream, events up to the first artifact chunk)."""
    stream = c.send_message(SendMessageRequest(message=sdk_message("go slowly")))
    seen = [sdk_summary(await next_event(stream))]
    assert seen[0]["kind"] == "task"
    while seen[-1]["kind"] != "artifact":
        seen.append(sdk_summary(await next_event(stream)))
    assert seen[-1]["text"] == SLOW_FIRST and seen[-1]["lastChunk"] is False
    return stream, seen


def _assert_rest_after_release(rest: list[dict], task_id: str, ctx: str) -> None:
    assert all(ev["taskId"] == task_id and ev["contextId"] == ctx for ev in rest)
    artifacts = [ev for ev in rest if ev["kind"] == "artifact"]
    assert [(a["artifactId"], a["text"], a["append"], a["lastChunk"]) for a in artifacts] == [
        (SLOW_ARTIFACT_ID, SLOW_SECOND, True, True)
    ]
    assert rest[-1]["kind"] == "status" and rest[-1]["state"] == "completed"


async def test_resubscribe_after_disconnect_delivers_the_rest(serve, flavour):
    gate = Gate()
    srv = serve(slow_app(gate))
    async with sdk_client(srv.url, flavour, streaming=True) as sdk:
        c = sdk.client
        stream, seen = await _start_slow_stream(c)
        task_id, ctx = seen[0]["taskId"], seen[0]["contextId"]
        await stream.aclose()  # the client goes away; the task keeps running

        async with aclosing(c.subscribe(SubscribeToTaskRequest(id=task_id))) as resub:
            snapshot = await next_event(resub)
            # The first event of a resubscription is the task as it is now.
            assert snapshot.WhichOneof("payload") == "task"
            assert snapshot.task.id == task_id and snapshot.task.context_id == ctx
            assert sdk_state_name(snapshot.task.status.state) == "working"
            assert sdk_artifact_text(snapshot.task) == SLOW_FIRST

            gate.open()
            rest = [sdk_summary(ev) for ev in await drain(resub)]
        _assert_rest_after_release(rest, task_id, ctx)

        got = await c.get_task(GetTaskRequest(id=task_id))
        assert sdk_state_name(got.status.state) == "completed"
        assert sdk_artifact_text(got) == SLOW_FIRST + SLOW_SECOND
        assert sdk.wire.methods[:2] == [wire_method(flavour, "stream"), wire_method(flavour, "subscribe")]


async def test_resubscribe_alongside_the_original_stream(serve, flavour):
    """Both streams of one task get the remaining events, in the same order."""
    gate = Gate()
    srv = serve(slow_app(gate))
    async with sdk_client(srv.url, flavour, streaming=True) as sdk:
        c = sdk.client
        stream, seen = await _start_slow_stream(c)
        task_id, ctx = seen[0]["taskId"], seen[0]["contextId"]
        async with aclosing(stream), aclosing(c.subscribe(SubscribeToTaskRequest(id=task_id))) as resub:
            snapshot = await next_event(resub)
            assert snapshot.WhichOneof("payload") == "task" and snapshot.task.id == task_id
            gate.open()
            original_rest, resub_rest = await asyncio.gather(drain(stream), drain(resub))
        original_rest = [sdk_summary(ev) for ev in original_rest]
        resub_rest = [sdk_summary(ev) for ev in resub_rest]
        _assert_rest_after_release(original_rest, task_id, ctx)
        assert resub_rest == original_rest


async def test_subscribe_to_finished_task_is_unsupported(server, v1_flavour):
    """1.0 only: SubscribeToTask on a terminal task is UnsupportedOperationError (spec 3.1.6)."""
    async with sdk_client(server.url, v1_flavour, streaming=True) as sdk:
        events = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message("x")))]
        task_id = events[0].task.id
        with pytest.raises(UnsupportedOperationError):
            async with aclosing(sdk.client.subscribe(SubscribeToTaskRequest(id=task_id))) as resub:
                await drain(resub)


async def test_subscribe_to_input_required_task_follows_it_to_the_end(server, flavour):
    """A2A 1.0 section 3.1.6: the first event is the task as it is (input-required); the stream stays open,
    carries the events that follow the answer sent on another connection, and closes when the task ends."""
    first_text, second_text = "a", "because"
    async with (
        sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=True) as sdk,
        sdk_client(f"{server.url}/a2a/interviewer", flavour, streaming=False) as other,
    ):
        first = [ev async for ev in sdk.client.send_message(SendMessageRequest(message=sdk_message(first_text)))]
        task_id, ctx = first[0].task.id, first[0].task.context_id
        async with aclosing(sdk.client.subscribe(SubscribeToTaskRequest(id=task_id))) as resub:
            snapshot = await next_event(resub)
            assert snapshot.WhichOneof("payload") == "task" and snapshot.task.id == task_id
            assert sdk_state_name(snapshot.task.status.state) == "input-required"
            assert sdk_parts_text(snapshot.task.status.message.parts) == interviewer_question(first_text)
            answer = sdk_message(second_text, task_id=task_id, context_id=ctx)
            done = [ev async for ev in other.client.send_message(SendMessageRequest(message=answer))]
            assert sdk_state_name(done[-1].task.status.state) == "completed"
            rest = [sdk_summary(ev) for ev in await drain(resub)]  # returns only because the server closed it
    assert rest[0] == {"kind": "status", "taskId": task_id, "contextId": ctx, "state": "working"}
    assert rest[-1]["kind"] == "status" and rest[-1]["state"] == "completed"
    assert "".join(ev["text"] for ev in rest if ev["kind"] == "artifact") == interviewer_thanks(first_text, second_text)


async def test_non_blocking_send_then_subscribe(serve, flavour):
    """returnImmediately (0.3: blocking=false) returns the task at once; subscribing follows it to the end."""
    gate = Gate()
    srv = serve(slow_app(gate))
    config = SendMessageConfiguration(return_immediately=True)
    async with sdk_client(srv.url, flavour, streaming=False) as sender:
        sent = [ev async for ev in sender.client.send_message(
            SendMessageRequest(message=sdk_message("go slowly"), configuration=config)
        )]
    assert [ev.WhichOneof("payload") for ev in sent] == ["task"]
    task = sent[0].task
    assert sdk_state_name(task.status.state) in ("submitted", "working")

    async with (
        sdk_client(srv.url, flavour, streaming=True) as sdk,
        aclosing(sdk.client.subscribe(SubscribeToTaskRequest(id=task.id))) as resub,
    ):
        snapshot = await next_event(resub)
        assert snapshot.WhichOneof("payload") == "task" and snapshot.task.id == task.id
        assert sdk_state_name(snapshot.task.status.state) in ("submitted", "working")
        gate.open()
        rest = [sdk_summary(ev) for ev in await drain(resub)]
    assert rest[-1]["kind"] == "status" and rest[-1]["state"] == "completed"
    assert all(ev["taskId"] == task.id and ev["contextId"] == task.context_id for ev in rest)
    # Whatever part of the output the snapshot already had, the two together give all of it.
    streamed = "".join(ev["text"] for ev in rest if ev["kind"] == "artifact")
    assert sdk_artifact_text(snapshot.task) + streamed == SLOW_FIRST + SLOW_SECOND


async def test_stream_with_keepalive_comments(serve, flavour):
    """SSE keep-alive comments between events are invisible to the SDK's stream."""
    gate = Gate()
    watched = OpenGateOnKeepalive(slow_app(gate, Settings(keepalive_seconds=0.05)), gate)
    srv = serve(watched)
    async with sdk_client(srv.url, flavour, streaming=True) as sdk:
        events = [sdk_summary(ev) for ev in await drain(
            sdk.client.send_message(SendMessageRequest(message=sdk_message("go slowly")))
        )]
    assert watched.keepalives >= 1
    assert events[0]["kind"] == "task"
    assert len({(ev["taskId"], ev["contextId"]) for ev in events}) == 1
    assert [ev["text"] for ev in events if ev["kind"] == "artifact"] == [SLOW_FIRST, SLOW_SECOND]
    assert events[-1]["kind"] == "status" and events[-1]["state"] == "completed"
