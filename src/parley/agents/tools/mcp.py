"""Tools from MCP servers, through the official `mcp` SDK (``pip install 'parley-a2a[mcp]'``).

    files = MCPTools.stdio("python", ["-m", "my_mcp_server"])
    search = MCPTools.http("http://127.0.0.1:9000/mcp", prefix="search_")
    LLMAgent(..., tools=[files, search])

One connection per server, opened on first use and shared by every run of the
agent. It is owned by a background asyncio task (the SDK's anyio task groups must
be entered and left by one task); tool calls are plain requests on the session
and may come from any task. Works with the SDK's 1.x and 2.x lines.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

from parley.agents.tools.base import Tool, ToolError, Toolset
from parley.agents.tools.stderr_tail import StderrTail


class MCPError(Exception):
    """The MCP server could not be reached or misbehaved."""


def _sdk() -> Any:
    try:
        import mcp
    except ImportError:  # pragma: no cover - depends on the environment
        raise MCPError("MCP tools need the `mcp` package: pip install 'parley-a2a[mcp]'") from None
    return mcp


class MCPTool(Tool):
    """One tool of an MCP server."""

    def __init__(self, server: MCPTools, remote_name: str, name: str, description: str,
                 parameters: dict[str, Any]) -> None:
        self.server = server
        self.remote_name = remote_name
        self.name = name
        self.description = description
        self.parameters = parameters

    async def call(self, arguments: dict[str, Any]) -> Any:
        return await self.server.call(self.remote_name, arguments)

    def __repr__(self) -> str:
        return f"<MCPTool {self.name} of {self.server.label}>"


class MCPTools(Toolset):
    """The tools of one MCP server (stdio subprocess or streamable HTTP)."""

    def __init__(self, connect: Callable[[], AbstractAsyncContextManager[Any]], *, label: str,
                 prefix: str = "", timeout: float = 30.0) -> None:
        """`connect()` opens the SDK transport; prefer :meth:`stdio` and :meth:`http`."""
        self._connect = connect
        self.label = label
        self.prefix = prefix
        self.timeout = timeout
        self._session: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._tools: list[MCPTool] | None = None

    @classmethod
    def stdio(cls, command: str, args: list[str] | None = None, *, env: dict[str, str] | None = None,
              cwd: str | None = None, prefix: str = "", timeout: float = 30.0,
              errlog: TextIO | None = None) -> MCPTools:
        """A server started as a subprocess speaking MCP on stdin/stdout.

        Its stderr goes to `errlog` (default: this process's stderr); when it fails to start, the error
        ends with the last lines it wrote there.
        """
        mcp = _sdk()
        params = mcp.StdioServerParameters(command=command, args=list(args or []), env=env, cwd=cwd)

        @asynccontextmanager
        async def connect() -> AsyncIterator[Any]:
            tail = StderrTail(errlog or sys.stderr)
            try:
                async with mcp.stdio_client(params, errlog=tail.file) as streams:
                    yield streams
            except Exception as exc:
                lines = tail.close()
                if not lines:
                    raise
                said = "\n".join(f"  {line}" for line in lines)
                raise MCPError(f"{_leaf(exc)}; its stderr ended with:\n{said}") from exc
            finally:
                tail.close()

        return cls(connect, label=" ".join([command, *(args or [])]), prefix=prefix, timeout=timeout)

    @classmethod
    def http(cls, url: str, *, headers: dict[str, str] | None = None, prefix: str = "",
             timeout: float = 30.0) -> MCPTools:
        """A server reached over the streamable HTTP transport (usually at ``.../mcp``)."""
        _sdk()
        try:  # mcp 2.x (and late 1.x)
            from mcp.client.streamable_http import streamable_http_client as client
        except ImportError:  # pragma: no cover - mcp 1.x
            from mcp.client.streamable_http import streamablehttp_client as client

            return cls(lambda: client(url, headers=headers), label=url, prefix=prefix, timeout=timeout)

        def connect() -> AbstractAsyncContextManager[Any]:
            if not headers:
                return client(url)
            from mcp.shared._httpx_utils import create_mcp_http_client

            return client(url, http_client=create_mcp_http_client(headers=headers))

        return cls(connect, label=url, prefix=prefix, timeout=timeout)

    # --- connection ------------------------------------------------------------

    async def _ensure(self) -> Any:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._session is not None and self._runner is not None and not self._runner.done():
                return self._session
            self._tools = None
            ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._runner = asyncio.create_task(self._serve(ready, self._stop), name=f"mcp {self.label}")
            try:
                async with asyncio.timeout(self.timeout):
                    self._session = await asyncio.shield(ready)
            except TimeoutError:
                self._runner.cancel()
                raise MCPError(f"the MCP server {self.label} did not start within {self.timeout:g} s") from None
            return self._session

    async def _serve(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Own the transport and session for the connection's lifetime."""
        mcp = _sdk()
        session = None
        try:
            async with AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._connect())
                session = await stack.enter_async_context(mcp.ClientSession(streams[0], streams[1]))
                await session.initialize()
                ready.set_result(session)
                await stop.wait()
        except BaseException as exc:  # reported to whoever waits for the connection
            if not ready.done():
                detail = str(exc) if isinstance(exc, MCPError) else _leaf(exc)
                ready.set_exception(MCPError(f"cannot connect to the MCP server {self.label}: {detail}"))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if session is not None and self._session is session:
                self._session = None

    async def aclose(self) -> None:
        """Close the session and stop the server process (if any)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.shield(runner)
        except Exception:  # noqa: BLE001 - closing never fails: a stuck runner is cancelled
            runner.cancel()

    # --- tools -----------------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        session = await self._ensure()
        if self._tools is None:
            async with asyncio.timeout(self.timeout):
                result = await session.list_tools()
            tools = []
            for t in result.tools:
                wire = t.model_dump(mode="json", by_alias=True, exclude_none=True)
                schema = wire.get("inputSchema") or {"type": "object", "properties": {}}
                tools.append(MCPTool(self, t.name, f"{self.prefix}{t.name}", wire.get("description") or t.name,
                                     schema))
            self._tools = tools
        return list(self._tools)

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call tool `name`; its text content is the result, `isError` results raise ToolError."""
        session = await self._ensure()
        try:
            result = await session.call_tool(name, arguments)
        except Exception as exc:  # noqa: BLE001 - any failure of the call becomes a ToolError
            raise ToolError(f"the MCP server {self.label} refused the call: {_leaf(exc)}") from None
        wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        text = _content_text(wire.get("content") or [])
        if wire.get("isError"):
            raise ToolError(text or "the MCP tool failed")
        if not text and wire.get("structuredContent") is not None:
            return json.dumps(wire["structuredContent"], ensure_ascii=False)
        return text


def _content_text(blocks: list[dict[str, Any]]) -> str:
    out = []
    for block in blocks:
        if block.get("type") == "text":
            out.append(block.get("text", ""))
        elif block.get("type") == "resource" and isinstance(block.get("resource"), dict):
            res = block["resource"]
            out.append(res.get("text") or f"[resource {res.get('uri', '')}]")
        else:
            out.append(f"[{block.get('type', 'content')} {block.get('mimeType', '')}]".replace(" ]", "]"))
    return "\n".join(out)


def _leaf(exc: BaseException) -> str:
    """The innermost readable error of an exception (group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
