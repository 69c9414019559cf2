"""The OpenAI-compatible backend on its own: wire parsing, retries, configuration, the registry."""

from __future__ import annotations

import json
from email.utils import formatdate
from time import time

import pytest
from fake_llm import error, text, tool_calls

from parley.agents.llm import (
    ChatRequest,
    Finish,
    LLMBackend,
    LLMError,
    OpenAICompatBackend,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    create_backend,
    register_backend,
)
from parley.agents.llm.openai_compat import parse_retry_after, parse_stream


async def lines(*items: str):
    for item in items:
        yield item


def sse(*chunks: dict | str) -> list[str]:
    out = []
    for c in chunks:
        out += [f"data: {c if isinstance(c, str) else json.dumps(c)}", ""]
    return out


async def collect(it) -> list:
    return [x async for x in it]


async def test_parse_stream_joins_interleaved_tool_call_fragments_by_index():
    def tc(index, **kw):
        fn = {k: v for k, v in kw.items() if k in ("name", "arguments")}
        d = {"index": index, "function": fn}
        if "id" in kw:
            d["id"] = kw["id"]
        return {"choices": [{"index": 0, "delta": {"tool_calls": [d]}, "finish_reason": None}]}

    stream = sse(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hm"}}]},
        tc(0, id="a", name="first", arguments='{"x":'),
        tc(1, id="b", name="second", arguments=""),
        tc(0, arguments=" 1}"),
        tc(1, arguments='{"y": [1, 2]}'),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}},
        "[DONE]",
        ": trailing comment after done is never read",
    )
    events = await collect(parse_stream(lines(": keep-alive", "", *stream)))
    assert events[0] == TextDelta("Hm")
    assert sum(isinstance(e, ToolCallDelta) for e in events) == 4
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "tool_calls"
    assert finish.usage.total_tokens == 10 and finish.usage.prompt_tokens == 7
    assert [(c.id, c.name, c.parsed_arguments()) for c in finish.tool_calls] == [
        ("a", "first", {"x": 1}), ("b", "second", {"y": [1, 2]})]


async def test_parse_stream_reports_errors_inside_the_stream():
    with pytest.raises(LLMError, match="reported an error: context length exceeded"):
        await collect(parse_stream(lines(*sse({"error": {"message": "context length exceeded"}}))))
    with pytest.raises(LLMError, match="not JSON"):
        await collect(parse_stream(lines("data: {oops", "")))


async def test_a_stream_without_done_still_finishes():
    events = await collect(parse_stream(lines(
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}))))
    assert events == [TextDelta("hi"), Finish(reason="stop")]


def test_retry_after_values():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert 50 <= parse_retry_after(formatdate(time() + 60, usegmt=True)) <= 61


async def test_backend_streams_from_the_fake_server_and_sends_tools(fake_llm, backend):
    fake_llm.script(tool_calls(("c1", "f", {"q": "a b c"}), say="ok"))
    spec = ToolSpec("f", "A function.", {"type": "object", "properties": {"q": {"type": "string"}}})
    events = await collect(backend.stream(ChatRequest(messages=[{"role": "user", "content": "x"}], tools=[spec],
                                                      options={"temperature": 0})))
    assert events[0] == TextDelta("ok")
    finish = events[-1]
    assert [(c.id, c.name, c.parsed_arguments()) for c in finish.tool_calls] == [("c1", "f", {"q": "a b c"})]
    body = fake_llm.bodies[0]
    assert body["temperature"] == 0 and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [{"type": "function", "function": {"name": "f", "description": "A function.",
                                                               "parameters": spec.parameters}}]


async def test_retry_after_is_honoured_then_the_call_succeeds(fake_llm, backend):
    fake_llm.script(error(429, retry_after="0"), error(502), text("fine"))
    events = await collect(backend.stream(ChatRequest(messages=[])))
    assert events[0] == TextDelta("fine")
    assert len(fake_llm.requests) == 3


async def test_connection_errors_are_retried_then_reported(fake_llm):
    fake_llm.stop()  # nothing listens any more
    dead = OpenAICompatBackend(base_url=fake_llm.base_url, model="m", max_attempts=2, backoff=0.001, env={})
    with pytest.raises(LLMError, match=r"cannot reach the model server .* \(after 2 attempts\)"):
        await collect(dead.stream(ChatRequest(messages=[])))


def test_configuration_from_the_environment():
    env = {"PARLEY_LLM_BASE_URL": "http://llm.local/v1/", "PARLEY_LLM_API_KEY": "k", "PARLEY_LLM_MODEL": "m1"}
    b = OpenAICompatBackend(env=env)
    assert (b.url, b.api_key, b.model) == ("http://llm.local/v1/chat/completions", "k", "m1")
    b2 = OpenAICompatBackend(env=env, model="m2", base_url="http://other/v1")
    assert (b2.url, b2.model) == ("http://other/v1/chat/completions", "m2")
    with pytest.raises(LLMError, match="PARLEY_LLM_BASE_URL"):
        OpenAICompatBackend(env={})
    with pytest.raises(LLMError, match="PARLEY_LLM_MODEL"):
        OpenAICompatBackend(base_url="http://x", env={}).body(ChatRequest(messages=[]))


def test_registry_builds_builtin_and_plugged_in_backends():
    assert isinstance(create_backend("openai", base_url="http://x", env={}), OpenAICompatBackend)

    class Canned(LLMBackend):
        provider = "canned"

        def __init__(self, answer: str) -> None:
            self.answer = answer

        async def stream(self, request):
            yield TextDelta(self.answer)
            yield Finish("stop")

    register_backend("canned", Canned)
    assert create_backend("canned", answer="hi").answer == "hi"
    with pytest.raises(LookupError, match="no LLM backend named 'nope'"):
        create_backend("nope")


def test_backoff_waits_for_retry_after_within_a_cap():
    b = OpenAICompatBackend(base_url="http://x", backoff=0.5, max_backoff=4, env={})
    assert b._delay(1, "7") == 7.0
    assert b._delay(1, "3600") == 60.0  # a server asking for an hour does not hold the task that long
    assert 0.25 <= b._delay(1, None) <= 0.5
    assert 2.0 <= b._delay(4, None) <= 4.0
    assert 2.0 <= b._delay(10, None) <= 4.0
