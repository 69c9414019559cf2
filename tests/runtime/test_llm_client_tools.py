"""Client-side tools: input-required with toolCall data parts, answered with toolResult data parts."""

from __future__ import annotations

import httpx
import pytest
from fake_llm import text, tool_calls

from parley.agents.llm import LLMAgent
from parley.agents.tools import CLIENT_TOOLS_URI, ClientTool, client_tool, tool
from parley.agents.tools.client_side import tool_result_part
from parley.client import A2AClient
from parley.client.client import user_message
from parley.protocol import models as m

S = m.TaskState


@client_tool
def get_location(precision: str = "city") -> dict:
    """The user's location, read on the client device.

    Args:
        precision: "city" or "exact".
    """


confirm = ClientTool("confirm", "Ask the user to confirm an action.",
                     {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]})


@tool
def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def data_parts(message: m.Message) -> list[dict]:
    return [p.data for p in message.parts if p.content_kind == "data"]


def artifact_text(task: m.Task) -> str:
    return "".join(p.text or "" for a in task.artifacts or [] for p in a.parts)


def make_agent(backend) -> LLMAgent:
    return LLMAgent(id="locator", backend=backend, tools=[get_location, confirm, weather],
                    system_prompt="Use the tools.")


async def test_the_card_declares_the_client_tools_extension(host, backend):
    hosted = host(make_agent(backend))
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"{hosted.agent_url('locator')}/.well-known/agent-card.json",
                              headers={"A2A-Version": "1.0"})
    card = resp.json()
    [ext] = card["capabilities"]["extensions"]
    assert ext["uri"] == CLIENT_TOOLS_URI
    assert not ext.get("required", False)
    assert ext["params"]["tools"] == [
        {"name": "get_location", "description": "The user's location, read on the client device.",
         "parameters": {"type": "object", "properties": {
             "precision": {"type": "string", "description": '"city" or "exact".', "default": "city"}}}},
        {"name": "confirm", "description": "Ask the user to confirm an action.",
         "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}},
    ]
    assert "application/json" in card["defaultInputModes"]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_client_tool_round_trip(fake_llm, backend, host, version):
    fake_llm.script(
        tool_calls(("call_loc", "get_location", {"precision": "city"}), ("call_w", "weather", {"city": "Oslo"}),
                   say="Checking."),
        text("You are in Paris; Oslo is sunny."),
    )
    hosted = host(make_agent(backend))
    async with await A2AClient.connect(hosted.agent_url("locator"), version=version) as client:
        first = await client.send("where am I?")
        assert first.status.state is S.INPUT_REQUIRED
        question = first.status.message
        assert question.role is m.Role.AGENT
        assert data_parts(question) == [
            {"toolCall": {"id": "call_loc", "name": "get_location", "arguments": {"precision": "city"}}}]
        assert "get_location" in question.text()
        assert artifact_text(first) == "Checking."
        # the server-side tool of the same step already ran; the model is not called again yet
        assert len(fake_llm.requests) == 1

        answer = user_message(parts=[tool_result_part("call_loc", {"city": "Paris"})])
        second = await client.send(answer, task_id=first.id)
    assert second.id == first.id and second.status.state is S.COMPLETED
    assert artifact_text(second).endswith("You are in Paris; Oslo is sunny.")
    messages = fake_llm.bodies[1]["messages"]
    assert messages[0] == {"role": "system", "content": "Use the tools."}
    assert messages[1] == {"role": "user", "content": "where am I?"}
    assert messages[2]["role"] == "assistant" and len(messages[2]["tool_calls"]) == 2
    tools = {x["tool_call_id"]: x["content"] for x in messages if x["role"] == "tool"}
    assert tools == {"call_w": "sunny in Oslo", "call_loc": '{"city": "Paris"}'}
    assert len(messages) == 5  # no stray user message: the answer had only the tool result
    starts = [e.data for e in hosted.events("internal:tool-start", first.id)]
    assert {s["toolCallId"]: s.get("clientSide", False) for s in starts} == {"call_w": False, "call_loc": True}
    completes = [e.data for e in hosted.events("internal:tool-complete", first.id)]
    assert {c["toolCallId"]: c["success"] for c in completes} == {"call_w": True, "call_loc": True}


async def test_client_error_and_extra_text_reach_the_model(fake_llm, backend, host):
    fake_llm.script(tool_calls(("call_ok", "confirm", {"question": "Delete all?"})), text("Not deleting."))
    hosted = host(make_agent(backend))
    async with await A2AClient.connect(hosted.agent_url("locator")) as client:
        first = await client.send("delete everything")
        assert first.status.state is S.INPUT_REQUIRED
        answer = user_message(parts=[m.Part(text="I said no."), tool_result_part("call_ok", error="user declined")])
        second = await client.send(answer, task_id=first.id)
    assert second.status.state is S.COMPLETED
    messages = fake_llm.bodies[1]["messages"]
    assert messages[-2] == {"role": "tool", "tool_call_id": "call_ok", "content": "error: user declined"}
    assert messages[-1] == {"role": "user", "content": "I said no."}


async def test_an_answer_without_results_tells_the_model(fake_llm, backend, host):
    fake_llm.script(tool_calls(("call_1", "get_location", {})), text("Okay, no location."))
    hosted = host(make_agent(backend))
    async with await A2AClient.connect(hosted.agent_url("locator")) as client:
        first = await client.send("where?")
        second = await client.send("I won't tell you", task_id=first.id)
    assert second.status.state is S.COMPLETED
    messages = fake_llm.bodies[1]["messages"]
    assert messages[-2] == {"role": "tool", "tool_call_id": "call_1",
                            "content": "error: the client answered without a result for this tool call"}
    assert messages[-1] == {"role": "user", "content": "I won't tell you"}


async def test_the_conversation_is_rebuilt_from_history_without_a_checkpoint(fake_llm, backend, host):
    """As after a restart: the in-memory checkpoint is gone, the task's history is enough."""
    fake_llm.script(tool_calls(("call_loc", "get_location", {"precision": "exact"})), text("Found you."))
    agent = make_agent(backend)
    hosted = host(agent)
    async with await A2AClient.connect(hosted.agent_url("locator")) as client:
        first = await client.send("where am I?")
        agent._waiting.clear()
        second = await client.send(user_message(parts=[tool_result_part("call_loc", {"lat": 1})]), task_id=first.id)
    assert second.status.state is S.COMPLETED
    messages = fake_llm.bodies[1]["messages"]
    assert messages[1:] == [
        {"role": "user", "content": "where am I?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_loc", "type": "function", "function": {
            "name": "get_location", "arguments": '{"precision": "exact"}'}}]},
        {"role": "tool", "tool_call_id": "call_loc", "content": '{"lat": 1}'},
    ]


async def test_the_documented_wire_shapes_in_a2a_1_0(fake_llm, backend, host):
    """docs/client-side-tools.md, byte for byte: the request as streamed, the answer as sent."""
    fake_llm.script(tool_calls(("call_loc", "get_location", {"precision": "city"})), text("Paris it is."))
    hosted = host(make_agent(backend))
    url, headers = hosted.agent_url("locator"), {"A2A-Version": "1.0"}
    ask = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "wire-1", "role": "ROLE_USER", "parts": [{"text": "where am I?"}]}}}
    async with httpx.AsyncClient(timeout=30) as http:
        task = (await http.post(url, json=ask, headers=headers)).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        parts = task["status"]["message"]["parts"]
        assert parts[0] == {"text": "Run these client-side tools and reply with their results: get_location"}
        assert parts[1] == {"data": {"toolCall": {"id": "call_loc", "name": "get_location",
                                                  "arguments": {"precision": "city"}}},
                            "mediaType": "application/json"}
        answer = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
            "messageId": "wire-2", "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
            "extensions": [CLIENT_TOOLS_URI],
            "parts": [{"data": {"toolResult": {"id": "call_loc", "result": {"city": "Paris"}}},
                       "mediaType": "application/json"}]}}}
        done = (await http.post(url, json=answer, headers=headers)).json()["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert fake_llm.bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_loc",
                                                  "content": '{"city": "Paris"}'}


async def test_the_documented_wire_shapes_in_a2a_0_3(fake_llm, backend, host):
    fake_llm.script(tool_calls(("call_loc", "get_location", {})), text("Paris it is."))
    hosted = host(make_agent(backend))
    url = hosted.agent_url("locator")
    ask = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "wire-03-1", "role": "user", "parts": [{"kind": "text", "text": "where?"}]}}}
    async with httpx.AsyncClient(timeout=30) as http:
        task = (await http.post(url, json=ask)).json()["result"]
        assert task["status"]["state"] == "input-required"
        data = [p for p in task["status"]["message"]["parts"] if p["kind"] == "data"]
        assert [p["data"] for p in data] == [{"toolCall": {"id": "call_loc", "name": "get_location", "arguments": {}}}]
        answer = {"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": {
            "kind": "message", "messageId": "wire-03-2", "role": "user", "taskId": task["id"],
            "parts": [{"kind": "data", "data": {"toolResult": {"id": "call_loc", "error": "denied"}}}]}}}
        done = (await http.post(url, json=answer)).json()["result"]
    assert done["status"]["state"] == "completed"
    assert fake_llm.bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_loc",
                                                  "content": "error: denied"}
