"""RemoteAgent fronting another live Parley server, and the LLM-facing `delegate` tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest
from hubkit import QUESTION, collect, get_task, last_state, path_of, specialist_agent, status_texts, trace

from parley.agents.llm import ChatRequest, Finish, LLMAgent, LLMBackend, TextDelta, ToolCall
from parley.app import Parley
from parley.client import A2AClient, ClientError, user_message
from parley.hub.delegation import Delegator
from parley.hub.remote import RemoteAgent
from parley.hub.routing import RoutedAgent, delegate_tool
from parley.protocol import models as m
from parley.tasks.memory_store import MemoryTaskStore
from support import LiveServer

S = m.TaskState


@pytest.fixture
def remote() -> Iterator[LiveServer]:
    """Another Parley server, hosting only the specialist."""
    app = Parley(store=MemoryTaskStore())
    app.add_agent(specialist_agent())
    live = LiveServer(app, self_url=True).start()
    yield live
    live.stop()


async def test_remote_agent_fronts_another_parley_server(remote: LiveServer) -> None:
    app = Parley(store=MemoryTaskStore())
    card_url = f"{remote.url}/a2a/specialist/.well-known/agent-card.json"
    agent = await RemoteAgent.load("claims", card_url, delegator=Delegator(self_url=lambda: app.settings.self_url))
    app.add_agent(agent)
    local = LiveServer(app, self_url=True).start()
    try:
        url = f"{local.url}/a2a/claims"
        async with await A2AClient.connect(url) as client:
            card = client.card
            assert card is not None
            assert (card.name, card.description) == ("specialist", "Refunds and warranty claims")
            assert [(s.id, s.tags) for s in card.skills] == [("claims", ["warranty", "repair"])]

            first = await collect(client, "My warranty claim")
            task = first[0]
            assert isinstance(task, m.Task)
            assert last_state(first) is S.INPUT_REQUIRED and status_texts(first)[-1] == QUESTION
            second = await collect(client, user_message("INV-99"), task_id=task.id, context_id=task.context_id)
        assert last_state(second) is S.COMPLETED
        final = await get_task(url, task.id)
        report = next(a for a in final.artifacts or [] if a.name == "report")
        assert report.artifact_id == "report"  # a RemoteAgent relays artifacts as they are
        assert report.parts[0].data == {"invoice": "INV-99", "refund": "approved"}

        tree = await trace(url, task.id)
        assert path_of(tree) == [("claims", "completed"), ("specialist", "completed")]
        child = tree["children"][0]
        assert child["source"] == "remote" and child["url"] == f"{remote.url}/a2a/specialist"
        assert child["parent"] == task.id
        remote_task = await get_task(f"{remote.url}/a2a/specialist", child["taskId"])
        assert remote_task.history[0].reference_task_ids == [task.id]
        assert remote_task.history[0].metadata["parley"] == {"chain": [url], "depth": 1}

        # once the remote server is gone, the trace still names the child and says what happened
        remote.stop()
        tree = await trace(url, task.id)
        assert tree["children"][0]["source"] == "unreachable" and tree["children"][0]["state"] == "unknown"
    finally:
        local.stop()


async def test_remote_agent_load_fails_clearly_when_the_card_is_unreachable() -> None:
    from support import free_port

    with pytest.raises(ClientError, match="cannot reach"):
        await RemoteAgent.load("x", f"http://127.0.0.1:{free_port()}/.well-known/agent-card.json", timeout=2)


# --- the delegate tool -----------------------------------------------------------------------


@dataclass
class Scripted(LLMBackend):
    """A model that first calls `delegate` with `arguments`, then repeats the tool's result."""

    arguments: dict
    requests: list[ChatRequest] = field(default_factory=list)

    async def stream(self, request: ChatRequest) -> AsyncIterator:
        self.requests.append(request)
        if len(self.requests) == 1:
            yield Finish(reason="tool_calls", tool_calls=[ToolCall("call-1", "delegate", json.dumps(self.arguments))])
            return
        result = request.messages[-1]["content"]
        yield TextDelta(f"Result: {result}")
        yield Finish(reason="stop")


def concierge_app(arguments: dict) -> tuple[Parley, Scripted]:
    app = Parley(store=MemoryTaskStore())
    delegator = Delegator(self_url=lambda: app.settings.self_url)
    backend = Scripted(arguments)
    tool = delegate_tool({"specialist": ("specialist", "Refunds and warranty claims"),
                          "nobody": ("http://127.0.0.1:9/a2a/x", "")}, delegator)
    llm = LLMAgent(id="concierge", backend=backend, model="fake", tools=[tool])
    app.add_agent(RoutedAgent(llm, [], delegator=delegator))
    app.add_agent(specialist_agent())
    return app, backend


def test_delegate_tool_schema_lists_the_allowed_agents() -> None:
    tool = delegate_tool({"specialist": ("/a2a/specialist", "Refunds and warranty claims"),
                          "billing": ("https://b.example/a2a/billing", "Invoices")}, Delegator())
    assert tool.name == "delegate"
    assert tool.parameters["properties"]["agent"]["enum"] == ["specialist", "billing"]
    assert "specialist: Refunds and warranty claims" in tool.description
    assert "billing: Invoices" in tool.parameters["properties"]["agent"]["description"]
    assert tool.parameters["required"] == ["agent", "message"]


async def test_an_llm_agent_delegates_with_the_tool() -> None:
    app, _ = concierge_app({"agent": "specialist", "message": "Refund INV-9 please"})
    live = LiveServer(app, self_url=True).start()
    try:
        url = f"{live.url}/a2a/concierge"
        async with await A2AClient.connect(url) as client:
            task = await client.send("I need my money back for INV-9")
        assert isinstance(task, m.Task) and task.status.state is S.COMPLETED
        answer = "".join(p.text or "" for a in task.artifacts or [] for p in a.parts)
        assert answer == "Result: Refund approved for INV-9."
        tree = await trace(url, task.id)
        assert path_of(tree) == [("concierge", "completed"), ("specialist", "completed")]
        child = await get_task(f"{live.url}/a2a/specialist", tree["children"][0]["taskId"])
        assert child.history[0].reference_task_ids == [task.id]
        assert child.history[0].metadata["parley"]["chain"] == [url]
    finally:
        live.stop()


async def test_a_question_inside_a_tool_call_is_reported_to_the_model() -> None:
    app, backend = concierge_app({"agent": "specialist", "message": "A refund please"})
    live = LiveServer(app, self_url=True).start()
    try:
        url = f"{live.url}/a2a/concierge"
        async with await A2AClient.connect(url) as client:
            task = await client.send("refund")
        assert isinstance(task, m.Task) and task.status.state is S.COMPLETED
        tool_result = backend.requests[1].messages[-1]["content"]
        assert tool_result.startswith("error: specialist asked a follow-up question")
        assert QUESTION in tool_result
        tree = await trace(url, task.id)
        assert path_of(tree) == [("concierge", "completed"), ("specialist", "canceled")]
    finally:
        live.stop()
