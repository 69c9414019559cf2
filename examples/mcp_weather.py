"""A tiny MCP server (stdio) with one tool, for the README's LLM agent: `python examples/mcp_weather.py`.

It needs the `mcp` package (`pip install 'parley-a2a[mcp]'`). Replace it with any MCP server you run.
"""

from __future__ import annotations

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

server = Server("weather", log_level="WARNING")


@server.tool()
def forecast(city: str, days: int = 1) -> str:
    """The weather forecast for a city, a few days ahead (a fixed answer: this is an example)."""
    return f"{city}: sunny for the next {days} day(s)"


if __name__ == "__main__":
    server.run("stdio")
