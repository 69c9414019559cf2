"""The JSON-RPC front door: a POST to an agent's JSON-RPC URL goes straight to its endpoint.

JSON-RPC POSTs are nearly all of an A2A server's requests. They are routed here, before Starlette's
exception middleware, router and per-route wrapper, which the benchmark profiles showed costing about
a tenth of a unary request's CPU (bench/RESULTS.md). Everything else (cards, REST, the dashboard, health)
goes on through Starlette. It sits inside the telemetry middleware and Starlette's server-error
middleware, so a request it serves is traced, and an unexpected error still becomes a 500.

    POST /                 the default agent
    POST /a2a/{agent_id}   one agent (also with a trailing slash)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

RpcHandler = Callable[[Request, "str | None"], Awaitable[Response]]
AGENT_PREFIX = "/a2a/"


def rpc_agent_of(path: str) -> str | None:
    """The agent a JSON-RPC path names: "" for `/` (the default agent), the id for `/a2a/{id}[/]`, and
    None for any other path."""
    if path == "/":
        return ""
    if not path.startswith(AGENT_PREFIX):
        return None
    agent_id = path[len(AGENT_PREFIX):].removesuffix("/")
    return agent_id if agent_id and "/" not in agent_id else None


def route_path(scope: Scope) -> str:
    """The request's path below the application's mount point (`root_path`), as Starlette routes it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path != root and path[len(root)] == "/":
        return path[len(root):]
    return "" if root and path == root else path


class JsonRpcDoor:
    """ASGI middleware: serves JSON-RPC POSTs with `handle(request, agent_id)` (agent_id None: the default
    agent), passes every other request on to `app`."""

    def __init__(self, app: ASGIApp, handle: RpcHandler) -> None:
        self.app = app
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            agent_id = rpc_agent_of(route_path(scope))
            if agent_id is not None:
                response = await self.handle(Request(scope, receive), agent_id or None)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
