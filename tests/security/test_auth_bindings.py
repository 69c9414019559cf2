"""API keys on the wire, over every binding Parley serves: JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and 0.3, gRPC 1.0.

One live server (uvicorn on 127.0.0.1 and its gRPC port) with the real credential authenticator and scope
authorizer, its keys in the server's SQLite file (made here through a `SqliteKeyStore` of the same file, as
`parley keys create` does). Two agents: `alpha`, with a public skill `chat` and a skill `ops` that requires the
scope `ops`; and `beta`. Both ask a question on the first turn, so their tasks stay open (cancelable,
subscribable, continuable). Push notification configs are enabled so their operations can be checked too.

- Section 7.4 / 3.3.2: without a key, or with a wrong one, every request gets HTTP 401 with a WWW-Authenticate
  challenge (JSON-RPC error -31401) or gRPC UNAUTHENTICATED; `X-API-Key` and `Authorization: Bearer` both work.
- Section 7.5 / 3.3.2: a key opens its own agent only (403 / PERMISSION_DENIED elsewhere); tasks belong to the
  principal that made them (another principal gets TaskNotFoundError for every operation on them, and does
  not see them listed); a skill that requires a scope is refused (403) to a key without it.
- Section 7.3 / 8 / 3.1.11 / 6.9: the public card is readable without credentials and declares the scheme that
  is enforced (1.0 `securitySchemes` + `securityRequirements`, 0.3 `securitySchemes` + `security`); the
  extended card needs authentication and lists only the skills the caller's scopes allow.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents.base import RunContext
from parley.app import Parley, Settings
from parley.client import A2AClient
from parley.protocol import models as m
from parley.protocol.errors import A2AError, PermissionDeniedError, TaskNotFoundError
from parley.protocol.operations import Operation
from parley.security.keys import SqliteKeyStore
from parley.settings import LimitSettings, PushSettings
from support import needs

from .secured import WAIT, accesskit, grpc_raw, uid

HAVE_GRPC = accesskit.HAVE_GRPC
Reader = accesskit.Reader
Server = accesskit.Server
start = accesskit.start

S = m.TaskState
QUESTION = "Which one?"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
OPS_SCOPE = "ops"
HOOK = "https://203.0.113.9/parley"  # TEST-NET-3, allowed explicitly below (nothing is sent there)

PAIRS = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3"), ("GRPC", "1.0")]
GRPC_MARK = [needs("grpc", "grpc")]


def pairs(*only: tuple[str, str]) -> list[Any]:
    return [pytest.param(b, v, id=f"{b}-{v}", marks=GRPC_MARK if b == "GRPC" else [])
            for b, v in (only or PAIRS)]


# --- the server -------------------------------------------------------------------------------------------------

SKILLS = [
    m.AgentSkill(id="chat", name="Chat", description="Talk about anything", tags=["chat"]),
    m.AgentSkill(id="ops", name="Operations", description="Restart things", tags=["ops"],
                 security_requirements=[{"schemes": {"apiKey": {"list": [OPS_SCOPE]}}}]),
]


def secured_app(db: Path) -> Parley:
    # limits: wrong keys are sent on purpose, many times; their throttling is test_dashboard_logins's subject
    app = Parley(settings=Settings(db=str(db), push=PushSettings(allow=["203.0.113.0/24"]),
                                   limits=LimitSettings(auth_failures=None)))

    @app.agent(id="alpha", name="Alpha", description="Asks, then answers", skills=SKILLS)
    async def alpha(ctx: RunContext):
        if ctx.turn == 1:
            yield ctx.ask(QUESTION)
            return
        yield f"alpha heard {ctx.text}"

    @app.agent(id="beta", name="Beta", description="Asks, then answers")
    async def beta(ctx: RunContext):
        if ctx.turn == 1:
            yield ctx.ask(QUESTION)
            return
        yield f"beta heard {ctx.text}"

    return app


@dataclass
class Env:
    srv: Server
    store: SqliteKeyStore

    async def key(self, agent: str = "alpha", *, scopes: set[str] | None = None, principal: str | None = None) -> str:
        """A new key (what `parley keys create` would print)."""
        _, token = await self.store.create(agent, scopes=frozenset(scopes) if scopes else None, principal=principal)
        return token


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    db = tmp_path_factory.mktemp("auth-bindings") / "parley.db"
    store = SqliteKeyStore(db)
    asyncio.run(store.create("alpha", name="bootstrap"))  # secured from the first request
    srv = start(secured_app(db))
    yield Env(srv, store)
    srv.stop()
    asyncio.run(store.close())


@pytest.fixture
async def clients(env: Env) -> AsyncIterator[Any]:
    """Factory: `await clients(agent, binding, version, token, how)`, closed after the test."""
    made: list[A2AClient] = []

    async def make(agent: str, binding: str, version: str, token: str, how: str = "x-api-key") -> A2AClient:
        client = await connect(env.srv, agent, binding, version, token, how)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


async def connect(srv: Server, agent: str, binding: str, version: str, token: str,
                  how: str = "x-api-key") -> A2AClient:
    """A Parley client for `agent` over (binding, version) that presents `token` (X-API-Key or Bearer)."""
    header = ("authorization", f"Bearer {token}") if how == "bearer" else ("x-api-key", token)
    if binding == "GRPC":
        from parley.client.grpc import GrpcTransport

        return A2AClient(GrpcTransport(None, srv.grpc_target, "1.0", tenant=agent, metadata=[header]))
    client = await A2AClient.connect(srv.agent_url(agent), bindings=[binding], version=version,
                                     headers={header[0]: header[1]})
    assert (client.binding, client.version) == (binding, version)
    return client


# --- raw requests: what each binding puts on the wire ----------------------------------------------------------------

JSONRPC_METHODS = {
    "1.0": {"send": "SendMessage", "stream": "SendStreamingMessage", "get": "GetTask", "list": "ListTasks",
            "cancel": "CancelTask", "subscribe": "SubscribeToTask", "push_list": "ListTaskPushNotificationConfigs",
            "extended_card": "GetExtendedAgentCard"},
    "0.3": {"send": "message/send", "stream": "message/stream", "get": "tasks/get", "list": "tasks/list",
            "cancel": "tasks/cancel", "subscribe": "tasks/resubscribe", "push_list": "tasks/pushNotificationConfig/list",
            "extended_card": "agent/getAuthenticatedExtendedCard"},
}
REST_ROUTES = {
    "1.0": {"send": ("POST", "/message:send"), "stream": ("POST", "/message:stream"), "get": ("GET", "/tasks/{id}"),
            "list": ("GET", "/tasks"), "cancel": ("POST", "/tasks/{id}:cancel"),
            "subscribe": ("POST", "/tasks/{id}:subscribe"), "push_list": ("GET", "/tasks/{id}/pushNotificationConfigs"),
            "extended_card": ("GET", "/extendedAgentCard")},
    "0.3": {"send": ("POST", "/v1/message:send"), "stream": ("POST", "/v1/message:stream"),
            "get": ("GET", "/v1/tasks/{id}"), "list": ("GET", "/v1/tasks"), "cancel": ("POST", "/v1/tasks/{id}:cancel"),
            "subscribe": ("GET", "/v1/tasks/{id}:subscribe"),
            "push_list": ("GET", "/v1/tasks/{id}/pushNotificationConfigs"), "extended_card": ("GET", "/v1/card")},
}
OPS = {"send": Operation.SEND, "stream": Operation.STREAM, "get": Operation.GET, "list": Operation.LIST,
       "cancel": Operation.CANCEL, "subscribe": Operation.SUBSCRIBE, "push_list": Operation.PUSH_LIST,
       "extended_card": Operation.EXTENDED_CARD}


@dataclass
class Wire:
    """One answer as it was on the wire."""

    status: str  # the HTTP status ("401"), or the gRPC status code name ("UNAUTHENTICATED")
    code: int | None = None  # the JSON-RPC error code
    reason: str | None = None  # the ErrorInfo reason
    challenge: str | None = None  # WWW-Authenticate (HTTP header, or gRPC trailing metadata)
    body: str = ""


def _message(version: str, binding: str, text: str, skill: str | None) -> dict[str, Any]:
    meta = {"metadata": {"parley.skill": skill}} if skill else {}
    if binding == "JSONRPC" and version == "0.3":
        return {"kind": "message", "messageId": uid("m-"), "role": "user", "parts": [{"kind": "text", "text": text}],
                **meta}
    key = "content" if binding == "HTTP+JSON" and version == "0.3" else "parts"
    return {"messageId": uid("m-"), "role": "ROLE_USER", key: [{"text": text}], **meta}


async def wire(env: Env, binding: str, version: str, op: str, *, agent: str = "alpha", task_id: str = "no-such-task",
               token: str | None = None, how: str = "x-api-key", raw_headers: dict[str, str] | None = None,
               skill: str | None = None, request_skill: str | None = None, text: str = "hi") -> Wire:
    """One request of `op` over (binding, version), presenting `token` (or `raw_headers`)."""
    headers = dict(raw_headers or {})
    if token is not None:
        headers.update({"Authorization": f"Bearer {token}"} if how == "bearer" else {"X-API-Key": token})
    if binding == "GRPC":
        return await _wire_grpc(env, op, agent, task_id, headers, skill, request_skill, text)
    headers["A2A-Version"] = version
    extra = {"metadata": {"parley.skill": request_skill}} if request_skill else {}
    async with httpx.AsyncClient(timeout=WAIT) as http:
        if binding == "JSONRPC":
            if op in ("send", "stream"):
                params: dict[str, Any] = {"message": _message(version, binding, text, skill), **extra}
            elif op == "push_list":
                params = {"taskId": task_id} if version == "1.0" else {"id": task_id}
            elif op in ("list", "extended_card"):
                params = {}
            else:
                params = {"id": task_id}
            body = {"jsonrpc": "2.0", "id": 1, "method": JSONRPC_METHODS[version][op], "params": params}
            resp = await http.post(env.srv.agent_url(agent), json=body, headers=headers)
            data = resp.json()
            err = data.get("error") or {}
            reason = next((d.get("reason") for d in err.get("data") or [] if isinstance(d, dict)), None)
            return Wire(str(resp.status_code), err.get("code"), reason, resp.headers.get("www-authenticate"), resp.text)
        verb, path = REST_ROUTES[version][op]
        payload = {"message": _message(version, binding, text, skill), **extra} if op in ("send", "stream") else None
        resp = await http.request(verb, env.srv.agent_url(agent) + path.replace("{id}", task_id), headers=headers,
                                  json=payload)
        reason = None
        if resp.headers.get("content-type", "").startswith(("application/json", "application/a2a+json")):
            err = resp.json().get("error") if isinstance(resp.json(), dict) else None
            if isinstance(err, dict):
                reason = next((d.get("reason") for d in err.get("details") or [] if d.get("@type") == ERROR_INFO),
                              None)
        return Wire(str(resp.status_code), None, reason, resp.headers.get("www-authenticate"), resp.text)


async def _wire_grpc(env: Env, op: str, agent: str, task_id: str, headers: dict[str, str], skill: str | None,
                     request_skill: str | None, text: str) -> Wire:
    operation = OPS[op]
    if op in ("send", "stream"):
        msg = m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text=text)],
                        metadata={"parley.skill": skill} if skill else None)
        req: Any = m.SendMessageRequest(message=msg, metadata={"parley.skill": request_skill} if request_skill else None)
    elif op == "list":
        req = m.ListTasksRequest()
    elif op == "push_list":
        req = m.ListTaskPushConfigsRequest(task_id=task_id)
    elif op == "extended_card":
        req = m.GetExtendedAgentCardRequest()
    else:
        req = {"get": m.GetTaskRequest, "cancel": m.CancelTaskRequest, "subscribe": m.SubscribeToTaskRequest}[op](
            id=task_id)
    out = await grpc_raw(env.srv.grpc_target, operation, req, agent, [(k.lower(), v) for k, v in headers.items()])
    return Wire(out.code, None, out.reason, (out.trailers or {}).get("www-authenticate"), repr(out.result))


def refused(binding: str, http: int, grpc: str) -> str:
    return grpc if binding == "GRPC" else str(http)


def assert_unauthenticated(w: Wire, binding: str, version: str) -> None:
    """Section 3.3.2 / 7.4: HTTP 401 (JSON-RPC too, with error -31401) or gRPC UNAUTHENTICATED, with a
    WWW-Authenticate challenge naming the API-key header."""
    assert w.status == refused(binding, 401, "UNAUTHENTICATED"), (w.status, w.body[:300])
    assert w.challenge is not None and 'header="X-API-Key"' in w.challenge, w.challenge
    if binding == "JSONRPC":
        assert w.code == -31401, w.body[:300]
    if not (binding == "JSONRPC" and version == "0.3"):  # 0.3 JSON-RPC errors carry no ErrorInfo
        assert w.reason == "UNAUTHENTICATED", w.body[:300]


def assert_forbidden(w: Wire, binding: str, version: str) -> None:
    """Section 3.3.2 / 7.5: HTTP 403 (JSON-RPC error -31403) or gRPC PERMISSION_DENIED."""
    assert w.status == refused(binding, 403, "PERMISSION_DENIED"), (w.status, w.body[:300])
    if binding == "JSONRPC":
        assert w.code == -31403, w.body[:300]
    if not (binding == "JSONRPC" and version == "0.3"):
        assert w.reason == "PERMISSION_DENIED", w.body[:300]


# --- authentication ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("binding, version", pairs())
async def test_a_request_without_credentials_gets_401_with_a_challenge(env: Env, binding: str, version: str,
                                                                       op: str) -> None:
    """Sections 7.4 and 3.3.2: every request of every binding is authenticated; without credentials the answer
    is HTTP 401 carrying a WWW-Authenticate challenge (and, for JSON-RPC, an error body with code -31401),
    or gRPC UNAUTHENTICATED with the challenge in the trailing metadata."""
    w = await wire(env, binding, version, op)
    assert_unauthenticated(w, binding, version)


async def test_the_jsonrpc_401_body_is_a_jsonrpc_error_with_a_null_id(env: Env) -> None:
    """Section 9 (JSON-RPC errors) with 7.4: the 401 body is a JSON-RPC 2.0 error response, code -31401 and a
    message saying what to send; the challenge names both accepted forms. Its id is null: a stranger's body is
    never read nor parsed (issue 28, item 7), so the request's id is not known (JSON-RPC 2.0 section 5)."""
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await http.post(env.srv.agent_url("alpha"),
                               headers={"A2A-Version": "1.0", "Content-Type": "application/json"},
                               content=json.dumps({"jsonrpc": "2.0", "id": "req-42", "method": "ListTasks",
                                                   "params": {}}))
    assert resp.status_code == 401
    body = resp.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and "result" not in body
    assert body["error"]["code"] == -31401 and "X-API-Key" in body["error"]["message"]
    challenge = resp.headers["www-authenticate"]
    assert challenge.startswith("ApiKey ") and "Bearer" in challenge


@pytest.mark.parametrize("binding, version", pairs(("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"),
                                                 ("HTTP+JSON", "0.3")))
async def test_authentication_comes_before_validating_the_request(env: Env, binding: str, version: str) -> None:
    """Section 7.4 (the server MUST authenticate every incoming request) with 3.3.2: a well-formed JSON request
    without credentials whose params are invalid is refused as unauthenticated (401 with a challenge), not
    answered with a validation error that tells a stranger how the API validates its input. (The credentials
    are checked before the request limits for the same reason.)"""
    headers = {"A2A-Version": version}
    async with httpx.AsyncClient(timeout=WAIT) as http:
        if binding == "JSONRPC":
            method = JSONRPC_METHODS[version]["send"]
            resp = await http.post(env.srv.agent_url("alpha"), headers=headers,
                                   json={"jsonrpc": "2.0", "id": 9, "method": method, "params": {"message": 3}})
        else:
            path = REST_ROUTES[version]["send"][1]
            resp = await http.post(env.srv.agent_url("alpha") + path, headers=headers, json={"message": 3})
    assert resp.status_code == 401, (resp.status_code, resp.text[:300])
    assert "www-authenticate" in resp.headers
    if binding == "JSONRPC":
        assert resp.json()["error"]["code"] == -31401, resp.text[:300]


@pytest.mark.parametrize("binding, version", pairs())
async def test_a_wrong_key_gets_401(env: Env, binding: str, version: str) -> None:
    """Sections 7.4 and 3.3.2 ("invalid credentials"): an unknown key, a known key id with a wrong secret, a value
    that is not a key at all, and a bearer token that is no key of this server (and no issuer is configured)
    are all refused like a missing key (401 / UNAUTHENTICATED with a challenge)."""
    real = await env.key("alpha")
    key_id = real.split("_")[1]
    wrong = [
        {"X-API-Key": "pk_0123456789abcdef_" + "x" * 43},
        {"X-API-Key": f"pk_{key_id}_" + "y" * 43},
        {"X-API-Key": "not-a-key"},
        {"Authorization": f"Bearer pk_{key_id}_" + "z" * 43},
        {"Authorization": "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJtZSJ9."},
    ]
    for headers in wrong:
        w = await wire(env, binding, version, "get", raw_headers=headers)
        assert_unauthenticated(w, binding, version)
        assert real not in w.body
    assert (await wire(env, binding, version, "list", token=real)).status == ("OK" if binding == "GRPC" else "200")


@pytest.mark.parametrize("how", ["x-api-key", "bearer"])
@pytest.mark.parametrize("binding, version", pairs())
async def test_a_key_works_as_x_api_key_and_as_bearer(env: Env, clients: Any, binding: str, version: str,
                                                      how: str) -> None:
    """Section 7.3 (the client sends its credential in the protocol's headers / metadata): the same key is
    accepted as `X-API-Key` and as `Authorization: Bearer`, for sending, reading and listing."""
    token = await env.key("alpha")
    client = await clients("alpha", binding, version, token, how)
    task = await client.send("hello")
    assert isinstance(task, m.Task) and task.status.state is S.INPUT_REQUIRED
    assert (await client.get(task.id)).id == task.id
    assert [t.id for t in (await client.list()).tasks] == [task.id]


# --- a key opens its agent only -----------------------------------------------------------------------------------


@pytest.mark.parametrize("binding, version", pairs())
async def test_a_key_for_one_agent_is_refused_by_another(env: Env, clients: Any, binding: str, version: str) -> None:
    """Section 7.5 and 3.3.2 (authorization errors): a key made for `alpha` calling `beta` gets HTTP 403 / gRPC
    PERMISSION_DENIED for every operation, and never a task of beta's: beta's task is neither shown nor changed."""
    beta_key = await env.key("beta")
    alpha_key = await env.key("alpha", principal=None)
    theirs = await (await clients("beta", "JSONRPC", "1.0", beta_key)).send("beta's secret question")
    for op in ("send", "stream", "get", "list", "cancel", "subscribe", "push_list", "extended_card"):
        w = await wire(env, binding, version, op, agent="beta", task_id=theirs.id, token=alpha_key)
        assert_forbidden(w, binding, version)
        assert "beta's secret question" not in w.body
    with pytest.raises(PermissionDeniedError):
        await (await clients("beta", binding, version, alpha_key)).get(theirs.id)
    # Its own agent does not know beta's task either.
    with pytest.raises(TaskNotFoundError):
        await (await clients("alpha", binding, version, alpha_key)).get(theirs.id)
    still = await (await clients("beta", "JSONRPC", "1.0", beta_key)).get(theirs.id)
    assert still.status.state is S.INPUT_REQUIRED
    assert [msg.text() for msg in still.history or []] == ["beta's secret question"]


# --- tasks belong to their principal ---------------------------------------------------------------------------------


async def _push(client: A2AClient, op: Operation, task_id: str, config_id: str | None = None) -> Any:
    if op is Operation.PUSH_SET:
        # An explicit config id: Parley's 0.3 HTTP+JSON client sends an id-less config as the name
        # `tasks/{id}/pushNotificationConfigs/`, which its server refuses (not what this test is about).
        return await client.transport.call(op, m.TaskPushNotificationConfig(url=HOOK, task_id=task_id,
                                                                            id=config_id or uid("cfg-")))
    if op is Operation.PUSH_LIST:
        return await client.transport.call(op, m.ListTaskPushConfigsRequest(task_id=task_id))
    return await client.transport.call(op, m.TaskPushConfigRef(task_id=task_id, id=config_id or "none"))


@pytest.mark.parametrize("binding, version", pairs())
async def test_another_principal_cannot_reach_a_task(env: Env, clients: Any, binding: str, version: str) -> None:
    """Sections 7.5 and 3.3.2 (a task not accessible to the caller is TaskNotFoundError, so its existence is not
    revealed): P1's task is TaskNotFound for P2 (another key of the same agent) for get, cancel, subscribe,
    continuing it with a message (taskId), and every push-config operation; P2's list does not contain it.
    P1 does all of those. Nothing P2 tried changed the task or its push configs."""
    p1 = await clients("alpha", binding, version, await env.key("alpha"))
    p2 = await clients("alpha", binding, version, await env.key("alpha"))
    task = await p1.send("P1's question")
    assert task.status.state is S.INPUT_REQUIRED
    cfg = await _push(p1, Operation.PUSH_SET, task.id)
    assert cfg.id and cfg.task_id == task.id

    with pytest.raises(TaskNotFoundError):
        await p2.get(task.id)
    with pytest.raises(TaskNotFoundError):
        await p2.cancel(task.id)
    with pytest.raises(TaskNotFoundError):
        await p2.send(m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="hijack")],
                                task_id=task.id))
    sub = Reader.subscribe(p2, task.id)
    with pytest.raises(TaskNotFoundError):
        await sub.next()
    for op in (Operation.PUSH_SET, Operation.PUSH_GET, Operation.PUSH_LIST, Operation.PUSH_DELETE):
        with pytest.raises(TaskNotFoundError):
            await _push(p2, op, task.id, cfg.id)
    assert [t.id for t in (await p2.list()).tasks] == []

    # P1 sees all of it, unchanged.
    got = await p1.get(task.id)
    assert got.status.state is S.INPUT_REQUIRED
    assert [msg.text() for msg in got.history or []] == ["P1's question"]
    assert [t.id for t in (await p1.list()).tasks] == [task.id]
    assert (await _push(p1, Operation.PUSH_GET, task.id, cfg.id)).url == HOOK
    assert [c.id for c in (await _push(p1, Operation.PUSH_LIST, task.id)).configs] == [cfg.id]
    sub = Reader.subscribe(p1, task.id)
    first = await sub.next()
    assert first is not None and isinstance(first.event, m.Task) and first.event.id == task.id
    await sub.close()
    await _push(p1, Operation.PUSH_DELETE, task.id, cfg.id)
    assert (await _push(p1, Operation.PUSH_LIST, task.id)).configs == []
    done = await p1.send(m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="the blue one")],
                                   task_id=task.id))
    assert isinstance(done, m.Task) and done.id == task.id and done.status.state is S.COMPLETED
    other = await p1.send("a second question")
    assert (await p1.cancel(other.id)).status.state is S.CANCELED


# --- cards ------------------------------------------------------------------------------------------------------------------


async def _card(env: Env, agent: str, v1: bool) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await http.get(env.srv.agent_url(agent) + "/.well-known/agent-card.json",
                              headers={"A2A-Version": "1.0"} if v1 else {})
    assert resp.status_code == 200, resp.text
    return resp.json()


APIKEY_V1 = {"location": "header", "name": "X-API-Key"}
APIKEY_V03 = {"type": "apiKey", "in": "header", "name": "X-API-Key"}


async def test_the_public_card_declares_the_scheme_that_is_enforced(env: Env) -> None:
    """Sections 7.3, 8 and 4.5 (SecurityScheme): the public card is read without credentials; its 1.0 form
    declares exactly the API-key scheme (header X-API-Key) in `securitySchemes` and requires it in
    `securityRequirements`, and offers the extended card; the 0.3 form says the same in 0.3 shapes
    (`{"type": "apiKey", "in": "header"}`, `security: [{"apiKey": []}]`, `supportsAuthenticatedExtendedCard`).
    The declaration matches the enforcement: the declared header with a key is accepted, nothing is refused."""
    card = await _card(env, "alpha", v1=True)
    schemes = card["securitySchemes"]
    assert list(schemes) == ["apiKey"]
    assert {k: v for k, v in schemes["apiKey"]["apiKeySecurityScheme"].items() if k != "description"} == APIKEY_V1
    assert card["securityRequirements"] == [{"schemes": {"apiKey": {"list": []}}}]
    assert card["capabilities"]["extendedAgentCard"] is True
    ops_skill = next(s for s in card["skills"] if s["id"] == "ops")
    assert ops_skill["securityRequirements"] == [{"schemes": {"apiKey": {"list": [OPS_SCOPE]}}}]

    old = await _card(env, "alpha", v1=False)
    assert list(old["securitySchemes"]) == ["apiKey"]
    assert {k: v for k, v in old["securitySchemes"]["apiKey"].items() if k != "description"} == APIKEY_V03
    assert old["security"] == [{"apiKey": []}] and "securityRequirements" not in old
    assert old["supportsAuthenticatedExtendedCard"] is True
    assert next(s for s in old["skills"] if s["id"] == "ops")["security"] == [{"apiKey": [OPS_SCOPE]}]

    declared = schemes["apiKey"]["apiKeySecurityScheme"]["name"]
    token = await env.key("alpha")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        assert (await http.post(env.srv.agent_url("alpha"), json=body,
                                headers={"A2A-Version": "1.0", declared: token})).status_code == 200
        assert (await http.post(env.srv.agent_url("alpha"), json=body, headers={"A2A-Version": "1.0"})).status_code \
            == 401


async def test_the_0_3_rest_card_declares_security_in_0_3_form(env: Env) -> None:
    """Section 7.3 for A2A 0.3 clients of the HTTP+JSON binding: `GET /v1/card` answers a 0.3 AgentCard, so its
    security must be in 0.3 form, the same as the well-known 0.3 card: `securitySchemes` as OpenAPI objects
    (`{"type": "apiKey", "in": "header", "name": "X-API-Key"}`), `security: [{"apiKey": []}]`, and the ops
    skill's `security: [{"apiKey": ["ops"]}]` (not the 1.0 `{"schemes": {...: {"list": [...]}}}` shapes)."""
    token = await env.key("alpha")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await http.get(env.srv.agent_url("alpha") + "/v1/card", headers={"X-API-Key": token})
    assert resp.status_code == 200, resp.text
    card = resp.json()
    assert card["protocolVersion"].startswith("0.3")
    assert {k: v for k, v in card["securitySchemes"]["apiKey"].items() if k != "description"} == APIKEY_V03
    assert card["security"] == [{"apiKey": []}]
    assert next(s for s in card["skills"] if s["id"] == "ops")["security"] == [{"apiKey": [OPS_SCOPE]}]


EXTENDED_PAIRS = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0")]


async def _extended(env: Env, binding: str, version: str, token: str | None) -> tuple[Wire, dict[str, Any] | None]:
    """The extended card over (binding, version) as JSON of the caller's version (None when refused)."""
    if binding == "GRPC":
        from google.protobuf import json_format

        from parley.grpc import a2a_pb2  # noqa: F401

        out = await grpc_raw(env.srv.grpc_target, Operation.EXTENDED_CARD, m.GetExtendedAgentCardRequest(), "alpha",
                             [("x-api-key", token)] if token else [])
        card = json_format.MessageToDict(out.result) if out.code == "OK" else None
        return Wire(out.code, None, out.reason, (out.trailers or {}).get("www-authenticate")), card
    w = await wire(env, binding, version, "extended_card", token=token)
    if w.status != "200":
        return w, None
    data = json.loads(w.body)
    return w, data["result"] if binding == "JSONRPC" else data


@pytest.mark.parametrize("binding, version", pairs(*EXTENDED_PAIRS))
async def test_the_extended_card_needs_authentication(env: Env, binding: str, version: str) -> None:
    """Sections 3.1.11 and 6.9: the client MUST authenticate to get the extended card (GetExtendedAgentCard in
    1.0, agent/getAuthenticatedExtendedCard in 0.3): without a key it is 401 / UNAUTHENTICATED, with a challenge."""
    w, card = await _extended(env, binding, version, None)
    assert card is None
    assert_unauthenticated(w, binding, version)


@pytest.mark.parametrize("binding, version", pairs(*EXTENDED_PAIRS))
async def test_the_extended_card_lists_the_skills_the_caller_may_use(env: Env, binding: str, version: str) -> None:
    """Sections 3.1.11 ("MAY return different details based on client authentication level"), 6.9 and 7.5: a key
    without the `ops` scope gets an extended card listing only `chat`; a key with it gets `chat` and `ops`. The
    card is in the caller's version and still declares the enforced scheme."""
    plain, card_plain = await _extended(env, binding, version, await env.key("alpha"))
    ops, card_ops = await _extended(env, binding, version, await env.key("alpha", scopes={"a2a", OPS_SCOPE}))
    assert card_plain is not None and card_ops is not None, (plain, ops)
    assert [s["id"] for s in card_plain["skills"]] == ["chat"]
    assert [s["id"] for s in card_ops["skills"]] == ["chat", "ops"]
    for card in (card_plain, card_ops):
        assert "apiKey" in card["securitySchemes"]
        if version == "0.3":
            assert card["security"] == [{"apiKey": []}]
        else:
            assert [list(r["schemes"]) for r in card["securityRequirements"]] == [["apiKey"]]


# --- skills that require a scope ---------------------------------------------------------------------------------


@pytest.mark.parametrize("binding, version", pairs())
async def test_a_skill_whose_scope_the_key_lacks_is_refused(env: Env, clients: Any, binding: str,
                                                            version: str) -> None:
    """Section 7.5 ("specific skills requested", "OAuth scopes") and 3.3.2: a message selecting the `ops` skill
    (metadata "parley.skill", on the message or on the request) is refused with HTTP 403 / PERMISSION_DENIED to a
    key without the `ops` scope, streaming or not, and no task is made; the same key may use `chat`, and a key
    with the scope may use `ops`."""
    plain = await env.key("alpha")
    for op in ("send", "stream"):
        assert_forbidden(await wire(env, binding, version, op, token=plain, skill="ops"), binding, version)
        assert_forbidden(await wire(env, binding, version, op, token=plain, request_skill="ops"), binding, version)
    client = await clients("alpha", binding, version, plain)
    assert (await client.list()).tasks == []
    with pytest.raises(PermissionDeniedError):
        await client.send(m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="restart it")],
                                    metadata={"parley.skill": "ops"}))
    assert (await client.list()).tasks == []
    chat = await client.send(m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="hello")],
                                       metadata={"parley.skill": "chat"}))
    assert chat.status.state is S.INPUT_REQUIRED
    allowed = await env.key("alpha", scopes={"a2a", OPS_SCOPE})
    w = await wire(env, binding, version, "send", token=allowed, skill="ops")
    assert w.status == ("OK" if binding == "GRPC" else "200") and w.code is None, w.body[:300]
    ops_client = await clients("alpha", binding, version, allowed)
    task = await ops_client.send(m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="restart")],
                                           metadata={"parley.skill": "ops"}))
    assert isinstance(task, m.Task) and task.status.state is S.INPUT_REQUIRED
    try:
        await client.send(m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="x")],
                                    metadata={"parley.skill": "no-such-skill"}))
    except A2AError as exc:
        assert not isinstance(exc, PermissionDeniedError) and exc.code == -32602, exc
    else:
        pytest.fail("a message selecting a skill the agent does not have was accepted")
