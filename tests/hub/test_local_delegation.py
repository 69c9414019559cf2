"""Delegation to an agent of the same server goes in process, with the A2A contract intact.

`front` delegates to `back` with `ctx.delegate("back")` (the runtime's delegator). The call goes
through the in-process transport (`parley.server.local.LocalTransport`), so no HTTP request
reaches the server for it; yet `back` gets its own task with its own log, owned by the caller's
principal, whose first message names the parent in `referenceTaskIds` (A2A 1.0 section 3.4.3,
"Follow-up Messages"), the trace endpoint shows the tree, a question from `back`
(`input-required`, section 3.4.3 "Input Required State") reaches the client of `front` and the
answer flows down, and canceling the parent (section 3.1.5) cancels the child.

The server authenticates every request (the `X-Test-User` header names the principal), so a
delegation that went out over HTTP without credentials would also show up as a refusal.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from parley.agents.base import RunContext
from parley.app import Parley
from parley.client import A2AClient, user_message
from parley.hub.delegation import Delegator
from parley.protocol import models as m
from parley.protocol.errors import A2AError, TaskNotFoundError
from parley.protocol.operations import Operation
from parley.server.access import Access, Credentials, Principal
from support import LiveServer, drain_within

S = m.TaskState
WAIT = 15.0  # the longest one observable step may take before the test fails; never a pacing delay
QUESTION = "Which colour?"
USER = "X-Test-User"


class NoUserError(A2AError):
    code = -32050
    default_message = f"Send {USER}"
    http_status = 401
    reason = "TEST_NO_USER"
    grpc_status = "UNAUTHENTICATED"


class HeaderAuthenticator:
    async def authenticate(self, access: Access, credentials: Credentials) -> Principal:
        user = credentials.headers.get(USER.lower())
        if not user:
            raise NoUserError()
        return Principal(user, kind="token")


@dataclass
class Records:
    """What the server saw: every HTTP request (method, path), and the child runs that were canceled."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[tuple[str, str]] = field(default_factory=list)
    canceled: list[str] = field(default_factory=list)
    canceled_event: threading.Event = field(default_factory=threading.Event)

    def mark(self) -> int:
        with self.lock:
            return len(self.requests)

    def since(self, mark: int) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.requests[mark:])


class CountRequests:
    """ASGI middleware recording every HTTP request that reaches the app."""

    def __init__(self, inner: Any, records: Records) -> None:
        self.inner = inner
        self.records = records

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            with self.records.lock:
                self.records.requests.append((scope["method"], scope["path"]))
        await self.inner(scope, receive, send)


def local_app(records: Records) -> Parley:
    app = Parley()

    @app.agent(id="front", description="Delegates every turn to back")
    async def front(ctx: RunContext):
        if Delegator.pending(ctx):  # back asked a question: this turn's message is the answer
            async for out in ctx.resume_delegation():
                yield out
            return
        async for out in ctx.delegate("back"):
            yield out

    @app.agent(id="back", description="'ask...': asks a question first; 'wait...': waits until canceled")
    async def back(ctx: RunContext):
        if ctx.turn == 1 and ctx.text.startswith("ask"):
            yield ctx.ask(QUESTION)
            return
        if ctx.text.startswith("wait"):
            yield ctx.say("back: waiting")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                with records.lock:
                    records.canceled.append(ctx.task_id)
                records.canceled_event.set()
                raise
        yield f"back got: {ctx.text}"

    build = app.asgi

    def asgi(settings: Any = None) -> Any:
        return CountRequests(build(settings, authenticator=HeaderAuthenticator()), records)

    app.asgi = asgi  # type: ignore[method-assign]
    return app


@dataclass
class Env:
    live: LiveServer
    records: Records

    def agent(self, agent_id: str) -> str:
        return f"{self.live.url}/a2a/{agent_id}"


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    records = Records()
    live = LiveServer(local_app(records), self_url=True).start()
    yield Env(live, records)
    live.stop()


@pytest.fixture
async def client_as(env: Env) -> AsyncIterator:
    """Factory: `await client_as(agent, user)`: a JSON-RPC 1.0 client sending X-Test-User: user."""
    made: list[A2AClient] = []

    async def make(agent: str, user: str) -> A2AClient:
        client = await A2AClient.connect(env.agent(agent), version="1.0", bindings=["JSONRPC"],
                                         headers={USER: user})
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


def uid(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


async def collect(stream: AsyncIterator[Any], until: Any = None) -> list[Any]:
    return await drain_within(stream, WAIT, until)


def texts(events: list[Any]) -> list[str]:
    return [ev.status.message.text() for ev in events
            if isinstance(ev, m.TaskStatusUpdateEvent) and ev.status.message is not None]


def final_state(events: list[Any]) -> S:
    return [ev.status.state for ev in events if isinstance(ev, m.TaskStatusUpdateEvent)][-1]


def answer(task: m.Task) -> str:
    return "".join(p.text or "" for a in task.artifacts or [] for p in a.parts)


async def trace(env: Env, task_id: str, user: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await http.get(f"{env.agent('front')}/tasks/{task_id}/trace", headers={USER: user})
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_a_local_delegation_makes_no_http_request_and_the_child_has_its_own_task(env, client_as):
    """The delegated call never reaches HTTP: the only request is the client's own stream. The child task
    exists on `back` with its own log, owned by the same principal, its first message naming the parent
    (section 3.4.3, referenceTaskIds), and the trace shows front -> back."""
    alice, bob = uid("alice-"), uid("bob-")
    front = await client_as("front", alice)
    mark = env.records.mark()
    events = await collect(front.stream("hello back"))
    assert env.records.since(mark) == [("POST", "/a2a/front")]

    parent = events[0]
    assert isinstance(parent, m.Task)
    assert final_state(events) is S.COMPLETED
    assert "asked back" in texts(events)
    relayed = [ev for ev in events if isinstance(ev, m.TaskArtifactUpdateEvent)]
    assert "".join(p.text or "" for ev in relayed for p in ev.artifact.parts) == "back got: hello back"
    assert {ev.task_id for ev in relayed} == {parent.id}

    back = await client_as("back", alice)
    children = (await back.list()).tasks
    assert len(children) == 1
    child = await back.get(children[0].id)
    assert child.id != parent.id and child.status.state is S.COMPLETED
    assert child.history[0].reference_task_ids == [parent.id]
    assert child.history[0].text() == "hello back"
    assert child.history[0].metadata["parley"] == {"chain": [env.agent("front")], "depth": 1}
    assert answer(child) == "back got: hello back"
    with pytest.raises(TaskNotFoundError):  # it is alice's: another principal does not see it
        await (await client_as("back", bob)).get(child.id)

    # its own log: a subscription replaying it from the start is the child's own events
    log = await collect(back.transport.stream(Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=child.id), "0"))
    assert isinstance(log[0].event, m.Task) and log[0].event.id == child.id
    assert [int(item.event_id) for item in log] == list(range(1, len(log) + 1))
    assert final_state([item.event for item in log]) is S.COMPLETED

    tree = await trace(env, parent.id, alice)
    assert (tree["agent"], tree["state"], tree["principal"]) == ("front", "completed", alice)
    assert len(tree["children"]) == 1
    node = tree["children"][0]
    assert (node["taskId"], node["agent"], node["state"]) == (child.id, "back", "completed")
    assert (node["principal"], node["parent"], node["source"]) == (alice, parent.id, "local")


async def test_a_question_from_the_local_child_reaches_the_client_and_the_answer_flows_down(env, client_as):
    """Section 3.4.3: back's input-required surfaces as front's, with back's question; the client's answer
    (a message with front's task id) continues the same child task, in process; both complete."""
    alice = uid("alice-")
    front = await client_as("front", alice)
    mark = env.records.mark()
    first = await collect(front.stream("ask me something"))
    parent = first[0]
    assert isinstance(parent, m.Task)
    assert final_state(first) is S.INPUT_REQUIRED
    assert texts(first)[-1] == QUESTION

    back = await client_as("back", alice)
    children = (await back.list()).tasks
    assert len(children) == 1 and children[0].status.state is S.INPUT_REQUIRED
    child_id = children[0].id

    done = await front.send(user_message("blue"), task_id=parent.id)
    assert isinstance(done, m.Task) and done.id == parent.id and done.status.state is S.COMPLETED
    assert answer(done) == "back got: blue"
    # the client's stream, the card and ListTasks of `back` the test asked for, the client's answer: nothing else
    assert env.records.since(mark) == [("POST", "/a2a/front"), ("GET", "/a2a/back/.well-known/agent-card.json"),
                                       ("POST", "/a2a/back"), ("POST", "/a2a/front")]

    child = await back.get(child_id)
    assert child.status.state is S.COMPLETED and answer(child) == "back got: blue"
    assert [msg.text() for msg in child.history if msg.role is m.Role.USER] == ["ask me something", "blue"]
    assert len((await back.list()).tasks) == 1  # the answer went to the same child, not a new one
    tree = await trace(env, parent.id, alice)
    assert [(c["taskId"], c["state"]) for c in tree["children"]] == [(child_id, "completed")]


async def test_canceling_the_parent_cancels_the_local_child(env, client_as):
    """Section 3.1.5: canceling front while back works cancels back's task too (its run is canceled)."""
    alice = uid("alice-")
    front = await client_as("front", alice)
    mark = env.records.mark()
    stream = front.stream("wait for me")
    seen = await collect(stream, until=lambda ev: isinstance(ev, m.TaskStatusUpdateEvent)
                         and ev.status.message is not None and ev.status.message.text() == "back: waiting")
    parent = seen[0]
    assert isinstance(parent, m.Task)

    back = await client_as("back", alice)
    children = (await back.list()).tasks
    assert len(children) == 1 and children[0].status.state is S.WORKING
    child_id = children[0].id
    child_sub = back.transport.stream(Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=child_id))
    first = await asyncio.wait_for(child_sub.__anext__(), WAIT)
    assert isinstance(first.event, m.Task) and first.event.status.state is S.WORKING

    canceled = await front.cancel(parent.id)
    assert canceled.status.state is S.CANCELED
    rest = await collect(stream)
    assert rest and final_state(rest) is S.CANCELED
    child_events = await collect(child_sub)
    assert child_events and final_state([item.event for item in child_events]) is S.CANCELED
    assert await asyncio.to_thread(env.records.canceled_event.wait, WAIT)
    assert child_id in env.records.canceled
    assert (await back.get(child_id)).status.state is S.CANCELED
    # the cancel of the child went in process too: every request is one the test made
    assert env.records.since(mark) == [
        ("POST", "/a2a/front"), ("GET", "/a2a/back/.well-known/agent-card.json"), ("POST", "/a2a/back"),
        ("POST", "/a2a/back"), ("POST", "/a2a/front"), ("POST", "/a2a/back")]
    tree = await trace(env, parent.id, alice)
    assert [(c["taskId"], c["state"]) for c in tree["children"]] == [(child_id, "canceled")]
