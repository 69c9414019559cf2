"""What a model is told about a tool: its name, description and the JSON Schema of its arguments.

Its own module, below both the tools and the LLM backends (which send it to the model), so that importing
either first never imports the other: `from parley.agents.tools import tool` works as a program's first
line (issue 26: it once failed with a circular import unless `parley.agents.llm` came first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
