"""The agent loop's conversation state, and its checkpoint (a JSON-ready dict).

The conversation is a list of OpenAI-style chat messages without the system prompt
(added at call time, so a changed prompt applies to resumed tasks). It is rebuilt
from A2A messages (a task's history) or restored from a checkpoint:

    {"version": 1,
     "messages": [{"role": "user", "content": "..."}, {"role": "assistant", ...}, ...],
     "iterations": 2,            # model calls made so far in this task
     "toolCalls": 3,             # tool calls the model asked for so far
     "usage": {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
     "seenMessageIds": ["..."]}  # A2A user messages already folded in

Tool calls of the last assistant message that have no ``tool`` answer yet are the
ones waiting for the A2A client (client-side tools).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from parley.agents.llm.backend import ToolCall, Usage
from parley.agents.tools.base import render_error, render_result
from parley.agents.tools.client_side import is_tool_part, tool_calls_in, tool_results_in
from parley.protocol import models as m

CHECKPOINT_VERSION = 1
NO_RESULT = "the client answered without a result for this tool call"


class CheckpointError(ValueError):
    """A checkpoint dict that cannot be restored."""


@dataclass
class Answer:
    """A pending tool call the latest user message answered (or failed to)."""

    call: ToolCall
    ok: bool


@dataclass
class Conversation:
    """Messages plus the counters the loop's limits need."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    iterations: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    seen: list[str] = field(default_factory=list)

    # --- checkpoints -----------------------------------------------------------

    def to_checkpoint(self) -> dict[str, Any]:
        """The state as a JSON-serialisable dict (see the module docstring)."""
        return {
            "version": CHECKPOINT_VERSION,
            "messages": json.loads(json.dumps(self.messages)),
            "iterations": self.iterations,
            "toolCalls": self.tool_calls,
            "usage": self.usage.to_dict(),
            "seenMessageIds": list(self.seen),
        }

    @classmethod
    def from_checkpoint(cls, data: dict[str, Any]) -> Conversation:
        """Rebuild the state a checkpoint describes."""
        if not isinstance(data, dict) or data.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(f"not a version {CHECKPOINT_VERSION} agent-loop checkpoint")
        messages = data.get("messages")
        if not isinstance(messages, list) or not all(isinstance(x, dict) and "role" in x for x in messages):
            raise CheckpointError("checkpoint `messages` must be a list of chat messages")
        return cls(
            messages=[dict(x) for x in messages],
            iterations=int(data.get("iterations", 0)),
            tool_calls=int(data.get("toolCalls", 0)),
            usage=Usage.from_dict(data.get("usage")),
            seen=[str(x) for x in data.get("seenMessageIds", [])],
        )

    @classmethod
    def from_history(cls, history: list[m.Message]) -> Conversation:
        """Rebuild the conversation from a task's A2A messages (user and agent)."""
        conv = cls()
        for msg in history:
            if msg.role is m.Role.USER:
                conv.add_user(msg)
            else:
                conv.add_agent(msg)
        return conv

    # --- adding messages ---------------------------------------------------------

    def pending(self) -> list[ToolCall]:
        """Tool calls of the last assistant message still waiting for an answer."""
        answered: set[str] = set()
        for msg in reversed(self.messages):
            if msg["role"] == "tool":
                answered.add(msg.get("tool_call_id", ""))
            elif msg["role"] == "assistant":
                return [
                    ToolCall(tc["id"], tc["function"]["name"], tc["function"].get("arguments", ""))
                    for tc in msg.get("tool_calls") or []
                    if tc["id"] not in answered
                ]
            else:
                return []
        return []

    def add_user(self, msg: m.Message) -> list[Answer]:
        """Fold in a user message: answers to pending tool calls first, then its other content."""
        if msg.message_id in self.seen:
            return []
        self.seen.append(msg.message_id)
        results = {r.id: r for r in tool_results_in(msg)}
        answers = []
        for call in self.pending():
            r = results.get(call.id)
            if r is None:
                self.add_tool_result(call.id, render_error(NO_RESULT))
            elif r.error is not None:
                self.add_tool_result(call.id, render_error(r.error))
            else:
                self.add_tool_result(call.id, render_result(r.result))
            answers.append(Answer(call, ok=r is not None and r.error is None))
        text = content_text([p for p in msg.parts if not is_tool_part(p)])
        if text:
            self.messages.append({"role": "user", "content": text})
        return answers

    def add_agent(self, msg: m.Message) -> None:
        """Fold in an agent message from history (its toolCall parts become tool calls)."""
        calls = tool_calls_in(msg)
        if calls:
            self.add_assistant(None, [ToolCall(c.id, c.name, json.dumps(c.arguments)) for c in calls])
            return
        text = content_text(msg.parts)
        if text:
            self.add_assistant(text, [])

    def add_assistant(self, text: str | None, calls: list[ToolCall]) -> None:
        """The model's answer: text, tool calls, or both."""
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = [c.to_message() for c in calls]
        self.messages.append(msg)

    def add_tool_result(self, call_id: str, content: str) -> None:
        """What one tool call returned, as the model will read it."""
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


def content_text(parts: list[m.Part]) -> str:
    """A2A parts as text for the model: text as is, data as JSON, files as a short note."""
    out = []
    for p in parts:
        kind = p.content_kind
        if kind == "text":
            out.append(p.text or "")
        elif kind == "data":
            out.append(json.dumps(p.data, ensure_ascii=False))
        elif kind == "url":
            out.append(f"[file {p.filename or ''} {p.media_type or ''} at {p.url}]".replace("  ", " "))
        else:
            out.append(f"[file {p.filename or ''} {p.media_type or ''}, {len(p.raw or b'')} bytes]".replace("  ", " "))
    return "\n".join(x for x in out if x)
