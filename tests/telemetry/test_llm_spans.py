"""Model-call and tool-call spans of an LLM agent (GenAI conventions), against the fake model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_llm import FakeLLM, error, text, tool_calls  # tests/runtime: the fake OpenAI-compatible server
from opentelemetry.trace import SpanKind, StatusCode

from parley.agents.llm import LLMAgent, OpenAICompatBackend
from parley.agents.tools import tool
from parley.app import Parley
from parley.client import A2AClient
from parley.protocol import models as m
from parley.tasks.memory_store import MemoryTaskStore


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    fake = FakeLLM().start()
    yield fake
    fake.stop()


@pytest.fixture
def backend(fake_llm: FakeLLM) -> OpenAICompatBackend:
    return OpenAICompatBackend(base_url=fake_llm.base_url, api_key="test-key", model="fake-model", timeout=20,
                               max_attempts=1, backoff=0.001, max_backoff=0.01, env={})


def children(otel, parent) -> list:
    return sorted((s for s in otel.finished() if s.parent is not None and s.parent.span_id == parent.context.span_id),
                  key=lambda s: s.start_time)


async def test_model_and_tool_calls_are_genai_spans_under_the_task(spans, serve, fake_llm, backend):
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    fake_llm.script(tool_calls(("call_1", "add", {"a": 2, "b": 3}), tokens=21), text("The sum is 5.", tokens=30))
    app = Parley(store=MemoryTaskStore())
    app.add_agent(LLMAgent(id="calc", backend=backend, tools=[add]))
    srv = serve(app)
    async with await A2AClient.connect(f"{srv.url}/a2a/calc") as client:
        task = await client.send("What is 2 + 3?")
    assert task.status.state is m.TaskState.COMPLETED
    task_span = spans.one("a2a task calc")
    chat1, tool_span, chat2 = children(spans, task_span)

    for chat in (chat1, chat2):
        assert chat.name == "chat fake-model" and chat.kind is SpanKind.CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.system"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
    # the fake server reports usage per call: 21 tokens = 14 in + 7 out, then 30 = 20 + 10
    assert (chat1.attributes["gen_ai.usage.input_tokens"], chat1.attributes["gen_ai.usage.output_tokens"]) == (14, 7)
    assert (chat2.attributes["gen_ai.usage.input_tokens"], chat2.attributes["gen_ai.usage.output_tokens"]) == (20, 10)
    assert [chat1.attributes["parley.llm.iteration"], chat2.attributes["parley.llm.iteration"]] == [1, 2]

    assert tool_span.name == "execute_tool add"
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool_span.attributes["parley.tool.success"] is True
    # one after the other: model call, the tool it asked for, the model call that answers
    assert chat1.end_time <= tool_span.start_time <= tool_span.end_time <= chat2.start_time
    assert task_span.start_time <= chat1.start_time and chat2.end_time <= task_span.end_time

    usage = {(dict(p.attributes)["gen_ai.token.type"]): p.sum for p in spans.points("gen_ai.client.token.usage")
             if dict(p.attributes).get("gen_ai.request.model") == "fake-model"}
    assert usage["input"] >= 34 and usage["output"] >= 17


async def test_a_failing_tool_and_a_failing_model_call_are_errors(spans, serve, fake_llm, backend):
    @tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("no")

    fake_llm.script(tool_calls(("call_x", "explode", {})), error(500, "model is down"))
    app = Parley(store=MemoryTaskStore())
    app.add_agent(LLMAgent(id="fragile", backend=backend, tools=[explode]))
    srv = serve(app)
    async with await A2AClient.connect(f"{srv.url}/a2a/fragile") as client:
        task = await client.send("try")
    assert task.status.state is m.TaskState.FAILED
    task_span = spans.one("a2a task fragile")
    assert task_span.status.status_code is StatusCode.ERROR
    chat1, tool_span, chat2 = children(spans, task_span)
    assert tool_span.status.status_code is StatusCode.ERROR and tool_span.attributes["error.type"] == "tool_error"
    assert chat1.status.status_code is not StatusCode.ERROR
    assert chat2.status.status_code is StatusCode.ERROR  # the call the task failed in


async def test_a_call_made_by_a_tool_is_a_child_of_the_tool_span(spans, serve, fake_llm, backend):
    """A tool that calls another A2A agent: the CLIENT span hangs under the tool's span, in the same trace."""
    where: dict[str, str] = {}

    @tool
    async def ask_echo(question: str) -> str:
        """Ask the echo agent."""
        async with await A2AClient.connect(where["echo"]) as client:
            answer = await client.send(question)
        return "".join(p.text or "" for a in answer.artifacts or [] for p in a.parts)

    fake_llm.script(tool_calls(("call_e", "ask_echo", {"question": "ping"})), text("It said ping."))
    app = Parley(store=MemoryTaskStore())
    app.add_agent(LLMAgent(id="asker", backend=backend, tools=[ask_echo]))

    @app.agent(id="echo")
    async def echo(ctx):
        yield ctx.text

    srv = serve(app)
    where["echo"] = f"{srv.url}/a2a/echo"
    async with await A2AClient.connect(f"{srv.url}/a2a/asker") as client:
        task = await client.send("Ask echo to say ping")
    assert task.status.state is m.TaskState.COMPLETED
    tool_span = spans.one("execute_tool ask_echo")
    call, = [s for s in spans.named("a2a SendMessage", SpanKind.CLIENT) if s.parent is not None]
    assert call.parent.span_id == tool_span.context.span_id
    echo_request = spans.one("a2a SendMessage", SpanKind.SERVER, a2a__agent_id="echo")
    assert echo_request.parent.span_id == call.context.span_id
    assert len({s.context.trace_id for s in spans.finished()}) == 1  # all under the test's call
