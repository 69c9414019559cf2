"""SubscribeToTask / tasks/resubscribe follow a task to its end, on every (binding, version) pair.

A2A 1.0 section 3.1.6: the subscription sends the Task first, then every status and artifact
event, and "MUST terminate when the task reaches a terminal state", so it stays open through
`input-required` and `auth-required`. Section 3.5.2: every stream of a task gets the same events in
the same order, and closing one stream does not affect the others or the task.

Each test runs over JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and 0.3 and gRPC 1.0 against one live
server, with Parley's own client transports (no client-side resuming, so what the test sees is
what the server sent, and where it closed the stream). The last test reads the raw 0.3 wire for the
`final` flag of such a subscription: only its last status update says `final: true`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from accesskit import (
    Reader,
    Server,
    artifact_texts,
    clients_of,
    is_final,
    is_status,
    msg_text,
    pair_params,
    reached,
    start,
    states,
    task_text,
    view,
)
from srvkit import D03, SSE, Lab, uid
from srvkit import http as srv_http
from srvkit import stream as sse_stream

from parley.agents.base import RunContext, Status
from parley.app import Parley
from parley.client import A2AClient
from parley.protocol import models as m

S = m.TaskState
QUESTION = "What is your name?"
SIGN_IN = "Please sign in"


def first_text(ctx: RunContext) -> str:
    return next(msg.text() for msg in ctx.history if msg.role is m.Role.USER)


def follow_app(lab: Lab) -> Parley:
    app = Parley()

    @app.agent(id="asker", description="Asks for a name (after gate <text>/ask if the text starts with 'gated'), "
                                       "then greets")
    async def asker(ctx: RunContext):
        if ctx.turn == 1:
            yield ctx.say("looking")
            if ctx.text.startswith("gated"):
                await lab.gate(f"{ctx.text}/ask").wait()
            yield ctx.ask(QUESTION)
            return
        lab.count(f"{first_text(ctx)}/answers")
        yield ctx.say("greeting")
        yield f"Hello, {ctx.text}!"

    @app.agent(id="signin", description="Needs the client to authorize (auth-required), then answers")
    async def signin(ctx: RunContext):
        if ctx.turn == 1:
            yield ctx.say("checking access")
            yield Status(S.AUTH_REQUIRED, SIGN_IN)
            return
        yield ctx.say("credentials received")
        yield f"Signed in as {ctx.text}"

    @app.agent(id="steps", description="step 1, 'alpha ', gate <text>/1, step 2, 'beta', gate <text>/2, step 3")
    async def steps(ctx: RunContext):
        key = ctx.text
        yield ctx.say("step 1")
        yield "alpha "
        await lab.gate(f"{key}/1").wait()
        yield ctx.say("step 2")
        yield "beta"
        await lab.gate(f"{key}/2").wait()
        yield ctx.say("step 3")

    return app


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Server, Lab]]:
    lab = Lab()
    srv = start(follow_app(lab))
    yield srv, lab
    lab.open_all()
    srv.stop()


@pytest.fixture
async def clients(env) -> AsyncIterator:
    """Factory: `await clients(agent, binding, version)`; every client is closed after the test."""
    async with clients_of(env[0]) as make:
        yield make


# --- a subscription follows an interrupted task to its end ----------------------------------------------


@pytest.mark.parametrize("agent, interrupted, answer, final_text", [
    ("asker", S.INPUT_REQUIRED, "Ada", "Hello, Ada!"),
    ("signin", S.AUTH_REQUIRED, "token-123", "Signed in as token-123"),
], ids=["input-required", "auth-required"])
@pytest.mark.parametrize("binding, version", pair_params())
async def test_subscription_to_an_interrupted_task_stays_open_until_it_is_terminal(
        clients, binding, version, agent, interrupted, answer, final_text):
    """Section 3.1.6: on a task waiting in input-required / auth-required, the subscription sends the Task
    first, stays open, delivers the events that follow the client's answer (sent on another
    connection), and closes only after the terminal status."""
    sub_client = await clients(agent, binding, version)
    other = await clients(agent, binding, version)  # a second connection, as another client would have
    task = await other.send(uid("hi-"))
    assert isinstance(task, m.Task) and task.status.state is interrupted

    sub = Reader.subscribe(sub_client, task.id)
    first = await sub.next()
    assert first is not None and isinstance(first.event, m.Task), view(first.event) if first else None
    assert first.event.id == task.id and first.event.status.state is interrupted
    assert msg_text(first.event.status.message) == msg_text(task.status.message)

    done = await other.send(answer, task_id=task.id)
    assert isinstance(done, m.Task) and done.status.state is S.COMPLETED and task_text(done) == final_text

    rest = await sub.rest()  # the server must close the stream after the terminal event, and only then
    events = [i.event for i in rest]
    assert events, "the subscription closed without delivering the events after the answer"
    assert is_final(events[-1]) and events[-1].status.state is S.COMPLETED, [view(e) for e in events]
    assert not any(is_final(e) for e in events[:-1])
    assert states(events)[0] is S.WORKING  # the answer moved the task back to working
    assert "".join(artifact_texts(events)) == final_text
    assert all(e.task_id == task.id for e in events)
    got = await other.get(task.id)
    assert got.status.state is S.COMPLETED and task_text(got) == final_text


@pytest.mark.parametrize("binding, version", pair_params())
async def test_subscription_opened_while_working_passes_through_input_required(env, clients, binding, version):
    """Section 3.1.6: a subscription opened while the task works delivers the input-required status
    and keeps following: the question, then (after the answer, on another connection) working, the
    answer's artifact and completed; it closes after the terminal status."""
    _, lab = env
    key = uid("gated-")
    sub_client = await clients("asker", binding, version)
    other = await clients("asker", binding, version)
    task = await other.send(key, blocking=False)
    assert isinstance(task, m.Task)
    await reached(lab.gate(f"{key}/ask"))

    sub = Reader.subscribe(sub_client, task.id)
    first = await sub.next()
    assert first is not None and isinstance(first.event, m.Task)
    assert first.event.status.state is S.WORKING and msg_text(first.event.status.message) == "looking"

    lab.open(f"{key}/ask")
    asked = await sub.until(lambda ev: is_status(ev, S.INPUT_REQUIRED))
    assert msg_text(asked[-1].event.status.message) == QUESTION
    assert lab.calls_of(f"{key}/answers") == 0

    done = await other.send("Grace", task_id=task.id)
    assert done.status.state is S.COMPLETED
    rest = await sub.rest()
    events = [i.event for i in rest]
    assert events, "the subscription closed at input-required"
    assert [(e.status.state, msg_text(e.status.message)) for e in events if isinstance(e, m.TaskStatusUpdateEvent)] \
        == [(S.WORKING, ""), (S.WORKING, "greeting"), (S.COMPLETED, "")]
    assert "".join(artifact_texts(events)) == "Hello, Grace!"
    assert lab.calls_of(f"{key}/answers") == 1


# --- Last-Event-ID, several subscribers ------------------------------------------------------------------


async def _parked_steps(env, clients, key: str) -> tuple[A2AClient, str]:
    """A `steps` task waiting at its first gate, and a JSON-RPC 1.0 reference client."""
    _, lab = env
    ref = await clients("steps", "JSONRPC", "1.0")
    task = await ref.send(key, blocking=False)
    await reached(lab.gate(f"{key}/1"))
    return ref, task.id


@pytest.mark.parametrize("binding, version", pair_params())
async def test_last_event_id_replays_exactly_the_entries_after_it_then_follows(env, clients, binding, version):
    """Section 3.1.6 with the SSE resumption of the HTTP bindings (and gRPC's last-event-id metadata):
    a subscription with Last-Event-ID n replays exactly the log entries after n, with no Task
    snapshot first, then follows the task live to its terminal state."""
    _, lab = env
    key = uid("replay-")
    ref_client, task_id = await _parked_steps(env, clients, key)

    # The reference: the whole log after the Task entry (seq 1), over JSON-RPC 1.0, which carries ids.
    ref = Reader.subscribe(ref_client, task_id, last_event_id="1")
    await ref.until(lambda ev: is_status(ev, text="step 1"))
    ids = [int(i.event_id) for i in ref.items]
    assert ids == list(range(2, 2 + len(ids))), ids  # a single-turn log: every entry is an event
    k = ids[0]  # resume after the first status: the client "missed" the rest

    client = await clients("steps", binding, version)
    sub = Reader.subscribe(client, task_id, last_event_id=str(k))
    replay = await sub.until(lambda ev: is_status(ev, text="step 1"))
    assert not isinstance(replay[0].event, m.Task), "a resumed subscription must not start with a snapshot"
    expected = [i for i in ref.items if int(i.event_id) > k]
    assert [view(i.event) for i in replay] == [view(i.event) for i in expected]
    if binding != "GRPC":  # gRPC streams carry no event ids
        assert [i.event_id for i in replay] == [i.event_id for i in expected]

    lab.open(f"{key}/1")
    await ref.until(lambda ev: is_status(ev, text="step 2"))
    await sub.until(lambda ev: is_status(ev, text="step 2"))
    lab.open(f"{key}/2")
    await ref.rest()
    sub_rest = await sub.rest()
    assert is_final(ref.items[-1].event) and ref.items[-1].event.status.state is S.COMPLETED
    assert [view(i.event) for i in sub.items] == [view(i.event) for i in ref.items if int(i.event_id) > k]
    assert sub_rest and is_final(sub_rest[-1].event)
    all_ids = [int(i.event_id) for i in ref.items]
    assert all_ids == list(range(2, 2 + len(all_ids)))  # nothing lost, nothing repeated
    assert "".join(artifact_texts(sub.events)) == "alpha beta"
    if binding != "GRPC":
        assert [int(i.event_id) for i in sub.items] == [x for x in all_ids if x > k]


@pytest.mark.parametrize("binding, version", pair_params())
async def test_concurrent_subscribers_see_the_same_events_and_one_leaving_changes_nothing(
        env, clients, binding, version):
    """Section 3.5.2: two subscribers of one task get the same events in the same order; a third that
    disconnects mid-task affects neither them nor the task, which completes."""
    _, lab = env
    key = uid("multi-")
    ref, task_id = await _parked_steps(env, clients, key)
    subs = [Reader.subscribe(await clients("steps", binding, version), task_id) for _ in range(3)]
    for sub in subs:
        first = await sub.next()
        assert first is not None and isinstance(first.event, m.Task) and first.event.status.state is S.WORKING
    assert len({view(s.items[0].event) for s in subs}) == 1  # the task is parked: one snapshot for all

    leaver = subs.pop()
    await leaver.close()  # disconnects while the task is running

    lab.open(f"{key}/1")
    for sub in subs:
        await sub.until(lambda ev: is_status(ev, text="step 2"))
    lab.open(f"{key}/2")
    for sub in subs:
        await sub.rest()
    a, b = subs
    assert [view(e) for e in a.events] == [view(e) for e in b.events]
    assert [i.event_id for i in a.items] == [i.event_id for i in b.items]
    if binding != "GRPC":
        ids = [int(i.event_id) for i in a.items]
        assert ids == sorted(set(ids)), ids
    assert [msg_text(e.status.message) for e in a.events if isinstance(e, m.TaskStatusUpdateEvent)] \
        == ["step 2", "step 3", ""]
    assert is_final(a.events[-1]) and a.events[-1].status.state is S.COMPLETED
    # "alpha" was written before the subscribers came (text is never held back): the snapshot has it, the stream
    # the rest.
    assert isinstance(a.events[0], m.Task) and task_text(a.events[0]) == "alpha "
    assert task_text(a.events[0]) + "".join(artifact_texts(a.events)) == "alpha beta"
    got = await ref.get(task_id)
    assert got.status.state is S.COMPLETED and task_text(got) == "alpha beta"


# --- the 0.3 `final` flag of a subscription that follows a task through input-required -----------------------


def _raw_v03_subscription(srv: Server, binding: str, task_id: str) -> Any:
    """The raw 0.3 SSE subscription: JSON-RPC tasks/resubscribe, or HTTP+JSON GET /v1/tasks/{id}:subscribe."""
    if binding == "JSONRPC":
        return sse_stream(srv.agent_url("asker"), "tasks/resubscribe", {"id": task_id})
    return _rest_v03_subscription(srv.agent_url("asker"), task_id)


@contextmanager
def _rest_v03_subscription(agent_url: str, task_id: str) -> Iterator[SSE]:
    with srv_http.stream("GET", f"{agent_url}/v1/tasks/{task_id}:subscribe",
                         headers={"Accept": "text/event-stream"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.status_code
        yield SSE(r)


def _v03_status(binding: str, frame: Any) -> dict[str, Any] | None:
    """The 0.3 status update a frame carries (with its `final`), or None."""
    if binding == "JSONRPC":
        res = frame.data["result"]
        return res if res.get("kind") == "status-update" else None
    return frame.data.get("statusUpdate")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"], ids=["JSONRPC-0.3", "HTTP+JSON-0.3"])
def test_v03_subscription_marks_only_its_last_status_update_final(env, binding):
    """0.3 TaskStatusUpdateEvent.final ('the final event in the stream for this interaction') on a 0.3
    subscription that follows the task through input-required (section 3.1.6): the input-required
    update is not the stream's last event, so only the terminal update may carry `final: true`."""
    srv, lab = env
    key = uid("gated-")
    url = srv.agent_url("asker")
    task = D03.send(url, key, wait=False)
    lab.wait_reached(f"{key}/ask")
    with _raw_v03_subscription(srv, binding, task["id"]) as sse:
        first = sse.next()
        assert first is not None
        lab.open(f"{key}/ask")
        asked = sse.until(lambda f: (_v03_status(binding, f) or {}).get("status", {}).get("state")
                          in ("input-required", "TASK_STATE_INPUT_REQUIRED"))
        done = D03.send(url, "Ada", task_id=task["id"])
        assert done["status"]["state"] == "completed"
        rest = sse.rest()
    updates = [u for u in (_v03_status(binding, f) for f in [*asked, *rest]) if u is not None]
    assert len(updates) >= 3 and rest, "the subscription must stay open after input-required"
    assert updates[-1]["final"] is True
    # the input-required update is not the last event of this stream: not final
    assert [u["final"] for u in updates[:-1]] == [False] * (len(updates) - 1), \
        [(u["status"]["state"], u["final"]) for u in updates]
