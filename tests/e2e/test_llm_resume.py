"""An LLM agent's task survives a server restart: the second server resumes it from its checkpoint.

Two live servers, one after the other, on the same SQLite file, each hosting the
same agent declaration (a fresh LLMAgent, as a new process would build it) whose
model is tests/runtime/fake_llm.py's scripted OpenAI-compatible server. On the
first server a Python tool blocks on an asyncio.Event nobody sets, so the run is
cut off by `LiveServer.stop` (the engine cancels running agents at shutdown). The
second server's engine recovers unfinished tasks at start-up (TaskEngine.recover):
a task with a stored checkpoint is resumed from it, with the status message
RESUME_MESSAGE; one without is failed with RESTART_MESSAGE.

How the loop checkpoints (parley/agents/llm/loop.py): `internal:checkpoint` goes out
at the end of an iteration, i.e. after the tools the model asked for have returned
(or with the final answer, or when pausing for client-side tools), never between
the model's tool call and its result.

* test_resume_when_the_first_tool_call_is_cut_off: the scenario of the brief, the
  first model call answered with a tool call whose tool blocks; the loop checkpoints
  before running tools, so the second server runs the tool again and goes on.
* test_resume_from_the_checkpoint_of_a_finished_iteration: the same, one iteration
  later (the first tool returned, the second blocks), which Parley handles today.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_TESTS = Path(__file__).resolve().parents[1]
if str(_TESTS / "runtime") not in sys.path:
    sys.path.append(str(_TESTS / "runtime"))

from fake_llm import FakeLLM, text, tool_calls

from parley.agents.llm import LLMAgent, OpenAICompatBackend
from parley.agents.tools import tool
from parley.app import Parley
from parley.client import A2AClient
from parley.protocol import models as m
from parley.protocol.errors import UnsupportedOperationError
from parley.tasks.engine import RESTART_MESSAGE, RESUME_MESSAGE, unwrap_checkpoint
from parley.tasks.sqlite_store import SqliteTaskStore
from support import LiveServer

WAIT = 20.0  # upper bound for one observable step; never a pacing delay
AGENT = "orders"
SYSTEM = "You answer questions about orders. Use the tools."
QUESTION = "Where is my order A-17?"
LOOKUP_RESULT = "A-17: packed, waiting for the courier"
SHIP_RESULT = "A-17: handed to the courier"
FINAL = "Your order A-17 is packed and leaves with the courier today."

Impl = Callable[[str], Awaitable[str]]


class NotResumed(AssertionError):
    """The second server failed the task (no checkpoint to resume from) instead of resuming it."""


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    fake = FakeLLM().start()
    yield fake
    fake.stop()


def declare_agent(fake: FakeLLM, lookup: Impl, ship: Impl) -> LLMAgent:
    """The agent declaration both servers use; only what the tools do differs."""

    @tool(name="lookup_order")
    async def lookup_order(order_id: str) -> str:
        """Look up the status of an order.

        Args:
            order_id: The order number, like A-17.
        """
        return await lookup(order_id)

    @tool(name="ship_order")
    async def ship_order(order_id: str) -> str:
        """Hand an order to the courier.

        Args:
            order_id: The order number, like A-17.
        """
        return await ship(order_id)

    backend = OpenAICompatBackend(base_url=fake.base_url, api_key="test-key", model="fake-model", timeout=WAIT,
                                  max_attempts=1, env={})
    return LLMAgent(id=AGENT, description="Answers questions about orders", backend=backend,
                    system_prompt=SYSTEM, tools=[lookup_order, ship_order])


def returns(value: str) -> Impl:
    async def impl(order_id: str) -> str:
        return value

    return impl


def blocks(started: threading.Event) -> Impl:
    """A tool body that says it started, then waits forever (until its task is canceled)."""

    async def impl(order_id: str) -> str:
        started.set()
        await asyncio.Event().wait()  # never set: only the server stopping ends this call
        raise AssertionError("unreachable")

    return impl


@contextmanager
def server(db: Path, agent: LLMAgent) -> Iterator[LiveServer]:
    app = Parley(store=SqliteTaskStore(db))
    app.add_agent(agent)
    live = LiveServer(app).start()
    try:
        yield live
    finally:
        stop(live)


def stop(live: LiveServer) -> None:
    live.stop()
    if live.thread.is_alive():
        pytest.fail("the first Parley server did not stop; the second one would share its database", pytrace=False)


async def start_task(url: str) -> str:
    """Send QUESTION without waiting for the answer (no request stays open while the server stops)."""
    async with await A2AClient.connect(url) as client:
        task = await asyncio.wait_for(client.send(QUESTION, blocking=False), WAIT)
    assert isinstance(task, m.Task)
    return task.id


async def wait_until(event: threading.Event, what: str) -> None:
    if not await asyncio.to_thread(event.wait, WAIT):
        pytest.fail(f"{what} within {WAIT:g} s", pytrace=False)


async def final_task(url: str, task_id: str) -> m.Task:
    """Follow the task until it is finished, then read it (it may be finished already)."""
    async with await A2AClient.connect(url) as client:
        try:
            async with asyncio.timeout(WAIT):
                async for _ in client.resubscribe(task_id):
                    pass
        except UnsupportedOperationError:
            pass  # finished before we subscribed
        except TimeoutError:
            pytest.fail(f"the task did not finish within {WAIT:g} s after the restart", pytrace=False)
        return await asyncio.wait_for(client.get(task_id), WAIT)


async def stored_checkpoint(db: Path, task_id: str) -> dict[str, Any] | None:
    """The agent's own checkpoint state as the store keeps it (the engine keeps its text state beside it)."""
    store = SqliteTaskStore(db)
    try:
        agent_state, _ = unwrap_checkpoint(await store.get_checkpoint(task_id))
        return agent_state
    finally:
        await store.close()


def artifact_text(task: m.Task) -> str:
    return "".join(p.text or "" for a in task.artifacts or [] for p in a.parts)


def texts(messages: list[m.Message] | None) -> list[tuple[str, str]]:
    return [(msg.role.value, msg.text()) for msg in messages or []]


def calls_of(message: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []]


def check_resumed(task: m.Task, checkpoint: dict[str, Any] | None) -> None:
    """The task completed after a resume from its checkpoint, else NotResumed / AssertionError say how not."""
    status_text = task.status.message.text() if task.status.message is not None else None
    if task.status.state is m.TaskState.FAILED and status_text == RESTART_MESSAGE:
        raise NotResumed(
            f"the restarted server failed the task with {RESTART_MESSAGE!r} instead of resuming it; checkpoint "
            f"stored when the first server stopped: {json.dumps(checkpoint) if checkpoint else 'none'}"
        )
    assert task.status.state is m.TaskState.COMPLETED, (task.status.state, status_text)
    assert texts(task.history) == [("ROLE_USER", QUESTION), ("ROLE_AGENT", RESUME_MESSAGE)]
    assert artifact_text(task) == FINAL


async def test_resume_when_the_first_tool_call_is_cut_off(tmp_path, fake_llm):
    db = tmp_path / "tasks.db"
    started = threading.Event()
    fake_llm.script(tool_calls(("call-lookup", "lookup_order", {"order_id": "A-17"})))
    with server(db, declare_agent(fake_llm, blocks(started), returns(SHIP_RESULT))) as first:
        task_id = await start_task(f"{first.url}/a2a/{AGENT}")
        await wait_until(started, "the model's tool call did not reach the tool")
    assert len(fake_llm.bodies) == 1
    before = fake_llm.bodies[0]["messages"]
    assert before == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    checkpoint = await stored_checkpoint(db, task_id)

    fake_llm.script(text(FINAL))
    with server(db, declare_agent(fake_llm, returns(LOOKUP_RESULT), returns(SHIP_RESULT))) as second:
        task = await final_task(f"{second.url}/a2a/{AGENT}", task_id)

    check_resumed(task, checkpoint)
    # The model's next request holds the conversation from before the restart: the user's message and
    # its own tool call, now answered by the tool (which returns on this server).
    assert len(fake_llm.bodies) == 2
    after = fake_llm.bodies[1]["messages"]
    assert after[:2] == before
    assert [x["role"] for x in after[2:]] == ["assistant", "tool"]
    assert calls_of(after[2]) == [("call-lookup", "lookup_order", {"order_id": "A-17"})]
    assert after[3]["tool_call_id"] == "call-lookup" and LOOKUP_RESULT in after[3]["content"]


async def test_resume_from_the_checkpoint_of_a_finished_iteration(tmp_path, fake_llm):
    db = tmp_path / "tasks.db"
    started = threading.Event()
    fake_llm.script(
        tool_calls(("call-lookup", "lookup_order", {"order_id": "A-17"})),
        tool_calls(("call-ship", "ship_order", {"order_id": "A-17"})),
    )
    with server(db, declare_agent(fake_llm, returns(LOOKUP_RESULT), blocks(started))) as first:
        task_id = await start_task(f"{first.url}/a2a/{AGENT}")
        await wait_until(started, "the model's second tool call did not reach the tool")
    assert len(fake_llm.bodies) == 2
    before = fake_llm.bodies[1]["messages"]  # the last request the model got before the restart
    checkpoint = await stored_checkpoint(db, task_id)
    # the checkpoint taken before the second tool ran: the conversation so far plus the unanswered call
    assert checkpoint is not None and checkpoint["iterations"] == 2
    assert [{"role": "system", "content": SYSTEM}, *checkpoint["messages"][:-1]] == before
    assert calls_of(checkpoint["messages"][-1]) == [("call-ship", "ship_order", {"order_id": "A-17"})]

    fake_llm.script(text(FINAL))
    with server(db, declare_agent(fake_llm, returns(LOOKUP_RESULT), returns(SHIP_RESULT))) as second:
        task = await final_task(f"{second.url}/a2a/{AGENT}", task_id)

    check_resumed(task, checkpoint)
    # The cut-off call ran again (at least once) and the model got its result, after what it had seen
    # before the restart: the user's message, the first tool call and its result.
    assert len(fake_llm.bodies) == 3
    after = fake_llm.bodies[2]["messages"]
    assert after[: len(before)] == before
    assert after[1] == {"role": "user", "content": QUESTION}
    assert calls_of(after[2]) == [("call-lookup", "lookup_order", {"order_id": "A-17"})]
    assert after[3]["role"] == "tool" and after[3]["tool_call_id"] == "call-lookup"
    assert LOOKUP_RESULT in after[3]["content"]
    assert calls_of(after[4]) == [("call-ship", "ship_order", {"order_id": "A-17"})]
    assert after[5]["role"] == "tool" and after[5]["tool_call_id"] == "call-ship" and SHIP_RESULT in after[5]["content"]
    assert await stored_checkpoint(db, task_id) is None  # a finished task's checkpoint is dropped
