"""A tiny MCP server for the runtime tests, run over stdio or streamable HTTP.

    python mcp_server.py stdio
    python mcp_server.py http PORT

Works with the `mcp` SDK 1.x (FastMCP) and 2.x (MCPServer).
"""

from __future__ import annotations

import sys

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.server.fastmcp.exceptions import ToolError

server = Server("parley-test-tools", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper()


@server.tool()
def explode(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(reason)


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[1] == "http":
        port = int(argv[2])
        try:
            server.run("streamable-http", host="127.0.0.1", port=port)
        except TypeError:  # mcp 1.x takes host and port as settings
            server.settings.host = "127.0.0.1"
            server.settings.port = port
            server.run("streamable-http")
    else:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv)
