"""`@tool`: JSON Schema from type hints and Google-style docstrings; sync, async and failing tools."""

from __future__ import annotations

import enum
import threading
from typing import Literal

import pytest

from parley.agents.llm import ToolCall
from parley.agents.llm.loop import _invoke
from parley.agents.tools import PythonTool, ToolError, tool
from parley.agents.tools.python import parse_docstring


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@tool
def search(query: str, limit: int = 5, exact: bool = False, tags: list[str] | None = None,
           colour: Colour = Colour.RED, mode: Literal["fast", "deep"] = "fast", weights: dict[str, float] = {},  # noqa: B006
           ratio: float | None = None) -> list[str]:
    """Search the catalogue.

    Matches titles and descriptions.

    Args:
        query: What to look for.
        limit (int): At most this many results,
            counted after de-duplication.
        exact: Only exact matches.

    Returns:
        The titles found.
    """
    return [query] * limit


def test_schema_from_hints_and_docstring():
    assert isinstance(search, PythonTool) and search.name == "search"
    assert search.description == "Search the catalogue.\n\nMatches titles and descriptions."
    assert search.parameters == {
        "type": "object",
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 5,
                      "description": "At most this many results, counted after de-duplication."},
            "exact": {"type": "boolean", "default": False, "description": "Only exact matches."},
            "tags": {"type": "array", "items": {"type": "string"}, "default": None},
            "colour": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}, "default": {}},
            "ratio": {"type": "number", "default": None},
        },
    }


def test_decorated_function_is_still_callable_and_can_be_renamed():
    assert search("x", limit=2) == ["x", "x"]

    @tool(name="lookup", description="Looks things up.")
    def find(key: str) -> str:
        return key

    assert (find.name, find.description, find("k")) == ("lookup", "Looks things up.", "k")


def test_docstring_without_args_section():
    summary, args = parse_docstring("Just a summary.")
    assert (summary, args) == ("Just a summary.", {})


async def test_sync_tools_run_in_a_worker_thread_and_async_ones_in_the_loop():
    loop_thread = threading.get_ident()

    @tool
    def where_sync() -> int:
        """Thread id."""
        return threading.get_ident()

    @tool
    async def where_async() -> int:
        """Thread id."""
        return threading.get_ident()

    assert await where_sync.call({}) != loop_thread
    assert await where_async.call({}) == loop_thread


async def test_exceptions_become_errors_the_model_reads():
    @tool
    def divide(a: float, b: float) -> float:
        """a / b."""
        return a / b

    tools = {"divide": divide}
    assert await _invoke(divide, ToolCall("1", "divide", '{"a": 1, "b": 4}'), tools) == ("0.25", True)
    assert await _invoke(divide, ToolCall("2", "divide", '{"a": 1, "b": 0}'), tools) == (
        "error: ZeroDivisionError: division by zero", False)
    assert await _invoke(divide, ToolCall("3", "divide", '{"a": 1}'), tools) == (
        "error: missing required argument(s) b", False)
    assert await _invoke(divide, ToolCall("4", "divide", '{"a": 1,'), tools) == (
        "error: the arguments are not valid JSON (Expecting property name enclosed in double quotes at position 8)",
        False)
    assert await _invoke(divide, ToolCall("5", "divide", "[1, 2]"), tools) == (
        "error: the arguments must be a JSON object", False)


async def test_tool_results_are_rendered_as_json_unless_text():
    @tool
    async def info() -> dict:
        """Info."""
        return {"ok": True, "n": [1, 2]}

    assert await _invoke(info, ToolCall("1", "info", ""), {"info": info}) == ('{"ok": true, "n": [1, 2]}', True)


async def test_tool_error_message_is_passed_as_is():
    @tool
    def guarded() -> str:
        """Refuses."""
        raise ToolError("not allowed today")

    assert await _invoke(guarded, ToolCall("1", "guarded", "{}"), {}) == ("error: not allowed today", False)


def test_duplicate_tool_names_are_refused():
    from parley.agents.llm import LLMAgent

    @tool(name="search")
    def other(q: str) -> str:
        return q

    with pytest.raises(ValueError, match="two tools are named 'search'"):
        LLMAgent(id="dup", tools=[search, other])


def test_plain_functions_are_wrapped_as_tools():
    from parley.agents.llm import LLMAgent

    def shout(text: str) -> str:
        """Capitals."""
        return text.upper()

    agent = LLMAgent(id="plain", tools=[shout])
    assert [t.name for t in agent.tools] == ["shout"]
    assert agent.tools[0].parameters["properties"] == {"text": {"type": "string"}}
