"""Parley's A2AClient against the official a2a-sdk servers.

Three targets, every test runs against each:

* ``sdk13-1.0``: a2a-sdk 1.3, JSON-RPC, the client forced to A2A 1.0;
* ``sdk13-0.3``: the same server and endpoint, the client forced to A2A 0.3
  (the SDK's 0.3 compatibility layer);
* ``sdk03``: a2a-sdk 0.3.26 (own virtualenv, subprocess); its card is 0.3-only
  and the client must pick 0.3 by itself.

Synchronisation is on observable events only: stream events, or GetTask
polled in a bounded loop. Streams are consumed under a generous timeout so a
hang fails the test instead of blocking the suite; nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest

from parley.client import A2AClient
from parley.protocol import models as m
from parley.protocol.errors import MethodNotFoundError, TaskNotFoundError

from .sdk_servers import (
    ECHO_CHUNKS,
    INTERVIEW_QUESTION,
    Sdk03Unavailable,
    SdkServer,
    chunks,
    ensure_sdk03_venv,
    running,
    start_sdk03_server,
    start_sdk13_server,
)

pytestmark = pytest.mark.interop

GUARD = 30.0  # seconds: turns a hang into a failure; never an expectation about speed
POLL_ATTEMPTS = 400
POLL_PAUSE = 0.05
S = m.TaskState


# --- servers and targets ---------------------------------------------------------


@pytest.fixture(scope="module")
def sdk13() -> Iterator[SdkServer]:
    with running(start_sdk13_server) as srv:
        yield srv


@pytest.fixture(scope="module")
def sdk03() -> Iterator[SdkServer]:
    try:
        python = ensure_sdk03_venv()
    except Sdk03Unavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the a2a-sdk 0.3.26 virtualenv could not be created: {exc}", pytrace=False)
        pytest.skip(f"a2a-sdk 0.3.26 virtualenv unavailable (no network?); set CI=true to make this fail: {exc}")
    with running(lambda: start_sdk03_server(python)) as srv:
        yield srv


@dataclass(frozen=True)
class Target:
    name: str
    server: SdkServer
    force_version: str | None  # passed to A2AClient.connect
    version: str  # the protocol version the client must end up speaking
    sdk: str  # "1.3" or "0.3.26"

    def url(self, agent: str) -> str:
        return self.server.agent_url(agent)

    async def connect(self, agent: str) -> A2AClient:
        return await A2AClient.connect(self.url(agent), version=self.force_version)

    async def release(self, task_id: str) -> None:
        """Let a waiting `slow` task finish (test-only control route of the SDK server)."""
        async with httpx.AsyncClient(timeout=GUARD) as http:
            r = await http.post(f"{self.server.url}/_control/release/{task_id}")
        assert r.status_code == 200, f"the slow agent was not waiting on task {task_id}: {r.text}"


TARGETS = ("sdk13-1.0", "sdk13-0.3", "sdk03")


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    name = request.param
    if name == "sdk13-1.0":
        return Target(name, request.getfixturevalue("sdk13"), "1.0", "1.0", "1.3")
    if name == "sdk13-0.3":
        return Target(name, request.getfixturevalue("sdk13"), "0.3", "0.3", "1.3")
    return Target(name, request.getfixturevalue("sdk03"), None, "0.3", "0.3.26")


# --- helpers ---------------------------------------------------------------------


async def collect(stream: AsyncIterator[m.StreamEvent]) -> list[m.StreamEvent]:
    """All events until the client's iteration ends (bounded by GUARD)."""
    events: list[m.StreamEvent] = []
    async with asyncio.timeout(GUARD):
        async for ev in stream:
            events.append(ev)
    return events


async def wait_for_state(client: A2AClient, task_id: str, *states: m.TaskState) -> m.Task:
    """Poll GetTask until the task is in one of `states` (bounded number of polls)."""
    task = None
    for _ in range(POLL_ATTEMPTS):
        task = await client.get(task_id)
        if task.status.state in states:
            return task
        await asyncio.sleep(POLL_PAUSE)
    pytest.fail(f"task {task_id} never reached {[s.name for s in states]}; last seen: {task}")


def artifact_text(task: m.Task, artifact_id: str) -> str:
    arts = [a for a in task.artifacts or [] if a.artifact_id == artifact_id]
    assert len(arts) == 1, f"expected one artifact {artifact_id!r}, got {task.artifacts}"
    return "".join(p.text or "" for p in arts[0].parts)


def texts(msg: m.Message | None) -> str:
    assert msg is not None
    return "".join(p.text or "" for p in msg.parts)


def unique_text(prefix: str = "interop") -> str:
    return f"{prefix} {uuid.uuid4().hex[:12]} says hello"


# --- tests -------------------------------------------------------------------------


async def test_connect_picks_the_expected_interface(target: Target) -> None:
    async with await target.connect("echo") as client:
        assert client.version == target.version
        assert client.transport.url == target.url("echo")
        assert client.card is not None and client.card.capabilities.streaming is True
        offered = {(i.protocol_binding, i.protocol_version) for i in client.card.supported_interfaces}
        if target.sdk == "1.3":
            assert offered == {("JSONRPC", "1.0"), ("JSONRPC", "0.3")}
        else:
            assert offered == {("JSONRPC", "0.3")}


async def test_connect_without_version_prefers_the_first_card_entry(target: Target) -> None:
    async with await A2AClient.connect(target.url("echo")) as client:
        # SDK 1.3 lists JSONRPC 1.0 first; SDK 0.3.26 only has 0.3.
        assert client.version == ("1.0" if target.sdk == "1.3" else "0.3")


async def test_send_blocking_echo(target: Target) -> None:
    text = unique_text()
    async with await target.connect("echo") as client:
        task = await client.send(text)
    assert isinstance(task, m.Task), task
    assert task.status.state is S.COMPLETED
    assert task.id and task.context_id
    assert artifact_text(task, "echo") == text
    assert [p.text for p in task.artifacts[0].parts] == chunks(text)


async def test_stream_echo(target: Target) -> None:
    text = unique_text()
    async with await target.connect("echo") as client:
        events = await collect(client.stream(text))

    first = events[0]
    assert isinstance(first, m.Task), f"the stream must begin with the Task, got {first!r}"
    assert first.status.state in (S.SUBMITTED, S.WORKING)
    assert all(ev.task_id == first.id and ev.context_id == first.context_id for ev in events[1:])

    arts = [ev for ev in events if isinstance(ev, m.TaskArtifactUpdateEvent)]
    assert len(arts) == ECHO_CHUNKS
    assert "".join(p.text or "" for ev in arts for p in ev.artifact.parts) == text
    assert {ev.artifact.artifact_id for ev in arts} == {"echo"}
    assert [ev.append for ev in arts] == [False] + [True] * (ECHO_CHUNKS - 1)
    assert [ev.last_chunk for ev in arts] == [False] * (ECHO_CHUNKS - 1) + [True]

    states = [ev.status.state for ev in events if isinstance(ev, m.TaskStatusUpdateEvent)]
    assert states == [S.WORKING, S.COMPLETED]
    last = events[-1]
    assert isinstance(last, m.TaskStatusUpdateEvent) and last.status.state is S.COMPLETED


async def test_get_returns_the_finished_task(target: Target) -> None:
    text = unique_text()
    async with await target.connect("echo") as client:
        sent = await client.send(text)
        got = await client.get(sent.id)
        assert got.id == sent.id and got.context_id == sent.context_id
        assert got.status.state is S.COMPLETED
        assert artifact_text(got, "echo") == text
        assert any(msg.role is m.Role.USER and texts(msg) == text for msg in got.history or [])
        trimmed = await client.get(sent.id, history_length=1)
        assert trimmed.id == sent.id and len(trimmed.history or []) <= 1


async def test_list(target: Target) -> None:
    async with await target.connect("echo") as client:
        sent = await client.send(unique_text())
        if target.version == "1.0":
            page = await client.list(context_id=sent.context_id)
            assert [t.id for t in page.tasks] == [sent.id]
            assert page.tasks[0].status.state is S.COMPLETED
            assert page.next_page_token == ""
            assert page.total_size == 1
            assert not page.tasks[0].artifacts  # includeArtifacts defaults to false
            assert (await client.list(context_id=sent.context_id, state=S.WORKING)).tasks == []
            done = await client.list(context_id=sent.context_id, state=S.COMPLETED, include_artifacts=True)
            assert [t.id for t in done.tasks] == [sent.id]
            assert artifact_text(done.tasks[0], "echo") == artifact_text(sent, "echo")
            everything = await client.list(page_size=100)
            assert sent.id in {t.id for t in everything.tasks}
        else:
            # A2A 0.3 has no tasks/list: both the SDK 1.3 compat layer and SDK 0.3.26 answer -32601.
            with pytest.raises(MethodNotFoundError) as info:
                await client.list()
            assert info.value.code == -32601


async def test_cancel_slow_task(target: Target) -> None:
    async with await target.connect("slow") as client:
        started = await client.send("please take your time", blocking=False)
        assert isinstance(started, m.Task)
        await wait_for_state(client, started.id, S.WORKING)
        canceled = await client.cancel(started.id)
        assert canceled.id == started.id
        assert canceled.status.state is S.CANCELED
        assert (await client.get(started.id)).status.state is S.CANCELED


async def test_cancel_while_streaming_ends_the_stream(target: Target) -> None:
    async with await target.connect("slow") as client:
        events: list[m.StreamEvent] = []
        canceled: m.Task | None = None
        async with asyncio.timeout(GUARD):
            async for ev in client.stream("stream me slowly"):
                events.append(ev)
                if (canceled is None and isinstance(ev, m.TaskStatusUpdateEvent)
                        and ev.status.state is S.WORKING):
                    canceled = await client.cancel(ev.task_id)
        assert canceled is not None, f"never saw the working status: {events}"
        assert canceled.status.state is S.CANCELED
        assert isinstance(events[0], m.Task)
        last = events[-1]
        assert isinstance(last, m.TaskStatusUpdateEvent) and last.status.state is S.CANCELED, events
        assert (await client.get(canceled.id)).status.state is S.CANCELED


async def test_resubscribe_to_running_task(target: Target) -> None:
    async with await target.connect("slow") as client:
        started = await client.send("slow with heartbeat", blocking=False)
        await wait_for_state(client, started.id, S.WORKING)
        events: list[m.StreamEvent] = []
        async with asyncio.timeout(GUARD):
            async for ev in client.resubscribe(started.id):
                events.append(ev)
                if len(events) == 1:
                    # The subscription is live (we received its first event): let the agent finish.
                    await target.release(started.id)

    assert events, "resubscribe yielded nothing"
    if target.sdk == "1.3":
        # 1.0 §3.1.6: SubscribeToTask starts with the current Task (the 1.3 compat layer does the same for 0.3).
        assert isinstance(events[0], m.Task) and events[0].id == started.id
        assert events[0].status.state is S.WORKING
    for ev in events:
        assert (ev.id if isinstance(ev, m.Task) else ev.task_id) == started.id
    results = [ev for ev in events
               if isinstance(ev, m.TaskArtifactUpdateEvent) and ev.artifact.artifact_id == "result"]
    assert [p.text for ev in results for p in ev.artifact.parts] == ["released"]
    last = events[-1]
    assert isinstance(last, m.TaskStatusUpdateEvent) and last.status.state is S.COMPLETED, events
    async with await target.connect("slow") as client:
        done = await client.get(started.id)
    assert done.status.state is S.COMPLETED
    assert artifact_text(done, "result") == "released"


class _CutAfter(httpx.AsyncByteStream):
    """A response body that fails like a dropped connection once `needle` went through."""

    def __init__(self, inner: httpx.AsyncByteStream, needle: bytes, owner: DropOnce) -> None:
        self.inner, self.needle, self.owner, self.seen = inner, needle, owner, b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            yield chunk
            self.seen += chunk
            if self.needle in self.seen:
                self.owner.cut = True
                raise httpx.RemoteProtocolError("test: connection dropped mid-stream")

    async def aclose(self) -> None:
        await self.inner.aclose()


class DropOnce(httpx.AsyncHTTPTransport):
    """Real HTTP, except the first request whose body holds `marker` loses its connection mid-stream."""

    def __init__(self, marker: bytes, after: bytes) -> None:
        super().__init__()
        self.marker, self.after = marker, after
        self.armed = True
        self.cut = False  # set when the connection has been dropped
        self.methods: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = request.content
        if body:
            self.methods.append(httpx.Response(200, content=body).json().get("method"))
        response = await super().handle_async_request(request)
        if self.armed and self.marker in body:
            self.armed = False
            response.stream = _CutAfter(response.stream, self.after, self)
        return response


async def test_dropped_stream_is_resumed_with_subscribe(target: Target) -> None:
    """The client resumes a broken stream with SubscribeToTask (tasks/resubscribe), as documented.

    SDK servers send no SSE ``id:``, so there is no Last-Event-ID to resume from; the 1.0
    resubscription starts with a Task snapshot, so resuming without one loses nothing essential.
    """
    transport = DropOnce(b"drop-me", after=b"orking")  # cut right after the working status
    http = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(GUARD, read=None))
    released = False
    events: list[m.StreamEvent] = []
    try:
        client = await A2AClient.connect(target.url("slow"), version=target.force_version, http=http)
        async with asyncio.timeout(GUARD):
            async for ev in client.stream("drop-me heartbeat"):
                events.append(ev)
                if transport.cut and not released:
                    released = True  # an event from the resumed stream: let the agent finish
                    await target.release(events[0].id)
    finally:
        await http.aclose()
    assert transport.cut and released
    subscribe = "SubscribeToTask" if target.version == "1.0" else "tasks/resubscribe"
    assert subscribe in transport.methods, transport.methods
    last = events[-1]
    assert isinstance(last, m.TaskStatusUpdateEvent) and last.status.state is S.COMPLETED, events


async def test_multi_turn_interviewer(target: Target) -> None:
    async with await target.connect("interviewer") as client:
        first = await client.send("I would like an interview")
        assert isinstance(first, m.Task)
        assert first.status.state is S.INPUT_REQUIRED
        assert first.status.message is not None and first.status.message.role is m.Role.AGENT
        assert texts(first.status.message) == INTERVIEW_QUESTION

        second = await client.send("Ada", task_id=first.id, context_id=first.context_id)
        assert isinstance(second, m.Task)
        assert second.id == first.id and second.context_id == first.context_id
        assert second.status.state is S.COMPLETED
        assert artifact_text(second, "answer") == "Nice to meet you, Ada!"


async def test_multi_turn_interviewer_streaming(target: Target) -> None:
    async with await target.connect("interviewer") as client:
        turn1 = await collect(client.stream("interview me"))
        assert isinstance(turn1[0], m.Task)
        task_id, context_id = turn1[0].id, turn1[0].context_id
        last = turn1[-1]
        assert isinstance(last, m.TaskStatusUpdateEvent) and last.status.state is S.INPUT_REQUIRED, turn1
        assert texts(last.status.message) == INTERVIEW_QUESTION

        turn2 = await collect(client.stream("Grace", task_id=task_id, context_id=context_id))
        assert all((ev.id if isinstance(ev, m.Task) else ev.task_id) == task_id for ev in turn2)
        answers = [ev for ev in turn2 if isinstance(ev, m.TaskArtifactUpdateEvent)]
        assert [p.text for ev in answers for p in ev.artifact.parts] == ["Nice to meet you, Grace!"]
        last = turn2[-1]
        assert isinstance(last, m.TaskStatusUpdateEvent) and last.status.state is S.COMPLETED, turn2


UNKNOWN_OPS = ("get", "cancel", "send", "stream", "resubscribe")


@pytest.mark.parametrize("op", UNKNOWN_OPS)
async def test_unknown_task_raises_task_not_found(target: Target, op: str) -> None:
    missing = f"no-such-task-{uuid.uuid4().hex}"
    async with await target.connect("echo") as client:
        with pytest.raises(TaskNotFoundError) as info:
            async with asyncio.timeout(GUARD):
                if op == "get":
                    await client.get(missing)
                elif op == "cancel":
                    await client.cancel(missing)
                elif op == "send":
                    await client.send("hello?", task_id=missing)
                elif op == "stream":
                    await collect(client.stream("hello?", task_id=missing))
                else:
                    await collect(client.resubscribe(missing))
        assert info.value.code == -32001
