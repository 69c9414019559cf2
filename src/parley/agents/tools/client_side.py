"""Client-side tools: tools the A2A *client* runs, asked for with `input-required`.

The shapes (see docs/client-side-tools.md) travel as A2A data parts:

* the agent asks, in its `input-required` status message, with one data part per call::

      {"toolCall": {"id": "call_1", "name": "get_location", "arguments": {"precision": "city"}}}

* the client answers with a message on the same task, one data part per call::

      {"toolResult": {"id": "call_1", "result": <any JSON>}}
      {"toolResult": {"id": "call_1", "error": "user denied access"}}

The agent declares the extension ``CLIENT_TOOLS_URI`` in its card, with the tools'
names, descriptions and JSON Schemas in the extension's ``params.tools``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from parley.agents.tools.base import Tool, ToolError
from parley.agents.tools.python import function_schema, parse_docstring
from parley.protocol import models as m

CLIENT_TOOLS_URI = "https://parley.dev/extensions/client-tools/v1"
TOOL_CALL = "toolCall"
TOOL_RESULT = "toolResult"
JSON = "application/json"


class ClientTool(Tool):
    """A tool declared by the agent and run by the A2A client."""

    client_side = True

    def __init__(self, name: str, description: str, parameters: dict[str, Any] | None = None) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters or {"type": "object", "properties": {}}

    async def call(self, arguments: dict[str, Any]) -> Any:
        raise ToolError(f"{self.name} is run by the client, not by the agent")

    def declaration(self) -> dict[str, Any]:
        """How the tool is listed in the card's extension params."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __repr__(self) -> str:
        return f"<ClientTool {self.name}>"


def client_tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
                description: str | None = None):
    """Declare a client-side tool from a stub function's signature and docstring.

        @client_tool
        def get_location(precision: Literal["city", "exact"] = "city") -> dict:
            '''The user's location, from the client device.'''
    """

    def make(f: Callable[..., Any]) -> ClientTool:
        summary, docs = parse_docstring(inspect.getdoc(f) or "")
        return ClientTool(name or f.__name__, description or summary or f.__name__, function_schema(f, docs))

    return make(fn) if fn is not None else make


def extension(tools: list[ClientTool], *, required: bool = False) -> m.AgentExtension:
    """The card entry declaring client-side tools."""
    return m.AgentExtension(
        uri=CLIENT_TOOLS_URI,
        description="Client-side tools: the agent asks the client to run a tool with an input-required "
                    "status carrying toolCall data parts; the client answers with toolResult data parts.",
        required=required,
        params={"tools": [t.declaration() for t in tools]},
    )


def tool_call_part(call_id: str, name: str, arguments: dict[str, Any]) -> m.Part:
    """The data part asking the client to run one tool call."""
    return m.Part(data={TOOL_CALL: {"id": call_id, "name": name, "arguments": arguments}}, media_type=JSON)


def tool_result_part(call_id: str, result: Any = None, *, error: str | None = None) -> m.Part:
    """The data part a client sends back with one result (or error)."""
    body: dict[str, Any] = {"id": call_id}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return m.Part(data={TOOL_RESULT: body}, media_type=JSON)


@dataclass(slots=True)
class ToolCallRequest:
    """A `toolCall` found in an agent message."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class ToolResult:
    """A `toolResult` found in a client message."""

    id: str
    result: Any = None
    error: str | None = None


def tool_calls_in(message: m.Message) -> list[ToolCallRequest]:
    """The `toolCall` data parts of a message."""
    out = []
    for part in message.parts:
        body = _payload(part, TOOL_CALL)
        if body is not None and isinstance(body.get("id"), str) and isinstance(body.get("name"), str):
            args = body.get("arguments")
            out.append(ToolCallRequest(body["id"], body["name"], args if isinstance(args, dict) else {}))
    return out


def tool_results_in(message: m.Message) -> list[ToolResult]:
    """The `toolResult` data parts of a message (malformed ones are ignored)."""
    out = []
    for part in message.parts:
        body = _payload(part, TOOL_RESULT)
        if body is None or not isinstance(body.get("id"), str):
            continue
        if "error" in body and body["error"] is not None:
            out.append(ToolResult(body["id"], error=str(body["error"])))
        else:
            out.append(ToolResult(body["id"], result=body.get("result")))
    return out


def is_tool_part(part: m.Part) -> bool:
    """Whether a part is a toolCall or toolResult data part."""
    return _payload(part, TOOL_CALL) is not None or _payload(part, TOOL_RESULT) is not None


def _payload(part: m.Part, key: str) -> dict[str, Any] | None:
    data = part.data if part.content_kind == "data" else None
    if isinstance(data, dict) and isinstance(data.get(key), dict):
        return data[key]
    return None
