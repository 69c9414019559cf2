"""Which task a message goes to: its `taskId` first, then its messageId and content.

A2A 1.0 section 3.4.2: a message that names a task MUST reference an existing task, else
TaskNotFoundError (-32001), and it is handled against that task, whatever its messageId was used
for before. Section 3.3.1: SendMessage MAY be idempotent on messageId; Parley treats the same
message sent again (same messageId, same content) as a retry that returns the task it went to
without running the agent again, and a different message that reuses a messageId as new.

Every test runs over all five (binding, version) pairs with Parley's client; the JSON-RPC error
codes are also checked on the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from accesskit import Server, clients_of, msg_text, pair_params, start, task_text, user_msg
from srvkit import D03, D10, DIALECTS, Dialect, Lab, uid

from parley.agents.base import RunContext
from parley.app import Parley
from parley.protocol import models as m
from parley.protocol.errors import TaskNotFoundError

S = m.TaskState
QUESTION = "Which colour?"


def first_text(ctx: RunContext) -> str:
    return next(msg.text() for msg in ctx.history if msg.role is m.Role.USER)


def identity_app(lab: Lab) -> Parley:
    app = Parley()

    @app.agent(id="counter", description="Counts its runs per messageId, then echoes")
    async def counter(ctx: RunContext):
        n = lab.count(ctx.message.message_id)
        yield f"call {n}: {ctx.text}"

    @app.agent(id="asker", description="Asks a question; answers with '<first text>: <answer>'")
    async def asker(ctx: RunContext):
        first = first_text(ctx)
        lab.count(f"{first}/turn{ctx.turn}")
        if ctx.turn == 1:
            yield ctx.ask(QUESTION)
            return
        yield f"{first}: {ctx.text}"

    return app


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Server, Lab]]:
    lab = Lab()
    srv = start(identity_app(lab))
    yield srv, lab
    srv.stop()


@pytest.fixture
async def clients(env) -> AsyncIterator:
    """Factory: `await clients(agent, binding, version)`; every client is closed after the test."""
    async with clients_of(env[0]) as make:
        yield make


@pytest.mark.parametrize("binding, version", pair_params())
async def test_a_task_id_that_names_no_task_is_task_not_found_even_for_a_seen_message_id(
        env, clients, binding, version):
    """Section 3.4.2: a taskId must reference an existing task (TaskNotFoundError), whether or not the
    messageId was seen before; a task of another agent is not one this agent has."""
    _, lab = env
    counter = await clients("counter", binding, version)
    mid = uid("mid-")
    done = await counter.send(user_msg("hello", message_id=mid))
    assert isinstance(done, m.Task) and done.status.state is S.COMPLETED

    with pytest.raises(TaskNotFoundError) as caught:
        await counter.send(user_msg("hello", message_id=mid, task_id=uid("no-such-task-")))
    if binding == "JSONRPC":
        assert caught.value.code == -32001
    asker = await clients("asker", binding, version)  # the task exists, but on another agent
    with pytest.raises(TaskNotFoundError):
        await asker.send(user_msg("hello", message_id=mid, task_id=done.id))
    assert lab.calls_of(mid) == 1
    assert (await counter.get(done.id)).status.state is S.COMPLETED


@pytest.mark.parametrize("d", DIALECTS, ids=["JSONRPC-0.3", "JSONRPC-1.0"])
def test_unknown_task_id_with_a_seen_message_id_is_minus_32001_on_the_wire(env, d: Dialect):
    """Section 3.4.2 and 5.4: the JSON-RPC answer is error -32001, not the earlier task."""
    srv, lab = env
    url, mid = srv.agent_url("counter"), uid("mid-")
    first = d.send(url, "once", message_id=mid)
    err = d.error(url, "send", d.send_params("once", message_id=mid, task_id=uid("nope-")))
    assert err["code"] == -32001, err
    assert lab.calls_of(mid) == 1
    assert d.get(url, first["id"])["id"] == first["id"]


@pytest.mark.parametrize("binding, version", pair_params())
async def test_a_message_naming_task_a_is_handled_against_a_even_if_its_message_id_created_task_b(
        env, clients, binding, version):
    """Section 3.4.2: the taskId decides. Message X created task B; a message with the same messageId
    and text naming task A (input-required) continues A; B is untouched and still answerable."""
    _, lab = env
    client = await clients("asker", binding, version)
    x = uid("mid-")
    text_b, text_a = uid("task-b-"), uid("task-a-")
    b = await client.send(user_msg(text_b, message_id=x))
    a = await client.send(user_msg(text_a, message_id=uid("mid-")))
    assert b.status.state is S.INPUT_REQUIRED and a.status.state is S.INPUT_REQUIRED and a.id != b.id

    done = await client.send(user_msg(text_b, message_id=x, task_id=a.id))
    assert done.id == a.id and done.context_id == a.context_id
    assert done.status.state is S.COMPLETED
    assert task_text(done) == f"{text_a}: {text_b}"
    assert lab.calls_of(f"{text_a}/turn2") == 1
    assert lab.calls_of(f"{text_b}/turn2") == 0
    assert [msg_text(msg) for msg in done.history or [] if msg.role is m.Role.USER] == [text_a, text_b]

    b_now = await client.get(b.id)
    assert b_now.status.state is S.INPUT_REQUIRED and msg_text(b_now.status.message) == QUESTION
    assert [msg_text(msg) for msg in b_now.history or []] == [text_b]  # the question is the status message
    b_done = await client.send(user_msg("red", message_id=uid("mid-"), task_id=b.id))
    assert b_done.id == b.id and task_text(b_done) == f"{text_b}: red"


@pytest.mark.parametrize("binding, version", pair_params())
async def test_the_same_message_sent_again_returns_the_existing_task_without_a_new_run(
        env, clients, binding, version):
    """Section 3.3.1: a resent message (same messageId, same content) is a retry: the same task, and the
    agent (which counts its runs) ran once."""
    _, lab = env
    client = await clients("counter", binding, version)
    mid = uid("mid-")
    first = await client.send(user_msg("count me", message_id=mid))
    again = await client.send(user_msg("count me", message_id=mid))
    assert again.id == first.id and again.context_id == first.context_id
    assert again.status.state is S.COMPLETED and task_text(again) == task_text(first) == "call 1: count me"
    assert lab.calls_of(mid) == 1
    listed = await client.list(context_id=first.context_id)
    assert [t.id for t in listed.tasks] == [first.id]


@pytest.mark.parametrize("binding, version", pair_params())
async def test_the_same_message_id_with_other_content_is_a_new_message(env, clients, binding, version):
    """Section 3.3.1: idempotency is for retries; a different message reusing a messageId is new: a new
    task and a new run. The original message sent again still finds its own task."""
    _, lab = env
    client = await clients("counter", binding, version)
    mid = uid("mid-")
    one = await client.send(user_msg("one", message_id=mid))
    two = await client.send(user_msg("two", message_id=mid))
    assert two.id != one.id
    assert task_text(one) == "call 1: one" and task_text(two) == "call 2: two"
    assert lab.calls_of(mid) == 2
    retry = await client.send(user_msg("one", message_id=mid))
    assert retry.id == one.id and lab.calls_of(mid) == 2


@pytest.mark.parametrize("first_pair, retry_pair", [
    (("JSONRPC", "1.0"), ("HTTP+JSON", "0.3")),
    (("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")),
], ids=["jsonrpc1.0-then-rest0.3", "rest1.0-then-jsonrpc0.3"])
async def test_a_retry_over_another_binding_is_the_same_message(env, clients, first_pair, retry_pair):
    """Section 3.3.1 across bindings: the message is the same whichever binding carries it, so the retry
    returns the task the first send created and the agent does not run again."""
    _, lab = env
    mid = uid("mid-")
    first = await (await clients("counter", *first_pair)).send(user_msg("retry me", message_id=mid))
    again = await (await clients("counter", *retry_pair)).send(user_msg("retry me", message_id=mid))
    assert again.id == first.id
    assert lab.calls_of(mid) == 1


def test_jsonrpc_continuation_with_a_reused_message_id_is_handled_against_the_named_task(env):
    """Section 3.4.2 on the wire (JSON-RPC 0.3 creates B; JSON-RPC 1.0 continues A with B's messageId)."""
    srv, lab = env
    url, x = srv.agent_url("asker"), uid("mid-")
    text_b, text_a = uid("wire-b-"), uid("wire-a-")
    b = D03.send(url, text_b, message_id=x)
    a = D10.send(url, text_a)
    done = D10.send(url, text_b, message_id=x, task_id=a["id"])
    assert done["id"] == a["id"] and done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert D03.get(url, b["id"])["status"]["state"] == "input-required"
    assert lab.calls_of(f"{text_b}/turn2") == 0 and lab.calls_of(f"{text_a}/turn2") == 1
