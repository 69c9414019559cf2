"""The LLM backend contract: a streaming chat call with tools, and a registry of providers.

A backend turns a :class:`ChatRequest` into a stream of :class:`TextDelta`,
:class:`ToolCallDelta` and, last, one :class:`Finish` carrying the finish reason,
the token usage and the complete tool calls. Conversations are lists of
OpenAI-style chat messages (``{"role": "user" | "assistant" | "tool" | "system", ...}``),
the lingua franca most providers speak or translate from.

Providers are plugins: ``register_backend("name", factory)`` in code, or an entry
point in the ``parley.llm_backends`` group whose object is the factory (usually the
backend class). ``create_backend("openai", base_url=...)`` builds one.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from parley.agents.tools.spec import ToolSpec  # re-exported: part of the backend contract


class LLMError(Exception):
    """A model call failed; the message is safe to show to an A2A client."""


@dataclass(slots=True)
class ChatRequest:
    """One model call: the conversation, the tools on offer, and provider options."""

    messages: list[dict[str, Any]]
    tools: list[ToolSpec] = field(default_factory=list)
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Usage:
    """Tokens spent by one call (or added up over several)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {"promptTokens": self.prompt_tokens, "completionTokens": self.completion_tokens,
                "totalTokens": self.total_tokens}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        data = data or {}
        return cls(int(data.get("promptTokens", 0)), int(data.get("completionTokens", 0)),
                   int(data.get("totalTokens", 0)))


@dataclass(slots=True)
class ToolCall:
    """A complete tool call requested by the model; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str = ""

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ValueError (not JSON) or TypeError (not an object) with a readable reason."""
        if not self.arguments.strip():
            return {}
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
        if not isinstance(value, dict):
            raise TypeError("the arguments must be a JSON object")
        return value

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-style `tool_calls` entry of an assistant message."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(slots=True)
class TextDelta:
    """A piece of the model's answer text."""

    text: str


@dataclass(slots=True)
class ToolCallDelta:
    """A fragment of a streamed tool call; fragments with the same `index` belong together."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class Finish:
    """The end of a call: why it stopped, what it cost, and the tool calls it asked for."""

    reason: str | None = None
    usage: Usage | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


StreamEvent = TextDelta | ToolCallDelta | Finish


class ToolCallAccumulator:
    """Joins streamed :class:`ToolCallDelta` fragments into complete :class:`ToolCall` s, by index."""

    def __init__(self) -> None:
        self._calls: dict[int, ToolCall] = {}

    def add(self, delta: ToolCallDelta) -> None:
        call = self._calls.setdefault(delta.index, ToolCall(id="", name=""))
        if delta.id:
            call.id = delta.id
        if delta.name:
            call.name += delta.name if call.name != delta.name else ""
        call.arguments += delta.arguments

    def calls(self) -> list[ToolCall]:
        """The calls in index order; a call the model sent without an id gets one."""
        out = []
        for index in sorted(self._calls):
            call = self._calls[index]
            out.append(ToolCall(id=call.id or f"call_{index}", name=call.name, arguments=call.arguments))
        return out


class LLMBackend(ABC):
    """A chat model that streams its answer and may ask for tool calls."""

    provider: str = ""

    @abstractmethod
    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Yield text and tool-call deltas, then exactly one :class:`Finish`.

        Raise :class:`LLMError` for failures the caller should report. Closing the
        iterator (or cancelling the task consuming it) must abort the call promptly.
        """

    @property
    def model(self) -> str | None:
        """The default model name, if the backend has one."""
        return None

    async def check(self) -> str | None:
        """Why the backend cannot be used now (one line: its server is out of reach), or None. Called when the
        server starts, and again in the background while it says something."""
        return None

    async def aclose(self) -> None:
        """Release connections (optional)."""
