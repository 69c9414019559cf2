"""Checkpoints: the conversation state as JSON, restored with `resume_from` / `restore`."""

from __future__ import annotations

import json
import uuid

import pytest
from fake_llm import text, tool_calls

from parley.agents.base import InternalEvent, RunContext, Status
from parley.agents.llm import AgentLoop, Conversation, LLMAgent
from parley.agents.llm.state import CheckpointError
from parley.agents.tools import client_tool, tool
from parley.protocol import models as m


@tool
def double(n: int) -> int:
    """Twice n."""
    return 2 * n


@client_tool
def pick_file() -> str:
    """Let the user pick a file."""


def user(text_: str, task_id: str = "t1") -> m.Message:
    return m.Message(message_id=str(uuid.uuid4()), role=m.Role.USER, parts=[m.Part(text=text_)], task_id=task_id,
                     context_id="c1")


def ctx_for(msg: m.Message, history: list[m.Message] | None = None) -> RunContext:
    return RunContext(task_id=msg.task_id or "t1", context_id="c1", message=msg, history=history or [msg],
                      agent_id="a", owner="anonymous")


async def drain(agent: AgentLoop, ctx: RunContext) -> list:
    return [out async for out in agent.run(ctx)]


def checkpoints(outputs: list, phase: str = "iteration") -> list[dict]:
    """The checkpoints of one phase: "iteration" (after each iteration) or "tools" (before running tools)."""
    return [o.data for o in outputs
            if isinstance(o, InternalEvent) and o.kind == "internal:checkpoint" and o.data["phase"] == phase]


async def test_a_checkpoint_before_the_tools_run_holds_the_unanswered_calls(fake_llm, backend):
    fake_llm.script(tool_calls(("c1", "double", {"n": 21})), text("42"))
    outputs = await drain(LLMAgent(id="a", backend=backend, tools=[double]), ctx_for(user("double 21")))
    (before_tools,) = checkpoints(outputs, "tools")
    assert before_tools["iteration"] == 1
    assert [x["role"] for x in before_tools["state"]["messages"]] == ["user", "assistant"]
    assert AgentLoop.resume_from(before_tools["state"]).pending()[0].id == "c1"


async def test_checkpoints_after_each_iteration_are_json_and_restorable(fake_llm, backend):
    fake_llm.script(tool_calls(("c1", "double", {"n": 21})), text("42"))
    agent = LLMAgent(id="a", backend=backend, tools=[double])
    outputs = await drain(agent, ctx_for(user("double 21")))
    assert [o for o in outputs if isinstance(o, str)] == ["42"]
    cps = checkpoints(outputs)
    assert [c["iteration"] for c in cps] == [1, 2]
    first = json.loads(json.dumps(cps[0]["state"]))
    assert first["version"] == 1 and first["iterations"] == 1 and first["toolCalls"] == 1
    assert [x["role"] for x in first["messages"]] == ["user", "assistant", "tool"]
    conv = AgentLoop.resume_from(first)
    assert isinstance(conv, Conversation)
    assert conv.messages == first["messages"] and conv.usage.total_tokens == 20
    assert conv.to_checkpoint() == first


async def test_restore_continues_a_task_where_its_checkpoint_left_it(fake_llm, backend):
    """What the engine will do after a restart: restore the last checkpoint, run the task again."""
    fake_llm.script(tool_calls(("c1", "double", {"n": 4})), text("8"))
    agent = LLMAgent(id="a", backend=backend, tools=[double])
    msg = user("double 4")
    first_cp = checkpoints(await drain(agent, ctx_for(msg)))[0]["state"]

    fresh = LLMAgent(id="a", backend=backend, tools=[double])
    fake_llm.script(text("it is 8"))
    fresh.restore("t1", first_cp)
    outputs = await drain(fresh, ctx_for(msg))  # the same message: already in the checkpoint
    assert [o for o in outputs if isinstance(o, str)] == ["it is 8"]
    resumed = fake_llm.bodies[-1]["messages"]
    assert resumed == first_cp["messages"]
    assert checkpoints(outputs)[-1]["state"]["iterations"] == 2


async def test_restore_while_waiting_for_the_client_asks_again(fake_llm, backend):
    fake_llm.script(tool_calls(("f1", "pick_file", {})))
    agent = LLMAgent(id="a", backend=backend, tools=[pick_file])
    msg = user("open a file")
    outputs = await drain(agent, ctx_for(msg))
    assert isinstance(outputs[-1], Status) and outputs[-1].state is m.TaskState.INPUT_REQUIRED
    saved = checkpoints(outputs)[-1]["state"]

    fresh = LLMAgent(id="a", backend=backend, tools=[pick_file])
    fresh.restore("t1", saved)
    again = await drain(fresh, ctx_for(msg))
    status = again[-1]
    assert isinstance(status, Status) and status.state is m.TaskState.INPUT_REQUIRED
    assert [p.data for p in status.parts if p.content_kind == "data"] == [
        {"toolCall": {"id": "f1", "name": "pick_file", "arguments": {}}}]
    assert len(fake_llm.requests) == 1


def test_bad_checkpoints_are_refused():
    with pytest.raises(CheckpointError):
        AgentLoop.resume_from({"version": 99, "messages": []})
    with pytest.raises(CheckpointError):
        AgentLoop.resume_from({"version": 1, "messages": [{"content": "no role"}]})


async def test_a_corrupt_checkpoint_fails_the_task_with_a_message(backend):
    agent = LLMAgent(id="a", backend=backend)
    agent.restore("t1", {"version": 99})
    outputs = await drain(agent, ctx_for(user("hi")))
    assert isinstance(outputs[-1], Status) and outputs[-1].state is m.TaskState.FAILED
    assert outputs[-1].text == "The agent failed: not a version 1 agent-loop checkpoint"


def test_history_with_agent_messages_becomes_assistant_turns():
    agent_msg = m.Message(message_id="a1", role=m.Role.AGENT, parts=[m.Part(text="What colour?")])
    conv = Conversation.from_history([user("paint it"), agent_msg, user("blue")])
    assert conv.messages == [{"role": "user", "content": "paint it"},
                             {"role": "assistant", "content": "What colour?"},
                             {"role": "user", "content": "blue"}]
