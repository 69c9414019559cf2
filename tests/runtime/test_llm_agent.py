"""End to end: LLM agents on a live Parley server, a fake model server, Parley's client."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from fake_llm import error, hang, text, tool_calls

from parley.agents.llm import Limits, LLMAgent
from parley.agents.tools import ToolError, tool
from parley.client import A2AClient
from parley.protocol import models as m

S = m.TaskState


def artifact_text(task: m.Task) -> str:
    return "".join(p.text or "" for a in task.artifacts or [] for p in a.parts)


def tool_messages(body: dict) -> list[dict]:
    return [x for x in body["messages"] if x["role"] == "tool"]


async def connect(hosted, agent_id: str, version: str | None = None) -> A2AClient:
    return await A2AClient.connect(hosted.agent_url(agent_id), version=version)


# --- answers and tools ------------------------------------------------------------


async def test_plain_answer_streams_as_artifact_chunks(fake_llm, backend, host):
    fake_llm.script(text("Hello", ", world", "!"))
    hosted = host(LLMAgent(id="bot", backend=backend, system_prompt="Be brief."))
    async with await connect(hosted, "bot") as client:
        events = [ev async for ev in client.stream("hi")]
    chunks = [e for e in events if isinstance(e, m.TaskArtifactUpdateEvent)]
    # Deltas that reach the agent within one event-loop turn are coalesced into one chunk: each chunk
    # is one or more whole deltas, in order.
    texts = [e.artifact.parts[0].text for e in chunks]
    assert "".join(texts) == "Hello, world!"
    # The answer's end is marked lastChunk: on the last delta's chunk, or on an empty chunk when that went out first.
    pieces = texts[:-1] if texts[-1] == "" else texts
    assert all(t in ("Hello", ", world", "!", "Hello, world", ", world!", "Hello, world!") for t in pieces), texts
    assert [e.append for e in chunks] == [False] + [True] * (len(chunks) - 1)
    assert [e.last_chunk for e in chunks] == [False] * (len(chunks) - 1) + [True]
    assert len({e.artifact.artifact_id for e in chunks}) == 1
    assert isinstance(events[-1], m.TaskStatusUpdateEvent) and events[-1].status.state is S.COMPLETED
    req = fake_llm.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer test-key"
    body = req["json"]
    assert body["stream"] is True and body["model"] == "fake-model"
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert "tools" not in body


async def test_python_tool_is_called_and_its_result_fed_back(fake_llm, backend, host):
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b

    fake_llm.script(tool_calls(("call_1", "add", {"a": 2, "b": 3}), say="Let me add."), text("It is 5."))
    hosted = host(LLMAgent(id="calc", backend=backend, tools=[add]))
    async with await connect(hosted, "calc") as client:
        task = await client.send("what is 2+3?")
    assert task.status.state is S.COMPLETED
    assert artifact_text(task) == "Let me add.\n\nIt is 5."
    offered = fake_llm.bodies[0]["tools"]
    assert offered == [{"type": "function", "function": {
        "name": "add", "description": "Add two integers.",
        "parameters": {"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": "integer", "description": "The first number."},
            "b": {"type": "integer", "description": "The second number."}}}}}]
    second = fake_llm.bodies[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Let me add.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}


async def test_tools_of_one_step_run_concurrently(fake_llm, backend, host):
    ping_in, pong_in = asyncio.Event(), asyncio.Event()

    @tool
    async def ping() -> str:
        """Waits for pong."""
        ping_in.set()
        await pong_in.wait()
        return "ping done"

    @tool
    async def pong() -> str:
        """Waits for ping."""
        pong_in.set()
        await ping_in.wait()
        return "pong done"

    fake_llm.script(tool_calls(("c1", "ping", {}), ("c2", "pong", {})), text("both done"))
    agent = LLMAgent(id="pair", backend=backend, tools=[ping, pong], limits=Limits(tool_timeout=20))
    hosted = host(agent)
    async with await connect(hosted, "pair") as client:
        task = await client.send("go")
    # run one after the other, each would wait for the other forever (until tool_timeout)
    assert task.status.state is S.COMPLETED, task.status
    assert [t["content"] for t in tool_messages(fake_llm.bodies[1])] == ["ping done", "pong done"]


async def test_a_failing_tool_shows_the_model_an_error_and_the_task_goes_on(fake_llm, backend, host):
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        raise KeyError(f"no entry {key}")

    @tool
    async def strict(n: int) -> str:
        """Refuses."""
        raise ToolError("n must be positive")

    fake_llm.script(
        tool_calls(("c1", "lookup", {"key": "x"}), ("c2", "strict", {"n": -1}), ("c3", "nope", {}),
                   ("c4", "strict", {"m": 1})),
        text("Sorry, that failed."),
    )
    hosted = host(LLMAgent(id="fragile", backend=backend, tools=[lookup, strict]))
    async with await connect(hosted, "fragile") as client:
        task = await client.send("look up x")
    assert task.status.state is S.COMPLETED
    assert artifact_text(task) == "Sorry, that failed."
    results = {t["tool_call_id"]: t["content"] for t in tool_messages(fake_llm.bodies[1])}
    assert results["c1"] == "error: KeyError: 'no entry x'"
    assert results["c2"] == "error: n must be positive"
    assert results["c3"].startswith("error: there is no tool named 'nope'")
    assert results["c4"].startswith("error: unknown argument(s) m")
    completes = {e.data["toolCallId"]: e.data["success"] for e in hosted.events("internal:tool-complete")}
    assert completes == {"c1": False, "c2": False, "c3": False, "c4": False}


async def test_multi_turn_history_reaches_the_model(fake_llm, backend, host):
    fake_llm.script(text("first answer"), text("second answer"), text("third answer"))
    hosted = host(LLMAgent(id="chat", backend=backend, system_prompt="sys"))
    async with await connect(hosted, "chat") as client:
        first = await client.send("one")
        assert first.status.state is S.COMPLETED
        # a new task in the same context continues the conversation: the model sees the earlier turn
        second = await client.send("two", context_id=first.context_id)
        # a task in another context starts afresh
        other = await client.send("three")
    assert second.status.state is S.COMPLETED and artifact_text(second) == "second answer"
    assert fake_llm.bodies[1]["messages"] == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first answer"}, {"role": "user", "content": "two"}]
    assert other.context_id != first.context_id
    assert fake_llm.bodies[2]["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "three"}]


# --- retries ----------------------------------------------------------------------


async def test_rate_limit_then_success_is_retried(fake_llm, backend, host):
    fake_llm.script(error(429, "slow down", retry_after="0"), error(503, "busy"), text("made it"))
    hosted = host(LLMAgent(id="retry", backend=backend))
    async with await connect(hosted, "retry") as client:
        task = await client.send("hi")
    assert task.status.state is S.COMPLETED and artifact_text(task) == "made it"
    assert len(fake_llm.requests) == 3


async def test_retries_are_bounded_and_the_failure_is_explained(fake_llm, backend, host):
    fake_llm.script(*[error(503, "overloaded")] * 3, text("too late"))
    hosted = host(LLMAgent(id="down", backend=backend))
    async with await connect(hosted, "down") as client:
        task = await client.send("hi")
    assert task.status.state is S.FAILED
    reason = task.status.message.text()
    assert reason == ("The model call failed: the model server answered HTTP 503 (error): overloaded "
                      "(after 3 attempts)")
    assert len(fake_llm.requests) == 3


async def test_client_errors_are_not_retried(fake_llm, backend, host):
    fake_llm.script(error(401, "bad key"), text("never"))
    hosted = host(LLMAgent(id="denied", backend=backend))
    async with await connect(hosted, "denied") as client:
        task = await client.send("hi")
    assert task.status.state is S.FAILED
    assert task.status.message.text() == "The model call failed: the model server answered HTTP 401 (error): bad key"
    assert "Traceback" not in task.status.message.text()
    assert len(fake_llm.requests) == 1


# --- limits -----------------------------------------------------------------------


@tool
def noop() -> str:
    """Does nothing."""
    return "ok"


async def test_max_iterations_fails_the_task(fake_llm, backend, host):
    fake_llm.script(tool_calls(("c1", "noop", {})), tool_calls(("c2", "noop", {})), text("unreached"))
    hosted = host(LLMAgent(id="loopy", backend=backend, tools=[noop], limits=Limits(max_iterations=2)))
    async with await connect(hosted, "loopy") as client:
        task = await client.send("go")
    assert task.status.state is S.FAILED
    assert task.status.message.text() == ("The agent stopped after 2 model calls without a final answer "
                                          "(max_iterations=2).")
    assert len(fake_llm.requests) == 2


async def test_max_tool_calls_fails_the_task(fake_llm, backend, host):
    fake_llm.script(tool_calls(("c1", "noop", {})), tool_calls(("c2", "noop", {}), ("c3", "noop", {})))
    hosted = host(LLMAgent(id="greedy", backend=backend, tools=[noop], limits=Limits(max_tool_calls=2)))
    async with await connect(hosted, "greedy") as client:
        task = await client.send("go")
    assert task.status.state is S.FAILED
    assert task.status.message.text() == ("The model asked for 3 tool calls in this task, more than the limit of 2 "
                                          "(max_tool_calls).")
    assert len(tool_messages(fake_llm.bodies[1])) == 1  # the first call ran, the second batch did not


async def test_token_budget_fails_the_task(fake_llm, backend, host):
    fake_llm.script(tool_calls(("c1", "noop", {}), tokens=60), text("over budget", tokens=60))
    hosted = host(LLMAgent(id="thrifty", backend=backend, tools=[noop], limits=Limits(token_budget=100)))
    async with await connect(hosted, "thrifty") as client:
        task = await client.send("go")
    assert task.status.state is S.FAILED
    assert task.status.message.text() == "The agent used 120 tokens, more than its budget of 100 (token_budget)."


async def test_model_timeout_fails_the_task_and_closes_the_stream(fake_llm, backend, host):
    fake_llm.script(hang("Thinking"))
    hosted = host(LLMAgent(id="sluggish", backend=backend, limits=Limits(model_timeout=0.5)))
    async with await connect(hosted, "sluggish") as client:
        task = await client.send("hi")
    assert task.status.state is S.FAILED
    assert task.status.message.text() == "The model did not finish answering within 0.5 s (model_timeout)."
    assert await asyncio.to_thread(fake_llm.disconnected.wait, 10)


async def test_tool_timeout_fails_the_task(fake_llm, backend, host):
    @tool
    async def stuck() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "unreached"

    fake_llm.script(tool_calls(("c1", "stuck", {})))
    hosted = host(LLMAgent(id="stuck", backend=backend, tools=[stuck], limits=Limits(tool_timeout=0.3)))
    async with await connect(hosted, "stuck") as client:
        task = await client.send("hi")
    assert task.status.state is S.FAILED
    assert task.status.message.text() == "Tool stuck did not finish within 0.3 s (tool_timeout)."


# --- cancel -----------------------------------------------------------------------


async def test_cancel_during_a_slow_model_stream_closes_the_http_stream(fake_llm, backend, host):
    fake_llm.script(hang("Let me think", " about it"))
    hosted = host(LLMAgent(id="thinker", backend=backend))
    async with await connect(hosted, "thinker") as client:
        task = await client.send("deep question", blocking=False)
        assert await asyncio.to_thread(fake_llm.hanging.wait, 10), "the model stream never started"
        canceled = await client.cancel(task.id)
        assert canceled.status.state is S.CANCELED
        assert await asyncio.to_thread(fake_llm.disconnected.wait, 10), "the model stream was left open"
        assert (await client.get(task.id)).status.state is S.CANCELED


async def test_cancel_during_a_slow_tool_stops_the_tool(fake_llm, backend, host):
    started, stopped = threading.Event(), threading.Event()

    @tool
    async def crawl(url: str) -> str:
        """Crawls a site (forever)."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "unreached"

    fake_llm.script(tool_calls(("c1", "crawl", {"url": "https://example.com"})))
    hosted = host(LLMAgent(id="crawler", backend=backend, tools=[crawl]))
    async with await connect(hosted, "crawler") as client:
        task = await client.send("crawl it", blocking=False)
        assert await asyncio.to_thread(started.wait, 10), "the tool never started"
        canceled = await client.cancel(task.id)
        assert canceled.status.state is S.CANCELED
        assert await asyncio.to_thread(stopped.wait, 10), "the tool was not cancelled"
    assert len(fake_llm.requests) == 1


# --- internal events -----------------------------------------------------------------


async def test_internal_events_reach_observers_but_never_clients(fake_llm, backend, host):
    fake_llm.script(tool_calls(("c1", "noop", {})), text("done"))
    hosted = host(LLMAgent(id="watched", backend=backend, tools=[noop]))
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": {
        "kind": "message", "messageId": "m-watched-1", "role": "user", "parts": [{"kind": "text", "text": "go"}]}}}
    async with httpx.AsyncClient(timeout=30) as http, http.stream("POST", hosted.agent_url("watched"),
                                                                  json=body) as resp:
        raw = await resp.aread()
    wire = raw.decode()
    frames = [json.loads(line[5:]) for line in wire.splitlines() if line.startswith("data:")]
    task_id = frames[0]["result"]["id"]
    assert frames[-1]["result"]["status"]["state"] == "completed"
    assert {f["result"]["kind"] for f in frames} <= {"task", "status-update", "artifact-update"}
    assert "internal" not in wire and "checkpoint" not in wire and "tool-start" not in wire
    kinds = hosted.kinds(task_id)
    assert kinds == ["internal:llm-call", "internal:checkpoint", "internal:tool-start", "internal:tool-complete",
                     "internal:checkpoint", "internal:llm-call", "internal:checkpoint"]
    start = hosted.events("internal:tool-start", task_id)[0].data
    assert start["toolName"] == "noop" and start["toolCallId"] == "c1" and start["taskId"] == task_id
    final = hosted.events("internal:checkpoint", task_id)[-1].data
    assert final["iteration"] == 2
    state = json.loads(json.dumps(final["state"]))  # plain JSON
    assert [x["role"] for x in state["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert state["usage"]["totalTokens"] == 32 and state["toolCalls"] == 1


# --- configuration ----------------------------------------------------------------------


async def test_missing_model_configuration_fails_clearly(host, monkeypatch):
    monkeypatch.delenv("PARLEY_LLM_BASE_URL", raising=False)
    hosted = host(LLMAgent(id="unconfigured"))
    async with await connect(hosted, "unconfigured") as client:
        task = await client.send("hi")
    assert task.status.state is S.FAILED
    assert task.status.message.text() == ("The model call failed: no model server configured: pass base_url or "
                                          "set PARLEY_LLM_BASE_URL")


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_card_skills_come_from_the_declaration(host, backend, version):
    agent = LLMAgent(id="skilled", name="Skilled", description="Knows things.", backend=backend,
                     skills=[{"id": "facts", "name": "Facts", "description": "Tells facts.", "tags": ["trivia"]}])
    hosted = host(agent)
    async with await connect(hosted, "skilled", version) as client:
        card = client.card
    assert card.name == "Skilled" and card.description == "Knows things."
    assert [(s.id, s.name, s.tags) for s in card.skills] == [("facts", "Facts", ["trivia"])]
    assert not card.capabilities.extensions
