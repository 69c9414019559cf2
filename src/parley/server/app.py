"""The ASGI application: routes for every hosted agent, its card and the dashboard.

    POST /                                   JSON-RPC of the default agent
    GET  /.well-known/agent-card.json        card of the default agent (and agent.json)
    POST /a2a/{agent_id}                     JSON-RPC of one agent
    *    /a2a/{agent_id}/...                 HTTP+JSON (REST) of one agent (see server/rest.py)
    *    /... and /{agent_id}/...            HTTP+JSON of the default agent, and the tenant form
    GET  /a2a/{agent_id}/.well-known/agent-card.json
    GET  /a2a/{agent_id}/tasks/{id}/trace    delegation tree of a task (and /tasks/{id}/trace)
    GET  /agents                             the cards of all hosted agents
    GET  /healthz                            liveness
    GET  /                                   dashboard
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from parley.protocol import models as m
from parley.protocol.codec import dumps
from parley.protocol.errors import MethodNotFoundError
from parley.server.cards import CardDocument, build_card, card_v03, card_v1, document
from parley.server.jsonrpc import JsonRpcEndpoint, error_body
from parley.server.rest import RestEndpoint, status_body
from parley.server.service import A2AService
from parley.tasks.engine import TaskEngine
from parley.tasks.memory_store import MemoryTaskStore
from parley.telemetry import hooks as telemetry
from parley.web.dashboard import render_dashboard

if TYPE_CHECKING:
    from parley.app import Parley

log = logging.getLogger("parley.server")
CARD_MAX_AGE = 300
REST_VERBS = ["GET", "POST", "DELETE", "PUT", "PATCH"]
ANONYMOUS = "anonymous"


def principal_of(request: Request) -> str:
    """The caller's identity; without authentication configured, everyone is `anonymous`."""
    return ANONYMOUS


class Server:
    """Holds the engine, the service and cached cards for one `Parley` app."""

    def __init__(self, app: Parley) -> None:
        if not app.agents:
            raise ValueError("a Parley server needs at least one agent")
        self.app = app
        self.settings = app.settings
        self.store = app.store or MemoryTaskStore()
        self.engine = TaskEngine(self.store, app.agents, keepalive=app.settings.keepalive_seconds,
                                 delegator=app.delegator)
        self.engine.child_canceler = lambda link: app.delegator.cancel(link.child_url, link.child_task_id)
        self.service = A2AService(
            self.engine,
            push_notifications=app.settings.card.push_notifications,
            streaming=app.settings.card.streaming,
        )
        self.jsonrpc = JsonRpcEndpoint(self.service, app.settings.max_body_bytes)
        self.rest = RestEndpoint(self.service, app.settings.max_body_bytes)
        self.started_at = time.time()
        self._cards: dict[tuple[str, str, bool], CardDocument] = {}

    # --- helpers -------------------------------------------------------------

    def base_url(self, request: Request) -> str:
        """The public base URL: configured, else as a trusted reverse proxy forwarded it, else as requested."""
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        forwarded = forwarded_base(request, self.settings.forwarded_allow_ips)
        return forwarded or str(request.base_url).rstrip("/")

    def grpc_address(self, request: Request) -> str | None:
        """host:port of the gRPC binding as clients reach it, if it is served."""
        if self.settings.grpc_port is None:
            return None
        host = request.url.hostname or self.settings.grpc_host
        return f"{host}:{self.settings.grpc_port}"

    def agent_url(self, request: Request, agent_id: str, *, root: bool = False) -> str:
        """Where an agent's JSON-RPC endpoint is."""
        base = self.base_url(request)
        return f"{base}/" if root else f"{base}/a2a/{agent_id}"

    def agent_card(self, request: Request, agent_id: str, *, root: bool) -> m.AgentCard:
        """The canonical card of an agent as seen from this request."""
        url = self.agent_url(request, agent_id, root=root)
        return build_card(self.app.agents[agent_id], url, self.settings.card,
                          grpc_address=self.grpc_address(request), tenant=agent_id)

    def card_document(self, request: Request, agent_id: str, *, root: bool) -> CardDocument:
        """The serialised card for this request's version, cached per URL and version."""
        wants_v1 = _wants_v1(request)
        url = self.agent_url(request, agent_id, root=root)
        key = (url, agent_id, wants_v1)
        doc = self._cards.get(key)
        if doc is None:
            card = self.agent_card(request, agent_id, root=root)
            doc = document(card_v1(card) if wants_v1 else card_v03(card), self.started_at)
            self._cards[key] = doc
        return doc

    # --- endpoints -------------------------------------------------------------

    async def rpc_default(self, request: Request) -> Response:
        assert self.app.default_agent is not None
        return await self.jsonrpc.handle(request, self.app.default_agent, principal_of(request))

    async def rpc_agent(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.app.agents:
            return _unknown_agent(agent_id)
        return await self.jsonrpc.handle(request, agent_id, principal_of(request))

    async def rest_agent(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.app.agents:
            return _unknown_agent(agent_id, rest=True)
        return await self.rest.handle(request, agent_id, principal_of(request), request.path_params["rest"])

    async def rest_root(self, request: Request) -> Response:
        """REST paths of the default agent, and the `/{tenant}/...` form where the tenant names an agent."""
        assert self.app.default_agent is not None
        path: str = request.path_params["rest"]
        head, _, tail = path.partition("/")
        if head in self.app.agents and tail:
            return await self.rest.handle(request, head, principal_of(request), tail)
        return await self.rest.handle(request, self.app.default_agent, principal_of(request), path)

    async def card_default(self, request: Request) -> Response:
        assert self.app.default_agent is not None
        return _card_response(request, self.card_document(request, self.app.default_agent, root=True))

    async def card_agent(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.app.agents:
            return JSONResponse({"error": f"no agent {agent_id!r} is hosted here"}, status_code=404)
        return _card_response(request, self.card_document(request, agent_id, root=False))

    async def list_agents(self, request: Request) -> Response:
        cards = []
        for agent_id, agent in self.app.agents.items():
            card = build_card(agent, self.agent_url(request, agent_id), self.settings.card,
                              grpc_address=self.grpc_address(request), tenant=agent_id)
            cards.append(card_v1(card))
        return Response(dumps({"agents": cards, "default": self.app.default_agent}), media_type="application/json")

    async def trace(self, request: Request) -> Response:
        """GET [/a2a/{agent_id}]/tasks/{task_id}/trace: the task's delegation tree (see parley.hub.trace)."""
        from parley.hub.trace import parse_depth, task_trace

        agent_id = request.path_params.get("agent_id") or self.app.default_agent
        assert agent_id is not None
        if agent_id not in self.app.agents:
            return _unknown_agent(agent_id)
        try:
            depth = parse_depth(request.query_params.get("depth"))
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        task_id = request.path_params["task_id"]
        tree = await task_trace(self.store, agent_id, principal_of(request), task_id,
                                self.agent_url(request, agent_id), depth)
        if tree is None:
            return JSONResponse({"error": f"task {task_id!r} not found"}, status_code=404)
        return JSONResponse(tree)

    async def dashboard(self, request: Request) -> Response:
        return HTMLResponse(render_dashboard(self, request))

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "agents": len(self.app.agents), "running_tasks": len(self.engine.runs)})

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        await self.engine.recover()
        grpc_server = None
        if self.settings.grpc_port is not None:
            from parley.server.grpc_server import start_grpc_server  # optional extra: parley[grpc]

            grpc_server = await start_grpc_server(self, self.settings.grpc_host, self.settings.grpc_port)
        try:
            yield
        finally:
            if grpc_server is not None:
                await grpc_server.stop(grace=1.0)
            await self.engine.shutdown()
            telemetry.server_stopped(self)  # telemetry: end the spans of tasks left open
            await self.store.close()


def forwarded_base(request: Request, trusted: list[str]) -> str | None:
    """The base URL a reverse proxy says the client used (`Forwarded`, or `X-Forwarded-Proto/-Host/-Prefix`).

    Only honoured when the direct peer is a trusted proxy (`Settings.forwarded_allow_ips`; "*" trusts all).
    """
    peer = request.client.host if request.client else None
    if "*" not in trusted and peer not in trusted:
        return None
    h = request.headers
    proto = host = None
    if "forwarded" in h:  # RFC 7239: the first (client-side) element counts
        for pair in h["forwarded"].split(",")[0].split(";"):
            name, _, value = pair.strip().partition("=")
            value = value.strip('"')
            if name.lower() == "proto":
                proto = value
            elif name.lower() == "host":
                host = value
    proto = proto or h.get("x-forwarded-proto", "").split(",")[0].strip() or None
    host = host or h.get("x-forwarded-host", "").split(",")[0].strip() or None
    prefix = h.get("x-forwarded-prefix", "").split(",")[0].strip().rstrip("/")
    if not (proto or host or prefix):
        return None
    if prefix and not prefix.startswith("/"):
        prefix = "/" + prefix
    scheme = proto if proto in ("http", "https") else request.url.scheme
    netloc = host or h.get("host") or request.url.netloc
    return f"{scheme}://{netloc}{str(request.base_url.path).rstrip('/')}{prefix}"


def _wants_v1(request: Request) -> bool:
    raw = request.headers.get("a2a-version") or request.query_params.get("A2A-Version") or ""
    head = raw.strip().split(".")[0]
    return head.isdigit() and int(head) >= 1


def _card_response(request: Request, doc: CardDocument) -> Response:
    headers = {
        "ETag": doc.etag,
        "Last-Modified": doc.last_modified,
        "Cache-Control": f"public, max-age={CARD_MAX_AGE}",
        "Vary": "A2A-Version",
    }
    if _not_modified(request, doc):
        return Response(status_code=304, headers=headers)
    return Response(doc.body, media_type="application/json", headers=headers)


def _not_modified(request: Request, doc: CardDocument) -> bool:
    inm = request.headers.get("if-none-match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or doc.etag in tags
    ims = request.headers.get("if-modified-since")
    if ims:
        try:
            return parsedate_to_datetime(ims) >= parsedate_to_datetime(doc.last_modified)
        except (TypeError, ValueError):
            return False
    return False


def _unknown_agent(agent_id: str, *, rest: bool = False) -> Response:
    """404 for an agent id nobody hosts, in the body format of the binding asked for."""
    err = MethodNotFoundError(f"No agent {agent_id!r} is hosted here; GET /agents lists them")
    body = status_body(err) if rest else error_body(None, err, "0.3")
    return Response(body, status_code=404, media_type="application/json")


def create_app(app: Parley) -> Starlette:
    """Build the Starlette application serving every agent of `app`."""
    server = Server(app)
    routes = [
        Route("/", server.rpc_default, methods=["POST"]),
        Route("/", server.dashboard, methods=["GET"]),
        Route("/.well-known/agent-card.json", server.card_default, methods=["GET"]),
        Route("/.well-known/agent.json", server.card_default, methods=["GET"]),
        Route("/a2a/{agent_id}", server.rpc_agent, methods=["POST"]),
        Route("/a2a/{agent_id}/", server.rpc_agent, methods=["POST"]),
        Route("/a2a/{agent_id}/.well-known/agent-card.json", server.card_agent, methods=["GET"]),
        Route("/a2a/{agent_id}/.well-known/agent.json", server.card_agent, methods=["GET"]),
        Route("/agents", server.list_agents, methods=["GET"]),
        Route("/healthz", server.healthz, methods=["GET"]),
        Route("/tasks/{task_id}/trace", server.trace, methods=["GET"]),
        Route("/a2a/{agent_id}/tasks/{task_id}/trace", server.trace, methods=["GET"]),
        Route("/a2a/{agent_id}/{rest:path}", server.rest_agent, methods=REST_VERBS),
        Route("/{rest:path}", server.rest_root, methods=REST_VERBS),
    ]
    starlette = Starlette(routes=routes, lifespan=server.lifespan)
    starlette.state.parley = server
    # telemetry (parley.telemetry): request middleware, engine listener/observer; nothing when it is off
    telemetry.instrument(starlette, server)
    return starlette
