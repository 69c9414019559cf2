"""Tools for LLM agents: Python functions, MCP servers (`parley.agents.tools.mcp`), client-side tools."""

from parley.agents.tools.base import Tool, ToolError, Toolset
from parley.agents.tools.client_side import CLIENT_TOOLS_URI, ClientTool, client_tool
from parley.agents.tools.python import PythonTool, tool

__all__ = ["CLIENT_TOOLS_URI", "ClientTool", "PythonTool", "Tool", "ToolError", "Toolset", "client_tool", "tool"]
