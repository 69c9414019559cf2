"""A scripted model: try and test LLM agents without a model server (provider "fake").

Each model call in a turn takes the next step of the script, counted from the turn's user message: a step
that is a string is the answer, streamed a word at a time as a real model streams its tokens; a step that
is a tool call (`{"tool": NAME, "arguments": {...}}`, or a list of them for calls made at once) asks for
tools, and the agent's loop runs them and calls again. Past the script's end the model answers
"You said: <the user's text>". A step that answers ends the turn, so a script that uses a tool puts the call
first: `[{"tool": "weather", "arguments": {"city": "Paris"}}, "It is sunny in Paris."]`.

From a config file: `provider = "fake"` and `script = [...]` on an llm agent; for the built-in assistant,
`PARLEY_LLM_PROVIDER=fake`. Nothing is sent anywhere; nothing but the standard library is needed.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from parley.agents.llm.backend import ChatRequest, Finish, LLMBackend, StreamEvent, TextDelta, ToolCall, Usage

Step = str | dict[str, Any] | list[dict[str, Any]]
_WORD = re.compile(r"\S+\s*|\s+")


class FakeBackend(LLMBackend):
    """The scripted model (see the module docstring); `delay`: seconds between streamed words (a model's pace:
    10 ms by default, so that a client sees the answer arrive in pieces)."""

    provider = "fake"

    def __init__(self, script: Sequence[Step] | None = None, *, model: str | None = "fake", delay: float = 0.01,
                 **_options: Any) -> None:
        self.script = [_checked(step, i) for i, step in enumerate(script or [])]
        self._model = model or "fake"
        self.delay = delay

    @property
    def model(self) -> str | None:
        return self._model

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        step_index = _calls_this_turn(request.messages)
        step = self.script[step_index] if step_index < len(self.script) else f"You said: {_user_text(request)}"
        if isinstance(step, str):
            words = _WORD.findall(step) or [""]
            for i, word in enumerate(words):
                if i:
                    await asyncio.sleep(self.delay)  # the pace of a model's tokens: the workload, not a wait
                yield TextDelta(word)
            yield Finish("stop", _usage(request, len(words)))
            return
        calls = [step] if isinstance(step, dict) else step
        tool_calls = [ToolCall(id=f"fake_{step_index}_{i}", name=c["tool"], arguments=json.dumps(c.get("arguments", {})))
                      for i, c in enumerate(calls)]
        yield Finish("tool_calls", _usage(request, len(tool_calls)), tool_calls)


def _checked(step: Any, index: int) -> Step:
    """A script step as given, or ValueError naming what is wrong with it."""
    if isinstance(step, str):
        return step
    calls = step if isinstance(step, list) else [step]
    if not calls or not all(isinstance(c, dict) and isinstance(c.get("tool"), str) and c["tool"] for c in calls):
        raise ValueError(f"fake model script[{index}]: a step is an answer (a string) or a tool call "
                         '({"tool": NAME, "arguments": {...}}, or a list of them)')
    for c in calls:
        if not isinstance(c.get("arguments", {}), dict) or set(c) - {"tool", "arguments"}:
            raise ValueError(f"fake model script[{index}]: a tool call has `tool` and an `arguments` table only")
    return step


def _calls_this_turn(messages: list[dict[str, Any]]) -> int:
    """How many model answers the turn has had: assistant messages after the last user message."""
    count = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        count += message.get("role") == "assistant"
    return count


def _user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _usage(request: ChatRequest, completion: int) -> Usage:
    prompt = sum(len(str(m.get("content") or "").split()) for m in request.messages)
    return Usage(prompt, completion, prompt + completion)
