"""What the agent loop needs from a tool: a name, a description, a JSON Schema, and a call.

Python functions (:mod:`.python`), MCP servers (:mod:`.mcp`) and client-side tools
(:mod:`.client_side`) all become :class:`Tool` s. A :class:`Toolset` provides tools
that are only known at run time (an MCP server lists them).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from parley.agents.tools.spec import ToolSpec


class ToolError(Exception):
    """A tool failed in a way the model should be told about (it sees ``error: <message>``)."""


class Tool(ABC):
    """A callable the model can ask for."""

    name: str
    description: str
    parameters: dict[str, Any]
    #: True for tools the A2A client runs (the loop asks for them with `input-required`).
    client_side: bool = False

    def spec(self) -> ToolSpec:
        """The tool as offered to the model."""
        return ToolSpec(self.name, self.description, self.parameters)

    @abstractmethod
    async def call(self, arguments: dict[str, Any]) -> Any:
        """Run the tool; raise :class:`ToolError` (or any exception) to report a failure to the model."""


class Toolset(ABC):
    """A source of tools discovered at run time."""

    @abstractmethod
    async def list_tools(self) -> list[Tool]:
        """The tools available now."""

    async def aclose(self) -> None:
        """Release connections or processes (optional)."""


def render_result(value: Any) -> str:
    """A tool's return value as the text the model reads (JSON unless it is already a string)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def render_error(exc: BaseException | str) -> str:
    """A failure as the model reads it: ``error: <what went wrong>``."""
    if isinstance(exc, str):
        return f"error: {exc}"
    text = str(exc)
    if isinstance(exc, ToolError):
        return f"error: {text}" if text else "error: the tool failed"
    return f"error: {type(exc).__name__}: {text}" if text else f"error: {type(exc).__name__}"
