"""The ASGI application over a runtime: routes for every hosted agent, its card and the dashboard.

    POST /                                   JSON-RPC of the default agent
    GET  /.well-known/agent-card.json        card of the default agent (and agent.json)
    POST /a2a/{agent_id}                     JSON-RPC of one agent
    *    /a2a/{agent_id}/...                 HTTP+JSON (REST) of one agent: 1.0, and 0.3 under `v1/`
    *    /... and /{agent_id}/...            HTTP+JSON of the default agent, and the tenant form
    GET  /a2a/{agent_id}/.well-known/agent-card.json
    GET  /a2a/{agent_id}/tasks/{id}/trace    delegation tree of a task (and /tasks/{id}/trace)
    GET  /a2a/{agent_id}/tasks/{id}/pushLog  push deliveries of a task (and /tasks/{id}/pushLog)
    GET  /.well-known/jwks.json              the keys push notifications are signed with
    GET  /.well-known/agent-card-jwks.json   the keys the cards are signed with (A2A 1.0 §8.4)
    GET  /.well-known/ai-catalog.json        every hosted agent's card (AI Catalog)
    GET  /agents                             the cards of all hosted agents
    GET  /healthz                            liveness
    GET  /readyz                             readiness (store and bus reachable; 503 says which part is not)
    *    /admin/keys[/{id}], /admin/tasks/{id}, /admin/prune  the admin API (admin scope; see parley.server.admin)
    GET  /, /ui/...                          the web dashboard (parley.web.dashboard; [server.dashboard] path)

Every request first passes parley.server.edge (open server: loopback Host and Origin only; secured server:
authenticated from its headers, else 401 before any route or body). Every A2A request goes through the
runtime's request pipeline; this module only
routes, and turns URLs into agent ids and agent URLs. The JSON-RPC POSTs are routed
by parley.server.rpc_door, ahead of Starlette's router.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from parley.protocol.codec import dumps
from parley.protocol.errors import A2AError, InvalidParamsError, MethodNotFoundError, TaskNotFoundError
from parley.protocol.operations import Operation
from parley.runtime import Runtime
from parley.server.admin import AdminApi
from parley.server.ai_catalog import CATALOG_MEDIA_TYPE, CATALOG_PATH, catalog, link_header
from parley.server.card_signing import JWKS_PATH
from parley.server.cards import CardDocument, card_v1
from parley.server.edge import EdgeGuard, clip
from parley.server.http import credentials_of
from parley.server.jsonrpc import JsonRpcEndpoint, error_body
from parley.server.pipeline import AgentUrl, Call
from parley.server.rest import RestEndpoint
from parley.server.rest_base import is_v03_path, status_body
from parley.server.rest_v03 import RestV03Endpoint
from parley.server.rpc_door import JsonRpcDoor, route_path, rpc_agent_of
from parley.server.service import PushLogRequest, TraceRequest
from parley.server.urls import RequestAgentUrl, agent_url, base_url, names_this_server
from parley.telemetry import hooks as telemetry
from parley.web.dashboard import Dashboard

log = logging.getLogger("parley.server")
CARD_MAX_AGE = 300
REST_VERBS = ["GET", "POST", "DELETE", "PUT", "PATCH"]
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
PUBLIC_PATHS = frozenset({*CARD_PATHS, "/healthz", "/readyz", "/.well-known/jwks.json", JWKS_PATH, CATALOG_PATH})


class HttpServer:
    """The HTTP face of one runtime: JSON-RPC, HTTP+JSON, cards, traces, health and the dashboard."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        limit, keepalive = runtime.settings.max_body_bytes, runtime.settings.keepalive_seconds
        self.jsonrpc = JsonRpcEndpoint(runtime.pipeline, limit, keepalive)
        self.rest = RestEndpoint(runtime.pipeline, limit, keepalive)
        self.rest_v03 = RestV03Endpoint(runtime.pipeline, limit, keepalive)
        self.dashboard = Dashboard(runtime, self.jsonrpc) if runtime.settings.dashboard.enabled else None
        self._readiness_logged: dict[str, str] = {}  # the readiness problems last logged

    def agent_url(self, request: Request, agent_id: str, *, root: bool = False) -> str:
        """Where an agent's endpoint is, as the client of `request` reaches it."""
        return agent_url(base_url(request, self.settings), agent_id, root=root)

    # --- A2A -------------------------------------------------------------------------------------

    def _no_agent(self, agent_id: str) -> MethodNotFoundError:
        """An agent id nobody hosts: the error names the agents that are (at most 20). On a secured server only
        an authenticated caller gets this far (parley.server.edge)."""
        hosted = list(self.runtime.agents)
        names = ", ".join(hosted[:20]) + (f" and {len(hosted) - 20} more" if len(hosted) > 20 else "")
        return MethodNotFoundError(f"No agent {clip(agent_id)!r} is hosted here (the agents are: {names}); "
                                   "GET /agents lists them")

    def _unknown_agent(self, agent_id: str) -> Response:
        """404 for an agent id nobody hosts, as a JSON-RPC error body (the JSON-RPC door's answer)."""
        return Response(error_body(None, self._no_agent(agent_id), "0.3"), status_code=404,
                        media_type="application/json")

    def refuse(self, request: Request, error: A2AError) -> Response:
        """`error` (a refusal at the edge: parley.server.edge) in the error shape of the binding the request's
        path belongs to: a JSON-RPC error for the JSON-RPC door's POSTs, else google.rpc.Status (HTTP+JSON's)."""
        path = route_path(request.scope)
        if request.method == "POST" and rpc_agent_of(path) is not None:
            version = "1.0" if _wants_v1(request) else "0.3"
            return Response(error_body(None, error, version), status_code=error.http_status,
                            media_type="application/json", headers=error.headers)
        if _parley_route(path):
            return _status_response(error)
        below = path.removeprefix("/a2a/").partition("/")[2] if path.startswith("/a2a/") else path.lstrip("/")
        return self._rest_endpoint(below).error_response(request, error)

    def is_public(self, method: str, path: str) -> bool:
        """Whether (method, path) is answered without credentials on a secured server: the public cards of
        hosted agents (spec 8.2), health, readiness, the push-signing keys and the dashboard (its own login)."""
        if method in ("GET", "HEAD"):
            if path in PUBLIC_PATHS:
                return True
            head, _, card = path.removeprefix("/a2a/").partition("/")
            if path.startswith("/a2a/") and f"/{card}" in CARD_PATHS and head in self.runtime.agents:
                return True
        if self.dashboard is None:
            return False
        dashboard = self.settings.dashboard
        home = path == dashboard.path and method in ("GET", "HEAD")  # POST / is the default agent's JSON-RPC
        return home or path == dashboard.root or path.startswith(dashboard.root + "/")

    async def rpc(self, request: Request, agent_id: str | None) -> Response:
        """A JSON-RPC POST to an agent (None: the default agent, at `/`); routed by parley.server.rpc_door."""
        if agent_id is None:
            default = self.runtime.default_agent
            url = RequestAgentUrl(request, self.settings, default, root=True)
            return await self.jsonrpc.handle(request, default, url)
        if agent_id not in self.runtime.agents:
            return self._unknown_agent(agent_id)
        return await self.jsonrpc.handle(request, agent_id, RequestAgentUrl(request, self.settings, agent_id))

    async def rest_agent(self, request: Request) -> Response:
        agent_id, path = request.path_params["agent_id"], request.path_params["rest"]
        if agent_id not in self.runtime.agents:  # answered in the binding's own error body and media type
            return self._rest_endpoint(path).error_response(request, self._no_agent(agent_id))
        return await self._rest(request, agent_id, path, RequestAgentUrl(request, self.settings, agent_id))

    async def rest_root(self, request: Request) -> Response:
        """REST paths of the default agent, and the `/{tenant}/...` form where the tenant names an agent."""
        path: str = request.path_params["rest"]
        head, _, tail = path.partition("/")
        if head in self.runtime.agents and tail:
            return await self._rest(request, head, tail, RequestAgentUrl(request, self.settings, head))
        agent_id = self.runtime.default_agent
        return await self._rest(request, agent_id, path, RequestAgentUrl(request, self.settings, agent_id, root=True))

    def _rest_endpoint(self, path: str) -> RestEndpoint:
        """The HTTP+JSON binding a path below an agent's base URL belongs to: 0.3 under `v1/`, else 1.0."""
        return self.rest_v03 if is_v03_path(path) else self.rest

    async def _rest(self, request: Request, agent_id: str, path: str, url: AgentUrl) -> Response:
        return await self._rest_endpoint(path).serve(request, agent_id, path, url)

    # --- cards -----------------------------------------------------------------------------------

    async def card_default(self, request: Request) -> Response:
        agent_id = self.runtime.default_agent
        return await self._card(request, agent_id, self.agent_url(request, agent_id, root=True))

    async def card_agent(self, request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.runtime.agents:  # google.rpc.Status, as HTTP+JSON answers
            return _status_response(self._no_agent(agent_id))
        return await self._card(request, agent_id, self.agent_url(request, agent_id))

    async def _card(self, request: Request, agent_id: str, url: str) -> Response:
        security = await self.runtime.security.card_security()
        base = base_url(request, self.settings)
        signing_key = await self.runtime.card_signer.active() if names_this_server(request, self.settings) else None
        doc = self.runtime.cards.document(agent_id, url, v1=_wants_v1(request), security=security,
                                          v1_1=_wants_v1_1(request),
                                          signing_key=signing_key,
                                          jku=base + JWKS_PATH)
        return _card_response(request, doc, link=link_header(base))

    async def card_jwks(self, request: Request) -> Response:
        """GET /.well-known/agent-card-jwks.json: the public keys the cards are signed with (their `jku`)."""
        keys = await self.runtime.card_signer.jwks()
        return JSONResponse(keys, headers={"Cache-Control": "public, max-age=300"})

    async def ai_catalog(self, request: Request) -> Response:
        """GET /.well-known/ai-catalog.json: an entry per hosted agent pointing at its public card."""
        base = base_url(request, self.settings)
        cards = {agent_id: await self.runtime.public_card(agent_id, self.agent_url(request, agent_id))
                 for agent_id in self.runtime.agents}
        body = catalog(base, self.runtime.default_agent, cards, self.runtime.cards.modified_at)
        return Response(dumps(body), media_type=CATALOG_MEDIA_TYPE,
                        headers={"Cache-Control": f"public, max-age={CARD_MAX_AGE}"})

    async def list_agents(self, request: Request) -> Response:
        signed = names_this_server(request, self.settings)
        cards = [card_v1(await self.runtime.public_card(agent_id, self.agent_url(request, agent_id), signed=signed))
                 for agent_id in self.runtime.agents]
        body = {"agents": cards, "default": self.runtime.default_agent,
                "unavailable": self.runtime.unavailable_agents()}  # agent id -> why it cannot work now
        return Response(dumps(body), media_type="application/json")

    # --- traces, health, dashboard ----------------------------------------------------------------

    async def trace(self, request: Request) -> Response:
        """GET [/a2a/{agent_id}]/tasks/{task_id}/trace: the task's delegation tree (see parley.hub.trace)."""
        from parley.hub.trace import parse_depth

        try:
            depth = parse_depth(request.query_params.get("depth"))
        except ValueError as exc:
            return _status_response(InvalidParamsError(f"Invalid params: {exc}"))
        return await self._task_extension(request, Operation.TRACE,
                                          lambda task_id: TraceRequest(task_id, depth))

    async def push_log(self, request: Request) -> Response:
        """GET [/a2a/{agent_id}]/tasks/{task_id}/pushLog: the task's push deliveries (see parley.push.log)."""
        return await self._task_extension(request, Operation.PUSH_LOG, PushLogRequest)

    async def _task_extension(self, request: Request, op: Operation, make: Any) -> Response:
        """One of Parley's per-task JSON endpoints, through the request pipeline (owner checks, limits). Errors
        are google.rpc.Status bodies, as the HTTP+JSON binding answers, quoting at most 64 characters of an id."""
        agent_id = request.path_params.get("agent_id") or self.runtime.default_agent
        if agent_id not in self.runtime.agents:
            return _status_response(self._no_agent(agent_id))
        task_id = request.path_params["task_id"]

        async def decode() -> Call:
            return Call(agent_id, op, make(task_id), "1.0", agent_url=RequestAgentUrl(request, self.settings, agent_id))

        try:
            outcome = await self.runtime.pipeline.serve("HTTP", credentials_of(request), decode, agent_id)
        except TaskNotFoundError:
            return _status_response(TaskNotFoundError(f"Task not found: {clip(task_id)!r}"))
        except A2AError as exc:  # its headers too: WWW-Authenticate on a 401, Retry-After on a 429
            return _status_response(exc)
        return JSONResponse(outcome.result, headers=outcome.headers)

    async def jwks(self, request: Request) -> Response:
        """GET /.well-known/jwks.json: the public keys push notifications are signed with."""
        push = self.runtime.push
        keys = await push.signer.jwks() if push is not None else {"keys": []}
        return JSONResponse(keys, headers={"Cache-Control": "public, max-age=300"})

    async def readyz(self, request: Request) -> Response:
        """GET /readyz: 200 when this replica can take work (store and bus reachable), else 503 saying which part
        is not. It is public: it names parts ("unavailable"), never their errors, which go to the log (once per
        change); the unavailable agents are named, why is in GET /agents (authenticated) and the log."""
        checks = await self.runtime.readiness()
        ready = all(v == "ok" for v in checks.values())
        problems = {name: why for name, why in checks.items() if why != "ok"}
        if problems != self._readiness_logged:
            self._readiness_logged = problems
            if problems:
                log.warning("not ready: %s", "; ".join(f"{name}: {why}" for name, why in problems.items()))
        public = {name: "ok" if why == "ok" else "unavailable" for name, why in checks.items()}
        agents = {agent_id: "unavailable" for agent_id in self.runtime.unavailable_agents()}  # informational
        return JSONResponse({"status": "ready" if ready else "unavailable", "checks": public,
                             "unavailable_agents": agents},
                            status_code=200 if ready else 503, headers={"Cache-Control": "no-store"})

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "agents": len(self.runtime.agents),
                             "running_tasks": len(self.runtime.engine.runs)})

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        runtime = self.runtime
        await runtime.start()
        grpc_server = None
        try:
            if self.settings.grpc_port is not None:
                from parley.server.grpc_server import start_grpc_server  # optional extra: parley-a2a[grpc]

                grpc_server = await start_grpc_server(runtime, self.settings.grpc_bind_host, self.settings.grpc_port)
            yield
        finally:
            if grpc_server is not None:
                await grpc_server.stop(grace=1.0)
            if self.dashboard is not None:
                await self.dashboard.close()
            try:
                await runtime.stop()
            finally:
                telemetry.server_stopped(runtime)  # telemetry: end the spans of tasks left open


def _parley_route(path: str) -> bool:
    """Whether a path is one of Parley's own JSON routes (admin, agents list, traces, push logs, health, keys),
    not an A2A binding's."""
    return (path.startswith(("/admin/", "/.well-known/")) or path in ("/agents", "/admin", "/healthz", "/readyz")
            or ("/tasks/" in path and path.endswith(("/trace", "/pushLog"))))


def _status_response(error: A2AError) -> Response:
    """An error of Parley's own JSON routes: google.rpc.Status as JSON (the HTTP+JSON binding's error shape,
    parley.server.rest_base), with the error's headers (WWW-Authenticate, Retry-After)."""
    return Response(status_body(error), status_code=error.http_status, media_type="application/json",
                    headers=error.headers or None)


def _wants_v1(request: Request) -> bool:
    raw = request.headers.get("a2a-version") or request.query_params.get("A2A-Version") or ""
    head = raw.strip().split(".")[0]
    return head.isdigit() and int(head) >= 1


def _wants_v1_1(request: Request) -> bool:
    """Whether the card request asks for A2A 1.1 (its card lists the 1.1 interfaces)."""
    raw = request.headers.get("a2a-version") or request.query_params.get("A2A-Version") or ""
    return raw.strip() in ("1.1", "1.1.0")


def _card_response(request: Request, doc: CardDocument, *, link: str | None = None) -> Response:
    headers = {
        "ETag": doc.etag,
        "Last-Modified": doc.last_modified,
        "Cache-Control": f"public, max-age={CARD_MAX_AGE}",
        "Vary": "A2A-Version",
        **({"Link": link} if link else {}),
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


def create_app(runtime: Runtime) -> Starlette:
    """Build the Starlette application serving every agent of `runtime`."""
    server = HttpServer(runtime)
    admin = AdminApi(runtime)
    routes = [
        Route("/.well-known/agent-card.json", server.card_default, methods=["GET"]),
        Route("/.well-known/agent.json", server.card_default, methods=["GET"]),
        Route("/a2a/{agent_id}/.well-known/agent-card.json", server.card_agent, methods=["GET"]),
        Route("/a2a/{agent_id}/.well-known/agent.json", server.card_agent, methods=["GET"]),
        Route("/agents", server.list_agents, methods=["GET"]),
        Route("/healthz", server.healthz, methods=["GET"]),
        Route("/readyz", server.readyz, methods=["GET"]),
        Route("/admin/keys", admin.create_key, methods=["POST"]),
        Route("/admin/keys", admin.list_keys, methods=["GET"]),
        Route("/admin/keys/{key_id}", admin.revoke_key, methods=["DELETE"]),
        Route("/admin/prune", admin.prune, methods=["POST"]),
        Route("/admin/tasks/{task_id}", admin.get_task, methods=["GET"]),
        Route("/tasks/{task_id}/trace", server.trace, methods=["GET"]),
        Route("/tasks/{task_id}/pushLog", server.push_log, methods=["GET"]),
        Route("/a2a/{agent_id}/tasks/{task_id}/pushLog", server.push_log, methods=["GET"]),
        Route("/.well-known/jwks.json", server.jwks, methods=["GET"]),
        Route(JWKS_PATH, server.card_jwks, methods=["GET"]),
        Route(CATALOG_PATH, server.ai_catalog, methods=["GET"]),
        Route("/a2a/{agent_id}/tasks/{task_id}/trace", server.trace, methods=["GET"]),
        *(server.dashboard.routes() if server.dashboard is not None else []),
        Route("/a2a/{agent_id}/{rest:path}", server.rest_agent, methods=REST_VERBS),
        Route("/{rest:path}", server.rest_root, methods=REST_VERBS),
    ]
    starlette = Starlette(routes=routes, lifespan=server.lifespan)
    starlette.state.parley = runtime
    starlette.add_middleware(JsonRpcDoor, handle=server.rpc)  # POST / and /a2a/{agent_id}: JSON-RPC
    # Ahead of every route, the JSON-RPC door included: the open-mode host rule, or authentication first
    settings = runtime.settings
    starlette.add_middleware(EdgeGuard, authenticator=runtime.pipeline.authenticator,
                             host_check=not (settings.insecure or settings.public_url),
                             refuse=server.refuse, is_public=server.is_public)
    # telemetry (parley.telemetry): request middleware (outside the JSON-RPC door: added after it), engine
    # listener/observer; nothing when it is off
    telemetry.instrument(starlette, runtime)
    return starlette
