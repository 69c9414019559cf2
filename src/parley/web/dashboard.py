"""The web dashboard: agents, keys, live tasks and a chat console, served by `parley serve` (docs/dashboard.md).

    GET  {path}                              home: every agent, the hub's routes and delegations
    GET  {root}/login, POST {root}/login     log in with an admin credential; POST {root}/logout
    GET  {root}/login/oidc[/callback]        log in at the configured OIDC provider (parley.web.oidc)
    GET  {root}/agents/{id}                  one agent: card, card check, examples, its routes; a link to its chat
    GET  {root}/agents/{id}/chat             the chat and its console (text and files)
    GET  {root}/agents/{id}/charts           the agent page's last hour alone (the page redraws it live)
    POST {root}/a2a/{id}                     the chat's JSON-RPC, sent on with the session's credential
    GET  {root}/tasks[/rows]                 tasks of every agent and principal (filters, pages); rows only
    GET  {root}/tasks/{id}                   one task: timeline, messages, artifacts, log, tree, push log
    GET  {root}/tasks/{id}/answer            its answer as HTML (Markdown rendered as on the task page): the chat
    GET  {root}/tasks/{id}/files/{a}/{p}     an artifact's file part, as a download
    POST {root}/tasks/{id}/cancel            cancel it
    GET  {root}/keys, POST {root}/keys       API keys: list, create (the token is shown once)
    POST {root}/keys/{id}/revoke             revoke one
    GET  {root}/events                       the change feed as SSE (the live task table)
    GET  {root}/inspect?url=URL              inspect any A2A agent: its card fetched and checked (parley.web.inspector)
    POST {root}/inspect/call                 one call to it (any binding), the response checked; /inspect/stream: SSE
    GET  {root}/static/...                   the CSS and JavaScript (no CDN, no build step)

Only an admin principal gets in (a key with the `admin` scope, the admin key from the environment, a
token with the `admin` scope, or a listed admin principal). A server with no credentials configured is
open (development mode): everyone is let in, and every page says so.
"""

from __future__ import annotations

import functools
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from parley.protocol import models as m
from parley.protocol.codec import to_wire
from parley.protocol.errors import A2AError, InvalidParamsError
from parley.protocol.operations import Operation
from parley.protocol.states import is_settled
from parley.runtime import Runtime
from parley.security.failures import client_address
from parley.security.keys import ANY_AGENT
from parley.server.access import ANONYMOUS, Access, Credentials, Principal
from parley.server.admin import issue_key, key_json
from parley.server.card_signing import JWKS_PATH
from parley.server.cards import card_v03, card_v1
from parley.server.http import EventStreamResponse, sse_frame
from parley.server.loopback import loopback_host
from parley.server.urls import agent_url, base_url, names_this_server
from parley.tasks.store import MAX_PAGE_SIZE, TaskQuery, TaskRecord, decode_cursor, encode_cursor
from parley.web import charts, oidc, push_chart
from parley.web.card_check import check_signature, check_v03, check_v1
from parley.web.examples import examples
from parley.web.feed import IDLE, ChangeFeed
from parley.web.inspector import InspectError, Inspector, parse_headers
from parley.web.preview import answered, asked
from parley.web.render import STATIC, environment, pretty_json, state_label
from parley.web.response_check import method_names
from parley.web.session import CSRF_HEADER, Session, Sessions, csrf_problem
from parley.web.state_timeline import state_timeline
from parley.web.tree_graph import tree_graph

PAGE_SIZE = 25
SESSION_RECHECK_SECONDS = 5.0  # an open live stream authenticates its login again this often
LOG_LIMIT = 500  # log entries shown on a task page (the rest: through the API)
LOG_JSON_CHARS = 20_000  # of each entry's JSON (a huge artifact chunk is cut, the page stays small)
STATES = list(m.TaskState)
# What the login page may say above its form, by the code in `?message=` (the server's choice of words, never
# the URL's): anyone can send a link to the login page, with any query string.
LOGIN_MESSAGES = {
    "ended": "Your login has ended (the credential was revoked, expired or changed).",
    "not-admin": "The credential you logged in with is valid, but not an admin's.",
    "logged-out": "You have logged out.",
}
TTL_CHOICES = {"": None, "1d": 86400, "7d": 7 * 86400, "30d": 30 * 86400, "90d": 90 * 86400, "365d": 365 * 86400}


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking: their principal, their session, and whether the server is open."""

    principal: Principal
    session: Session
    open: bool


Handler = Callable[["Dashboard", Request, Viewer], Awaitable[Response]]


def _admin(handler: Handler) -> Callable[[Dashboard, Request], Awaitable[Response]]:
    """A page only the dashboard's viewer may see: anyone else is sent to the login page (Dashboard.viewer)."""
    @functools.wraps(handler)
    async def page(self: Dashboard, request: Request) -> Response:
        viewer = await self.viewer(request)
        if isinstance(viewer, Response):
            return viewer
        return await handler(self, request, viewer)
    return page


def _admin_action(handler: Handler) -> Callable[[Dashboard, Request], Awaitable[Response]]:
    """A state-changing request of the viewer: it must also pass the CSRF checks (the token from the
    X-CSRF-Token header, or the `csrf` field of a form body), else 403 and nothing happens."""
    @functools.wraps(handler)
    async def action(self: Dashboard, request: Request) -> Response:
        viewer = await self.viewer(request)
        if isinstance(viewer, Response):
            return viewer
        token = None
        kind = request.headers.get("content-type", "")
        if kind.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            token = str((await request.form()).get("csrf") or "")
        refused = self._checked(request, viewer, token)
        return refused if refused is not None else await handler(self, request, viewer)
    return action


class Dashboard:
    """The dashboard's routes over one runtime (see the module docstring)."""

    def __init__(self, runtime: Runtime, rpc: Any) -> None:
        self.runtime = runtime
        self.settings = runtime.settings.dashboard
        self.root = self.settings.root
        self.home_path = self.settings.path
        self.rpc = rpc  # the server's JSON-RPC endpoint (the chat's requests go through it, as any client's)
        self.sessions = Sessions(self.settings)
        self.oidc = oidc.client_of(self.settings) if runtime.security.jwt is not None else None
        self.feed = ChangeFeed(runtime.store)
        runtime.engine.committed.append(self.feed.nudge)  # the live views hear of local commits at once
        self.templates = environment()
        self.inspector = Inspector(self.settings.inspect_allow)

    def routes(self) -> list[BaseRoute]:
        r = self.root
        routes: list[BaseRoute] = [
            Route(self.home_path, self.home, methods=["GET"]),
            Route(f"{r}/login", self.login_page, methods=["GET"]),
            Route(f"{r}/login", self.login, methods=["POST"]),
            Route(f"{r}/logout", self.logout, methods=["POST"]),
            Route(f"{r}/login/oidc", self.oidc_start, methods=["GET"]),
            Route(f"{r}/login/oidc/callback", self.oidc_callback, methods=["GET"]),
            Route(f"{r}/agents/{{agent_id}}", self.agent_page, methods=["GET"]),
            Route(f"{r}/agents/{{agent_id}}/chat", self.chat_page, methods=["GET"]),
            Route(f"{r}/agents/{{agent_id}}/charts", self.agent_charts, methods=["GET"]),
            Route(f"{r}/a2a/{{agent_id}}", self.chat_rpc, methods=["POST"]),
            Route(f"{r}/tasks", self.tasks_page, methods=["GET"]),
            Route(f"{r}/tasks/rows", self.task_rows, methods=["GET"]),
            Route(f"{r}/tasks/{{task_id}}", self.task_page, methods=["GET"]),
            Route(f"{r}/tasks/{{task_id}}/answer", self.task_answer, methods=["GET"]),
            Route(f"{r}/tasks/{{task_id}}/files/{{artifact:int}}/{{part:int}}", self.task_file, methods=["GET"]),
            Route(f"{r}/tasks/{{task_id}}/cancel", self.cancel_task, methods=["POST"]),
            Route(f"{r}/keys", self.keys_page, methods=["GET"]),
            Route(f"{r}/keys", self.create_key, methods=["POST"]),
            Route(f"{r}/keys/{{key_id}}/revoke", self.revoke_key, methods=["POST"]),
            Route(f"{r}/events", self.events, methods=["GET"]),
            Route(f"{r}/inspect", self.inspect_page, methods=["GET"]),
            Route(f"{r}/inspect/call", self.inspect_call, methods=["POST"]),
            Route(f"{r}/inspect/stream", self.inspect_stream, methods=["POST"]),
            Mount(f"{r}/static", app=StaticFiles(directory=STATIC), name="dashboard-static"),
        ]
        if self.home_path.rstrip("/") != r:
            routes.append(Route(f"{r}/", self.home, methods=["GET"]))
        return routes

    # --- who is looking ---------------------------------------------------------------------------

    async def viewer(self, request: Request) -> Viewer | Response:
        """The admin (or, on an open server, anyone) looking at the page; else a redirect to the login page."""
        session = self.sessions.read(request)
        authenticator = self.runtime.security.authenticator
        if not await authenticator.secured():
            if not (self.runtime.settings.insecure or self.runtime.settings.public_url or loopback_host(request)):
                return JSONResponse({"error": "This server is open (no credentials configured): its dashboard "
                                              "answers only loopback host names (DNS rebinding)"}, status_code=403)
            return Viewer(ANONYMOUS, session or self.sessions.new(), True)
        if session is None or not session.credential:
            return self._to_login(request)
        principal = await self._principal(session.credential)
        if principal is None:
            return self._to_login(request, "ended")
        if not self.runtime.security.is_admin(principal):
            return self._to_login(request, "not-admin")
        return Viewer(principal, session, False)

    async def _principal(self, credential: str) -> Principal | None:
        """The principal a credential authenticates as, or None."""
        access = Access(ANY_AGENT, Operation.EXTENDED_CARD, "HTTP")
        try:
            return await self.runtime.security.authenticator.authenticate(access, _credentials(credential))
        except A2AError:
            return None

    def _to_login(self, request: Request, message: str | None = None) -> Response:
        """To the login page (401 for a request a browser does not navigate to); `message`: a LOGIN_MESSAGES code."""
        if request.method != "GET" or request.headers.get("accept", "").startswith("text/event-stream"):
            text = LOGIN_MESSAGES[message] if message else "log in to the dashboard first"
            return JSONResponse({"error": text}, status_code=401)
        query = {"next": request.url.path + (f"?{request.url.query}" if request.url.query else "")}
        if message:
            query["message"] = message
        return RedirectResponse(f"{self.root}/login?{urlencode(query)}", status_code=303)

    def _own_origins(self, request: Request) -> set[str]:
        parts = urlsplit(base_url(request, self.runtime.settings))
        return {f"{parts.scheme}://{parts.netloc}", f"{request.url.scheme}://{request.headers.get('host', '')}"}

    def _page(self, request: Request, viewer: Viewer | None, template: str, status: int = 200,
              **context: Any) -> HTMLResponse:
        """Render a page; the session cookie is (re)written so that every page has a CSRF token."""
        session = viewer.session if viewer is not None else (self.sessions.read(request) or self.sessions.new())
        html = self.templates.get_template(template).render(
            root=self.root, home=self.home_path, viewer=viewer, csrf=session.csrf, csrf_header=CSRF_HEADER,
            agents=self.runtime.agents, oidc=self.oidc is not None, **context)
        response = HTMLResponse(html, status_code=status, headers=_PAGE_HEADERS)
        self.sessions.write(response, session, secure=_https(request, self.runtime.settings))
        return response

    def _checked(self, request: Request, viewer: Viewer, form_token: str | None = None) -> Response | None:
        """A 403 when a state-changing request fails the CSRF checks, else None."""
        problem = csrf_problem(request, viewer.session, self._own_origins(request), form_token)
        if problem is None:
            return None
        return JSONResponse({"error": f"Refused: {problem}"}, status_code=403)

    # --- login ------------------------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        # Only the server's own words: `?message=` is a code (anything else shows nothing), never text to show,
        # or any link could make the login page say what a phisher wants under this server's name.
        return self._login_page(request, message=LOGIN_MESSAGES.get(request.query_params.get("message") or ""),
                                next=_local_path(request.query_params.get("next"), self.home_path))

    def _login_page(self, request: Request, *, next: str, message: str | None = None, error: str | None = None,
                    status: int = 200) -> Response:
        return self._page(request, None, "login.html", status=status, message=message, next=next, error=error)

    # --- login at the OIDC provider -----------------------------------------------------------------

    def _callback_url(self, request: Request) -> str:
        return f"{base_url(request, self.runtime.settings)}{self.root}/login/oidc/callback"

    async def oidc_start(self, request: Request) -> Response:
        """Send the browser to the provider, with the state and verifier sealed in a cookie."""
        target = _local_path(request.query_params.get("next"), self.home_path)
        if self.oidc is None or self.runtime.security.jwt is None:
            return self._login_page(request, next=target, status=404, error="No OIDC login is configured here.")
        try:
            provider = await self.runtime.security.jwt.provider_document()
            url, pending = oidc.start(self.oidc, provider, self._callback_url(request), target)
        except (ValueError, oidc.OidcError) as exc:
            return self._login_page(request, next=target, status=502, error=f"The OIDC login cannot start: {exc}")
        response = RedirectResponse(url, status_code=303)
        # Lax, not Strict: the provider's redirect back is a cross-site navigation, which must carry it
        response.set_cookie(oidc.PENDING_COOKIE, self.sessions.seal(msgspec.json.encode(pending)),
                            max_age=oidc.PENDING_SECONDS, path=f"{self.root}/login/oidc", httponly=True,
                            samesite="lax", secure=_https(request, self.runtime.settings))
        return response

    async def oidc_callback(self, request: Request) -> Response:
        """The provider's redirect back: check the state, redeem the code, keep the access token as the login."""
        raw = self.sessions.unseal(request.cookies.get(oidc.PENDING_COOKIE), oidc.PENDING_SECONDS)
        try:
            pending = msgspec.json.decode(raw, type=oidc.Pending) if raw else None
        except msgspec.DecodeError:  # sealed by an older Parley: start again
            pending = None
        target = pending.next if pending is not None else self.home_path
        q = request.query_params
        problem = None
        if self.oidc is None or self.runtime.security.jwt is None:
            problem = "No OIDC login is configured here."
        elif pending is None:
            problem = "The login took too long or was started elsewhere; start it again."
        elif not secrets.compare_digest(q.get("state") or "", pending.state):
            problem = "The provider's answer does not belong to this login (state mismatch); start it again."
        elif q.get("error"):
            problem = f"The provider said no: {q.get('error_description') or q.get('error')}"
        elif not q.get("code"):
            problem = "The provider's answer has no code."
        token = None
        if problem is None:
            try:
                provider = await self.runtime.security.jwt.provider_document()
                token = await oidc.redeem(self.oidc, provider, q["code"], pending, self._callback_url(request))
            except (ValueError, oidc.OidcError) as exc:
                problem = str(exc)
        principal = await self._principal(token) if token else None
        if problem is None and principal is None:
            problem = "The provider's access token is not accepted by this server (issuer, audience or expiry)."
        if problem is None and not self.runtime.security.is_admin(principal):
            problem = f"{principal.name or principal.id} is valid, but not an admin: the dashboard needs the admin scope."
        if problem is not None:
            response = self._login_page(request, next=target, status=403, error=problem)
        else:
            # A page that moves on by itself: a new same-site navigation carries the SameSite=Strict session
            # cookie, which the rest of this cross-site redirect chain would not.
            response = HTMLResponse(self.templates.get_template("moving.html").render(root=self.root, target=target),
                                    headers=_PAGE_HEADERS)
            self.sessions.write(response, self.sessions.new(token), secure=_https(request, self.runtime.settings))
        response.delete_cookie(oidc.PENDING_COOKIE, path=f"{self.root}/login/oidc")
        return response

    async def login(self, request: Request) -> Response:
        """Log in with a credential. Failures count against the client's address, with the API's
        (parley.security.failures): too many, and every login from there is 429 for a while."""
        address = client_address(request.client.host if request.client else None, request.headers,
                                 self.runtime.settings.forwarded_allow_ips)
        failures = self.runtime.security.failures
        wait = failures.retry_after(address)
        target = _local_path(request.query_params.get("next"), self.home_path)
        if wait is not None:
            response = self._page(request, None, "login.html", status=429, message=None, next=target,
                                  error=f"Too many failed logins from this address: try again in {wait} s.")
            response.headers["Retry-After"] = str(wait)
            return response
        form = await request.form()
        session = self.sessions.read(request)
        target = _local_path(str(form.get("next") or ""), self.home_path)
        problem = csrf_problem(request, session, self._own_origins(request), str(form.get("csrf") or ""))
        if problem is not None:
            return self._page(request, None, "login.html", status=403, message=None, next=target,
                              error=f"Refused: {problem}")
        credential = str(form.get("credential") or "").strip()
        principal = await self._principal(credential) if credential else None
        if principal is None or principal is ANONYMOUS:
            if principal is None and credential:  # a refused guess (an empty form is none)
                failures.failed(address)
            return self._page(request, None, "login.html", status=401, message=None, next=target,
                              error="That credential is not valid here (unknown, revoked or expired).")
        if not self.runtime.security.is_admin(principal):
            return self._page(request, None, "login.html", status=403, message=None, next=target,
                              error=f"{principal.name or principal.id} is valid, but not an admin: the dashboard "
                                    "needs the admin scope.")
        response = RedirectResponse(target, status_code=303)
        self.sessions.write(response, self.sessions.new(credential), secure=_https(request, self.runtime.settings))
        return response

    async def logout(self, request: Request) -> Response:
        """End the session on the server (a copy of its cookie is refused from now on) and in the browser."""
        form = await request.form()
        session = self.sessions.read(request)
        problem = csrf_problem(request, session, self._own_origins(request), str(form.get("csrf") or ""))
        if problem is not None:
            return JSONResponse({"error": f"Refused: {problem}"}, status_code=403)
        assert session is not None  # csrf_problem refuses a request without one
        self.sessions.revoke(session)
        response = RedirectResponse(f"{self.root}/login?message=logged-out", status_code=303)
        self.sessions.clear(response)
        return response

    # --- agents -----------------------------------------------------------------------------------

    @_admin
    async def home(self, request: Request, viewer: Viewer) -> Response:
        base = base_url(request, self.runtime.settings)
        agents = [self._agent_summary(agent_id, base) for agent_id in self.runtime.agents]
        return self._page(request, viewer, "home.html", summaries=agents, hub=_hub_map(self.runtime))

    def _agent_summary(self, agent_id: str, base: str) -> dict[str, Any]:
        agent = self.runtime.agents[agent_id]
        url = agent_url(base, agent_id)
        return {"id": agent_id, "name": agent.name, "description": agent.description, "url": url,
                "card_url": f"{url}/.well-known/agent-card.json", "default": agent_id == self.runtime.default_agent,
                "problem": agent.problem, "skills": agent.skills}

    @_admin
    async def agent_page(self, request: Request, viewer: Viewer) -> Response:
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.runtime.agents:
            return self._page(request, viewer, "error.html", status=404, message=f"No agent {agent_id!r} here.")
        base = base_url(request, self.runtime.settings)
        summary = self._agent_summary(agent_id, base)
        vouched = names_this_server(request, self.runtime.settings)  # never sign a card for a Host of the caller's
        card = await self.runtime.public_card(agent_id, summary["url"], signed=vouched)
        v1, v03 = card_v1(card), card_v03(card)
        served = self.runtime.cards.document(agent_id, summary["url"], v1=True,
                                             security=await self.runtime.security.card_security(),
                                             signing_key=await self.runtime.card_signer.active() if vouched else None,
                                             jku=base + JWKS_PATH)
        signed = check_signature(json.loads(served.body), await self.runtime.card_signer.jwks())
        secured = not viewer.open
        return self._page(request, viewer, "agent.html", agent=summary, card=card, card_v1=v1, card_v03=v03,
                          check_v1=check_v1(v1) + signed, check_v03=check_v03(v03),
                          examples=examples(summary["url"], secured=secured), hub=_hub_map(self.runtime, agent_id),
                          **await self._charts(agent_id))

    @_admin
    async def agent_charts(self, request: Request, viewer: Viewer) -> Response:
        """The agent page's charts alone, drawn again from the store: the page fetches them when the agent's
        tasks change (the change feed) and every minute (the hour moves on)."""
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.runtime.agents:
            return JSONResponse({"error": f"No agent {agent_id!r} here."}, status_code=404)
        html = self.templates.get_template("charts.html").render(root=self.root, **await self._charts(agent_id))
        return HTMLResponse(html, headers=_PAGE_HEADERS)

    async def _charts(self, agent_id: str) -> dict[str, Any]:
        """What charts.html draws for one agent (parley.web.charts)."""
        now = time.time()
        stats = await charts.agent_stats(self.runtime.store, agent_id, now)
        pushes = await push_chart.push_stats(self.runtime.store, agent_id, now)
        return {"chart_agent": agent_id, "stats": stats, "bars": charts.bars(stats), "final": charts.FINAL, "width": charts.WIDTH,
                "height": charts.HEIGHT, "p50": stats.percentile(50), "p95": stats.percentile(95),
                "first50": stats.first_event_percentile(50), "first95": stats.first_event_percentile(95),
                "max_tasks": charts.MAX_TASKS, "pushes": pushes, "outcomes": push_chart.OUTCOMES,
                "outcome_labels": push_chart.LABELS, "push_bars": charts.stacked_bars(pushes.minutes, push_chart.OUTCOMES),
                "max_attempts": push_chart.MAX_ATTEMPTS, "first_bars": charts.latency_bars(stats.first_by_minute),
                "done_bars": charts.latency_bars(stats.durations_by_minute)}

    @_admin
    async def chat_page(self, request: Request, viewer: Viewer) -> Response:
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.runtime.agents:
            return self._page(request, viewer, "error.html", status=404, message=f"No agent {agent_id!r} here.")
        summary = self._agent_summary(agent_id, base_url(request, self.runtime.settings))
        return self._page(request, viewer, "chat.html", agent=summary, chat_url=f"{self.root}/a2a/{agent_id}")

    @_admin_action
    async def chat_rpc(self, request: Request, viewer: Viewer) -> Response:
        """The chat panel's JSON-RPC call, handled by the agent's JSON-RPC endpoint as the logged-in principal."""
        agent_id = request.path_params["agent_id"]
        if agent_id not in self.runtime.agents:
            return JSONResponse({"error": f"no agent {agent_id!r}"}, status_code=404)
        scope = dict(request.scope)
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"cookie", b"x-api-key", b"authorization")]
        if viewer.session.credential:
            name, value = _credential_header(viewer.session.credential)
            headers.append((name.encode(), value.encode()))
        scope["headers"] = headers
        forwarded = Request(scope, request.receive)
        base = base_url(request, self.runtime.settings)
        return await self.rpc.handle(forwarded, agent_id, lambda: agent_url(base, agent_id))

    # --- tasks ------------------------------------------------------------------------------------

    def _query(self, request: Request) -> tuple[TaskQuery, dict[str, str]]:
        """The task table's filters from the query string (agent, state, context, principal, page)."""
        q = request.query_params
        filters = {name: (q.get(name) or "").strip() for name in ("agent", "state", "context", "principal", "page")}
        state = None
        if filters["state"]:
            try:
                state = m.TaskState(filters["state"])
            except ValueError:
                raise InvalidParamsError(f"Unknown state {filters['state']!r}") from None
        size = q.get("size") or str(PAGE_SIZE)
        if not size.isdigit() or not 1 <= int(size) <= MAX_PAGE_SIZE:
            raise InvalidParamsError(f"size must be between 1 and {MAX_PAGE_SIZE}")
        cursor = decode_cursor(filters["page"]) if filters["page"] else None
        query = TaskQuery(agent_id=filters["agent"] or None, owner=filters["principal"] or None,
                          context_id=filters["context"] or None, state=state, page_size=int(size), cursor=cursor,
                          count=False, order="created")  # newest task first, by its (time-ordered) id: the
        # primary key serves it, and a COUNT over every task at each live refresh would cost the server
        if size != str(PAGE_SIZE):
            filters["size"] = size
        return query, filters

    async def _rows(self, request: Request) -> tuple[dict[str, Any], dict[str, str]]:
        query, filters = self._query(request)
        page = await self.runtime.store.list(query)
        now = time.time()
        rows = [{"id": r.task.id, "agent": r.agent_id, "owner": r.owner, "context": r.task.context_id,
                 "state": state_label(r.task.status.state), "created": r.created_at,
                 "duration": _duration(r, now), "asked": asked(r.task), "answered": answered(r.task)}
                for r in page.records]
        nxt = encode_cursor(page.next_cursor)
        next_query = urlencode({**{k: v for k, v in filters.items() if v and k != "page"}, "page": nxt}) if nxt else ""
        return {"rows": rows, "next": next_query, "first": not filters["page"]}, filters

    @_admin
    async def tasks_page(self, request: Request, viewer: Viewer) -> Response:
        try:
            table, filters = await self._rows(request)
        except A2AError as exc:
            return self._page(request, viewer, "error.html", status=400, message=exc.message)
        return self._page(request, viewer, "tasks.html", table=table, filters=filters,
                          states=[state_label(s) for s in STATES], state_values=[s.value for s in STATES])

    @_admin
    async def task_rows(self, request: Request, viewer: Viewer) -> Response:
        try:
            table, _ = await self._rows(request)
        except A2AError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        html = self.templates.get_template("task_rows.html").render(root=self.root, table=table)
        return HTMLResponse(html, headers=_PAGE_HEADERS)

    @_admin
    async def task_page(self, request: Request, viewer: Viewer) -> Response:
        task_id = request.path_params["task_id"]
        store = self.runtime.store
        rec = await store.get(task_id)
        if rec is None:
            return self._page(request, viewer, "error.html", status=404, message=f"No task {task_id!r} here.")
        entries = await store.events_after(task_id, 0, LOG_LIMIT)
        base = base_url(request, self.runtime.settings)
        from parley.hub.trace import build_trace

        tree = await build_trace(store, rec, url=agent_url(base, rec.agent_id), depth=5, viewer=None)
        push = None
        if self.runtime.push is not None:
            from parley.push.log import push_log_json

            notifications, attempts = await store.push_log(task_id)
            push = push_log_json(task_id, notifications, attempts)["notifications"]
        log = [_log_row(e) for e in entries]
        timeline = [row for row in log if row["state"]]
        picture = state_timeline(timeline, settled=is_settled(rec.task.status.state), now=time.time())
        return self._page(request, viewer, "task.html", rec=rec, task=rec.task, log=log, timeline=timeline,
                          picture=picture, graph=tree_graph(tree),
                          more=len(entries) == LOG_LIMIT and rec.seq > LOG_LIMIT, tree=tree, push=push,
                          settled=is_settled(rec.task.status.state), parts=_parts)

    @_admin
    async def task_answer(self, request: Request, viewer: Viewer) -> Response:
        """A task's artifacts (or, without any, its status message) rendered as the task page renders them."""
        rec = await self.runtime.store.get(request.path_params["task_id"])
        if rec is None:
            return JSONResponse({"error": "no such task"}, status_code=404)
        html = self.templates.get_template("answer.html").render(root=self.root, task=rec.task, parts=_parts)
        return HTMLResponse(html, headers=_PAGE_HEADERS)

    @_admin
    async def task_file(self, request: Request, viewer: Viewer) -> Response:
        rec = await self.runtime.store.get(request.path_params["task_id"])
        artifacts = rec.task.artifacts or [] if rec is not None else []
        a, p = request.path_params["artifact"], request.path_params["part"]
        if not (0 <= a < len(artifacts) and 0 <= p < len(artifacts[a].parts)) or artifacts[a].parts[p].raw is None:
            return JSONResponse({"error": "no such file part"}, status_code=404)
        part = artifacts[a].parts[p]
        name = part.filename or f"{artifacts[a].artifact_id}-{p}"
        return Response(part.raw, media_type="application/octet-stream",
                        headers={"Content-Disposition": _attachment(name),
                                 "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})

    @_admin_action
    async def cancel_task(self, request: Request, viewer: Viewer) -> Response:
        task_id = request.path_params["task_id"]
        rec = await self.runtime.store.get(task_id)
        if rec is None:
            return JSONResponse({"error": f"no task {task_id!r}"}, status_code=404)
        try:
            await self.runtime.engine.cancel(rec.agent_id, rec.owner, m.CancelTaskRequest(id=task_id))
        except A2AError as exc:
            return self._page(request, viewer, "error.html", status=exc.http_status, message=exc.message)
        return RedirectResponse(f"{self.root}/tasks/{task_id}", status_code=303)

    @_admin
    async def events(self, request: Request, viewer: Viewer) -> Response:
        """The change feed as SSE: `event: change` with {taskId, agent, principal, state, seq}, `event: reload`."""

        credential = viewer.session.credential
        session_id = viewer.session.id
        keepalive = self.runtime.settings.keepalive_seconds

        async def frames() -> AsyncIterator[bytes]:
            yield b": connected\n\n"
            checked = time.monotonic()
            async for change in self.feed.listen(idle=keepalive):
                if self.runtime.draining:
                    return  # the server is stopping: the browser reconnects to another replica, or later
                if self.sessions.revocations.revoked(session_id):  # logged out: at once, it costs a lookup
                    yield sse_frame(b"{}", event="logout")
                    return
                if credential and time.monotonic() - checked >= SESSION_RECHECK_SECONDS:
                    checked = time.monotonic()
                    principal = await self._principal(credential)
                    if principal is None or not self.runtime.security.is_admin(principal):
                        yield sse_frame(b"{}", event="logout")  # revoked, expired: no more task ids for it
                        return
                if change is IDLE:
                    yield b": keep-alive\n\n"
                    continue
                if change is None:
                    yield sse_frame(b"{}", event="reload")
                    continue
                body = msgspec.json.encode({"taskId": change.task_id, "agent": change.agent_id,
                                            "principal": change.owner, "state": state_label(change.state),
                                            "seq": change.seq})
                yield sse_frame(body, event_id=change.position, event="change")

        return EventStreamResponse(frames(), headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    # --- the inspector ---------------------------------------------------------------------------

    @_admin
    async def inspect_page(self, request: Request, viewer: Viewer) -> Response:
        """A form for an agent URL; with `?url=`, that agent's card fetched (no extra headers), checked, and a
        console to call it (the calls carry the headers and credential typed there)."""
        url = (request.query_params.get("url") or "").strip()
        report, error = None, None
        if url:
            try:
                report = await self.inspector.card(url, {})
            except InspectError as exc:
                error = str(exc)
        return self._page(request, viewer, "inspect.html", status=200 if error is None else 502, url=url,
                          report=report, error=error, methods={v: method_names(v) for v in ("1.0", "0.3")})

    async def _inspect_args(self, request: Request) -> tuple[Any, str, Any, dict[str, str]]:
        """(endpoint, method, params, headers) of an inspector call; InspectError for a bad request."""
        try:
            body = msgspec.json.decode(await request.body())
        except msgspec.DecodeError:
            raise InspectError("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise InspectError("the request body must be a JSON object")
        report = await self.inspector.card(str(body.get("url") or ""), {})
        chosen = str(body.get("endpoint") or "")
        usable = [e for e in report.endpoints if e.callable]
        endpoint = next((e for e in usable if e.key == chosen), usable[0] if usable and not chosen else None)
        if endpoint is None:
            why = next((e.why_not for e in report.endpoints if e.key == chosen), None)
            raise InspectError(f"the card offers no interface {chosen!r} the inspector can call"
                               + (f": {why}" if why else ""))
        method = str(body.get("method") or "")
        if method not in method_names(endpoint.version):
            raise InspectError(f"unknown method {method!r} for A2A {endpoint.version}")
        headers = parse_headers(str(body.get("headers") or ""))
        credential = str(body.get("credential") or "").strip()
        if credential:
            name, value = _credential_header(credential)
            headers[name] = value
        return endpoint, method, body.get("params"), headers

    @_admin_action
    async def inspect_call(self, request: Request, viewer: Viewer) -> Response:
        try:
            endpoint, method, params, headers = await self._inspect_args(request)
            exchange = await self.inspector.call(endpoint, method, params, headers)
        except InspectError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"request": exchange.request, "status": exchange.status,
                             "frames": [_frame_json(f) for f in exchange.frames]},
                            headers={"Cache-Control": "no-store"})

    @_admin_action
    async def inspect_stream(self, request: Request, viewer: Viewer) -> Response:
        """The stream's frames, each checked, as SSE: `event: request`, `event: frame`, `event: error`."""
        try:
            endpoint, method, params, headers = await self._inspect_args(request)
        except InspectError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

        async def frames() -> AsyncIterator[bytes]:
            try:
                async for item in self.inspector.stream(endpoint, method, params, headers):
                    if "request" in item:
                        yield sse_frame(msgspec.json.encode(item["request"]), event="request")
                    else:
                        yield sse_frame(msgspec.json.encode(_frame_json(item)), event="frame")
            except InspectError as exc:
                yield sse_frame(msgspec.json.encode({"error": str(exc)}), event="error")

        return EventStreamResponse(frames(), headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    # --- keys -------------------------------------------------------------------------------------

    @_admin
    async def keys_page(self, request: Request, viewer: Viewer) -> Response:
        return await self._keys(request, viewer)

    async def _keys(self, request: Request, viewer: Viewer, *, created: dict[str, Any] | None = None,
                    error: str | None = None, status: int = 200) -> Response:
        store = self.runtime.security.keys
        keys = [key_json(k) for k in await store.list(None)] if store is not None else []
        return self._page(request, viewer, "keys.html", status=status, keys=keys, created=created, error=error,
                          enabled=store is not None, ttl_choices=list(TTL_CHOICES))

    @_admin_action
    async def create_key(self, request: Request, viewer: Viewer) -> Response:
        form = await request.form()  # read (and kept) by the CSRF check
        store = self.runtime.security.keys
        if store is None:
            return await self._keys(request, viewer, error="API keys are turned off on this server.", status=409)
        agent = str(form.get("agent") or "").strip()
        name = str(form.get("name") or "").strip()
        scopes = sorted({s.strip() for s in str(form.get("scopes") or "a2a").replace(",", " ").split() if s.strip()})
        ttl = str(form.get("expires") or "")
        if ttl not in TTL_CHOICES:
            return await self._keys(request, viewer, error=f"Unknown expiry {ttl!r}.", status=400)
        if viewer.open and "admin" not in scopes:
            return await self._keys(request, viewer, status=400, error=(
                "This server is open: its first key must have the admin scope (once a key exists, every "
                "request needs one, and this dashboard needs an admin)."))
        try:
            key, token = await issue_key(self.runtime, store, agent, name=name,
                                         scopes=frozenset(scopes or ["a2a"]), ttl_seconds=TTL_CHOICES[ttl])
        except A2AError as exc:
            return await self._keys(request, viewer, error=exc.message, status=400)
        self.runtime.security.authenticator.recheck()
        if viewer.open:  # the server is secured now: this browser stays in with the admin key it just made
            principal = await self._principal(token)
            viewer = Viewer(principal or ANONYMOUS, self.sessions.new(token), False)
        response = await self._keys(request, viewer, created={"key": key_json(key), "token": token})
        response.headers["Cache-Control"] = "no-store"
        return response

    @_admin_action
    async def revoke_key(self, request: Request, viewer: Viewer) -> Response:
        store = self.runtime.security.keys
        if store is None or await store.revoke(request.path_params["key_id"]) is None:
            return await self._keys(request, viewer, error="No such key.", status=404)
        return RedirectResponse(f"{self.root}/keys", status_code=303)

    async def close(self) -> None:
        await self.feed.close()


_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    # everything is served by Parley itself: no inline script, no CDN
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
}


def _frame_json(frame: dict[str, Any]) -> dict[str, Any]:
    """One checked answer for the browser: its body, and each check with `ok` and `what`."""
    return {"body": frame["body"], "checks": [{"ok": c.ok, "what": c.what} for c in frame["checks"]],
            "valid": all(c.ok for c in frame["checks"])}


def _credentials(credential: str) -> Credentials:
    name, value = _credential_header(credential)
    return Credentials(headers={name: value})


def _credential_header(credential: str) -> tuple[str, str]:
    """An API key goes in X-API-Key; a JWT (three dot-separated parts, not pk_) as a bearer token."""
    if not credential.startswith("pk_") and credential.count(".") == 2:
        return "authorization", f"Bearer {credential}"
    return "x-api-key", credential


def _attachment(name: str) -> str:
    """Content-Disposition for a download named `name` (any characters): an ASCII fallback and the
    UTF-8 name (RFC 6266, RFC 5987)."""
    plain = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\' else "_" for c in name) or "download"
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


def _https(request: Request, settings: Any) -> bool:
    return base_url(request, settings).startswith("https://")


def _local_path(target: str | None, default: str) -> str:
    """`target` if it is a path on this server, else `default` (no open redirect): it must start with one
    `/`, and hold no backslash, whitespace or control character (browsers drop tabs and newlines from URLs,
    so `/\t/evil.example` would become `//evil.example`)."""
    if (not target or not target.startswith("/") or target.startswith("//") or "\\" in target
            or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in target)):
        return default
    return target


def _duration(rec: TaskRecord, now: float) -> float | None:
    """Seconds from a task's start to its settling (or to now, while it runs); None if its start is unknown."""
    if not rec.created_at:
        return None
    return (rec.updated_at if is_settled(rec.task.status.state) else now) - rec.created_at


def _text_of(message: m.Message | None) -> str:
    if message is None:
        return ""
    return "\n".join(p.text for p in message.parts if p.text is not None)


def _log_row(entry: Any) -> dict[str, Any]:
    """One log entry for the event-log timeline: seq, kind, the state it set (if any), a summary and its JSON."""
    ev = entry.event
    state = None
    summary = ""
    if isinstance(ev, m.Task | m.TaskStatusUpdateEvent):
        state = state_label(ev.status.state)
        summary = _text_of(ev.status.message)
    elif isinstance(ev, m.Message):
        summary = _text_of(ev)
    elif isinstance(ev, m.TaskArtifactUpdateEvent):
        summary = f"{ev.artifact.name or ev.artifact.artifact_id}: " + " ".join(
            p.text for p in ev.artifact.parts if p.text is not None)[:200]
    timestamp = ev.status.timestamp if isinstance(ev, m.Task | m.TaskStatusUpdateEvent) else None
    body = pretty_json(to_wire(ev))
    if len(body) > LOG_JSON_CHARS:
        body = body[:LOG_JSON_CHARS] + f"\n… ({len(body) - LOG_JSON_CHARS:,} more characters: GetTask has all of it)"
    return {"seq": entry.seq, "kind": entry.kind, "state": state, "summary": summary, "at": timestamp,
            "json": body}


def _parts(parts: list[m.Part]) -> list[dict[str, Any]]:
    """What a template needs to show each part: text (as Markdown), data (JSON), a file (download or link)."""
    shown = []
    for i, part in enumerate(parts):
        if part.text is not None:
            shown.append({"kind": "text", "text": part.text, "index": i})
        elif part.raw is not None:
            shown.append({"kind": "file", "name": part.filename or f"part-{i}", "size": len(part.raw),
                          "media_type": part.media_type or "application/octet-stream", "index": i})
        elif part.url is not None:
            safe = part.url.lower().startswith(("http://", "https://"))
            shown.append({"kind": "url", "url": part.url, "safe": safe, "name": part.filename or part.url,
                          "index": i})
        else:
            shown.append({"kind": "data", "data": to_wire(part).get("data"), "index": i})
    return shown


def _hub_map(runtime: Runtime, only: str | None = None) -> dict[str, Any]:
    """The hub's routing rules and who may delegate to whom (from the agents that route or delegate); with
    `only` (an agent id), just the rules and delegations that agent is part of (its own page)."""
    from parley.hub.routing import RoutedAgent

    routes, delegates = [], {}
    for agent_id, agent in runtime.agents.items():
        if isinstance(agent, RoutedAgent):
            for rule in agent.rules:
                routes.append({"from": agent_id, "to": rule.to_agent, "keywords": list(rule.keywords),
                               "regex": list(rule.regex),
                               "tags": list(rule.tags), "priority": rule.priority})
        allowed = sorted(getattr(agent, "delegates", None) or [])
        if allowed:
            delegates[agent_id] = allowed
    if only is not None:
        routes = [r for r in routes if only in (r["from"], r["to"])]
        delegates = {k: v for k, v in delegates.items() if k == only or only in v}
    return {"routes": routes, "delegates": delegates}


__all__ = ["Dashboard"]
