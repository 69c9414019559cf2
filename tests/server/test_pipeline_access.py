"""One request pipeline for every binding: authenticate -> authorize -> rate-limit -> service.

The server is built with a test authenticator (the `X-Test-User` header, gRPC metadata
`x-test-user`, names the principal; without it the request is refused with an A2A error whose HTTP
status is 401 and gRPC status UNAUTHENTICATED), an authorizer that forbids `viewer-*` principals
to cancel tasks or read traces (403 / PERMISSION_DENIED) and a rate limiter that refuses a
`metered-*` principal after LIMIT calls (429 / RESOURCE_EXHAUSTED).

A2A 1.0 section 7.4 (the server MUST authenticate every request, with binding-specific error
codes), section 7.5 (authorization on the authenticated identity), section 3.1.3 / 3.1.5 / 3.1.6 /
3.4.2 (a task that is "not accessible" is TaskNotFoundError) and section 5.4 / 5.1 (the same
semantics over every binding). Checked on the wire over JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and
0.3, gRPC 1.0 and Parley's trace endpoint.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import httpx
import pytest
from accesskit import (
    USER_HEADER,
    USER_METADATA,
    WAIT,
    Reader,
    Server,
    connect,
    pair_params,
    served_pairs,
    start,
    user_msg,
)
from srvkit import uid

from parley.agents.base import RunContext
from parley.app import Parley
from parley.client import A2AClient
from parley.protocol import models as m
from parley.protocol.errors import A2AError, TaskNotFoundError
from parley.protocol.operations import Operation
from parley.server.access import Access, Credentials, Principal
from support import grpc_error_reason

S = m.TaskState
LIMIT = 3
QUESTION = "Which colour?"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


# --- the access steps under test --------------------------------------------------------------------------


class NoUserError(A2AError):
    code = -32050
    default_message = f"Send {USER_HEADER} to say who you are"
    http_status = 401
    reason = "TEST_NO_USER"
    grpc_status = "UNAUTHENTICATED"


class ForbiddenError(A2AError):
    code = -32051
    default_message = "Viewers may not do that"
    http_status = 403
    reason = "TEST_FORBIDDEN"
    grpc_status = "PERMISSION_DENIED"


class RateLimitedError(A2AError):
    code = -32052
    default_message = "Too many requests"
    http_status = 429
    reason = "TEST_RATE_LIMITED"
    grpc_status = "RESOURCE_EXHAUSTED"


class Journal:
    """What each access step saw: (step, binding, operation, principal id), thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, str, Operation, str | None]] = []

    def add(self, step: str, access: Access, who: str | None) -> None:
        with self.lock:
            self.entries.append((step, access.binding, access.op, who))

    def of(self, who: str | None, step: str) -> list[tuple[str, Operation]]:
        with self.lock:
            return [(b, op) for s, b, op, p in self.entries if s == step and p == who]


class HeaderAuthenticator:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def authenticate(self, access: Access, credentials: Credentials) -> Principal:
        user = credentials.headers.get(USER_METADATA)  # HTTP headers are case-insensitive; gRPC metadata is lower-case
        self.journal.add("authenticate", access, user)
        if not user:
            raise NoUserError()
        return Principal(user, kind="token")


class ViewerAuthorizer:
    FORBIDDEN: ClassVar[frozenset[Operation]] = frozenset({Operation.CANCEL, Operation.TRACE})

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def authorize(self, access: Access, principal: Principal) -> None:
        self.journal.add("authorize", access, principal.id)
        if principal.id.startswith("viewer-") and access.op in self.FORBIDDEN:
            raise ForbiddenError(f"{principal.id} may not {access.op.value}")


class MeteredLimiter:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    async def acquire(self, access: Access, principal: Principal) -> None:
        self.journal.add("limit", access, principal.id)
        if not principal.id.startswith("metered-"):
            return
        with self.lock:
            self.calls[principal.id] += 1
            over = self.calls[principal.id] > LIMIT
        if over:
            raise RateLimitedError(f"{principal.id} made more than {LIMIT} calls")


def access_app() -> Parley:
    app = Parley()

    @app.agent(id="ask", description="Asks a question, then answers")
    async def ask(ctx: RunContext):
        if ctx.turn == 1:
            yield ctx.ask(QUESTION)
            return
        yield f"you said {ctx.text}"

    @app.agent(id="plain", description="Answers at once")
    async def plain(ctx: RunContext):
        yield f"plain: {ctx.text}"

    return app


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Server, Journal]]:
    journal = Journal()
    srv = start(access_app(), authenticator=HeaderAuthenticator(journal), authorizer=ViewerAuthorizer(journal),
                limiter=MeteredLimiter(journal))
    yield srv, journal
    srv.stop()


@pytest.fixture
async def clients(env) -> AsyncIterator:
    """Factory: `await clients(agent, binding, version, user)`, one client per combination, closed after."""
    srv, _ = env
    made: dict[tuple, A2AClient] = {}

    async def make(agent: str, binding: str, version: str, user: str) -> A2AClient:
        key = (agent, binding, version, user)
        if key not in made:
            made[key] = await connect(srv, agent, binding, version, user=user)
        return made[key]

    yield make
    for client in made.values():
        await client.close()


# --- raw requests, to see the status each binding puts on the wire -------------------------------------------

JSONRPC_METHODS = {
    "1.0": {"get": "GetTask", "list": "ListTasks", "cancel": "CancelTask", "subscribe": "SubscribeToTask",
            "send": "SendMessage", "stream": "SendStreamingMessage"},
    "0.3": {"get": "tasks/get", "list": "tasks/list", "cancel": "tasks/cancel", "subscribe": "tasks/resubscribe",
            "send": "message/send", "stream": "message/stream"},
}
REST_ROUTES = {  # (verb, path under the agent URL) per version
    "1.0": {"get": ("GET", "/tasks/{id}"), "list": ("GET", "/tasks"), "cancel": ("POST", "/tasks/{id}:cancel"),
            "subscribe": ("POST", "/tasks/{id}:subscribe"), "send": ("POST", "/message:send"),
            "stream": ("POST", "/message:stream")},
    "0.3": {"get": ("GET", "/v1/tasks/{id}"), "list": ("GET", "/v1/tasks"),
            "cancel": ("POST", "/v1/tasks/{id}:cancel"), "subscribe": ("GET", "/v1/tasks/{id}:subscribe"),
            "send": ("POST", "/v1/message:send"), "stream": ("POST", "/v1/message:stream")},
}
OPS = {"get": Operation.GET, "list": Operation.LIST, "cancel": Operation.CANCEL, "subscribe": Operation.SUBSCRIBE,
       "send": Operation.SEND, "stream": Operation.STREAM}


def _jsonrpc_params(version: str, op: str, task_id: str) -> dict[str, Any]:
    if op in ("send", "stream"):
        if version == "1.0":
            msg = {"messageId": uid("m-"), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        else:
            msg = {"kind": "message", "messageId": uid("m-"), "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
        return {"message": msg}
    return {} if op == "list" else {"id": task_id}


def _rest_body(version: str, op: str) -> dict[str, Any] | None:
    if op not in ("send", "stream"):
        return None
    key = "parts" if version == "1.0" else "content"
    return {"message": {"messageId": uid("m-"), "role": "ROLE_USER", key: [{"text": "hi"}]}}


async def raw(srv: Server, binding: str, version: str, op: str, *, agent: str = "ask", task_id: str = "no-such-task",
              user: str | None = None) -> tuple[str, str | None]:
    """One request on the wire: (HTTP status or gRPC status name, the error's ErrorInfo reason if any).

    A JSON-RPC error answered with HTTP 200 gives "200:<code>"."""
    if binding == "GRPC":
        return await _raw_grpc(srv, op, agent, task_id, user)
    headers = {"A2A-Version": version}
    if user is not None:
        headers[USER_HEADER] = user
    async with httpx.AsyncClient(timeout=WAIT) as http:
        if binding == "JSONRPC":
            body = {"jsonrpc": "2.0", "id": 1, "method": JSONRPC_METHODS[version][op],
                    "params": _jsonrpc_params(version, op, task_id)}
            resp = await http.post(srv.agent_url(agent), json=body, headers=headers)
            assert resp.headers["content-type"].startswith("application/json"), resp.headers["content-type"]
            err = resp.json().get("error")
            assert err is not None, resp.text
            reason = next((d.get("reason") for d in err.get("data") or [] if isinstance(d, dict)), None)
            status = str(resp.status_code) if resp.status_code != 200 else f"200:{err['code']}"
            return status, reason
        verb, path = REST_ROUTES[version][op]
        url = srv.agent_url(agent) + path.replace("{id}", task_id)
        resp = await http.request(verb, url, headers=headers, json=_rest_body(version, op))
        # A2A 1.0 section 11.1: 1.0 HTTP+JSON answers application/a2a+json; 0.3 HTTP+JSON application/json
        media = "application/a2a+json" if version == "1.0" else "application/json"
        assert resp.headers["content-type"].startswith(media), (resp.status_code, resp.text[:200])
        err = resp.json()["error"]
        reason = next((d.get("reason") for d in err.get("details") or [] if d.get("@type") == ERROR_INFO), None)
        return str(resp.status_code), reason


async def _raw_grpc(srv: Server, op: str, agent: str, task_id: str, user: str | None) -> tuple[str, str | None]:
    import grpc
    import grpc.aio

    from parley.grpc import a2a_pb2_grpc, convert

    operation = OPS[op]
    if op in ("send", "stream"):
        req: Any = m.SendMessageRequest(message=user_msg("hi", message_id=uid("m-")))
    elif op == "list":
        req = m.ListTasksRequest()
    elif op == "cancel":
        req = m.CancelTaskRequest(id=task_id)
    elif op == "subscribe":
        req = m.SubscribeToTaskRequest(id=task_id)
    else:
        req = m.GetTaskRequest(id=task_id)
    metadata = [("a2a-version", "1.0")] + ([(USER_METADATA, user)] if user is not None else [])
    async with grpc.aio.insecure_channel(srv.grpc_target) as channel:
        rpc = getattr(a2a_pb2_grpc.A2AServiceStub(channel), convert.RPCS[operation])
        try:
            call = rpc(convert.encode_request(operation, req, agent), metadata=metadata, timeout=WAIT)
            if operation.streams:
                async for _ in call:
                    pass
            else:
                await call
        except grpc.aio.AioRpcError as exc:
            return exc.code().name, grpc_error_reason(exc)
    raise AssertionError(f"gRPC {op} as {user!r} was not refused")


async def trace_status(srv: Server, task_id: str, user: str | None, agent: str = "ask") -> int:
    headers = {USER_HEADER: user} if user is not None else {}
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await http.get(f"{srv.agent_url(agent)}/tasks/{task_id}/trace", headers=headers)
    return resp.status_code


def expected_refusal(binding: str, http_status: int, grpc_status: str) -> str:
    """What a refusal looks like on the wire: the HTTP status (JSON-RPC and HTTP+JSON alike), or the gRPC code."""
    return grpc_status if binding == "GRPC" else str(http_status)


# --- authentication ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("binding, version", pair_params())
async def test_a_request_without_credentials_is_refused_on_every_binding(env, binding, version, op):
    """Section 7.4: every request is authenticated; without the header (metadata) the answer is HTTP 401
    (JSON-RPC and HTTP+JSON alike) or gRPC UNAUTHENTICATED, carrying the authenticator's error."""
    srv, journal = env
    before = len(journal.of(None, "authenticate"))
    status, reason = await raw(srv, binding, version, op)
    assert status == expected_refusal(binding, 401, "UNAUTHENTICATED")
    if not (binding == "JSONRPC" and version == "0.3"):  # 0.3 JSON-RPC errors carry no ErrorInfo
        assert reason == NoUserError.reason
    seen = journal.of(None, "authenticate")[before:]
    assert (binding, OPS[op]) in seen


async def test_the_trace_endpoint_needs_credentials_too(env, clients):
    """Section 7.4 for Parley's trace extension: no header, 401; the owner gets 200."""
    srv, _ = env
    alice = uid("alice-")
    task = await (await clients("ask", "JSONRPC", "1.0", alice)).send("hello")
    assert await trace_status(srv, task.id, None) == 401
    assert await trace_status(srv, task.id, alice) == 200


async def test_jsonrpc_refusal_keeps_the_jsonrpc_error_shape(env):
    """Section 9.5 (JSON-RPC errors) with section 7.4: the 401 body is a JSON-RPC error response with the
    request id and the authenticator's code and message."""
    srv, _ = env
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await http.post(srv.agent_url("ask"), headers={"A2A-Version": "1.0", "Content-Type": "application/json"},
                               content=json.dumps({"jsonrpc": "2.0", "id": "req-7", "method": "GetTask",
                                                   "params": {"id": "x"}}))
    assert resp.status_code == 401
    body = resp.json()
    assert body["id"] == "req-7" and body["error"]["code"] == NoUserError.code
    assert body["error"]["message"] == NoUserError.default_message


# --- tasks belong to their principal -------------------------------------------------------------------------


@pytest.mark.parametrize("binding, version", pair_params())
async def test_tasks_belong_to_their_principal_over_every_binding(env, clients, binding, version):
    """Sections 3.1.3, 3.1.4, 3.1.5, 3.1.6 and 3.4.2: alice's task (created over one binding) is found by
    alice over every binding and is TaskNotFound for bob over every binding (get, cancel, subscribe,
    continuing it); ListTasks shows each principal only their own tasks; bob's attempts change nothing."""
    srv, _ = env
    alice, bob = uid("alice-"), uid("bob-")
    mine = await (await clients("ask", binding, version, alice)).send("alice's question")
    theirs = await (await clients("ask", binding, version, bob)).send("bob's question")
    assert mine.status.state is S.INPUT_REQUIRED and theirs.status.state is S.INPUT_REQUIRED

    for b, v in served_pairs():
        as_alice = await clients("ask", b, v, alice)
        as_bob = await clients("ask", b, v, bob)
        where = f"{b} {v}"
        got = await as_alice.get(mine.id)
        assert got.id == mine.id and got.status.state is S.INPUT_REQUIRED, where
        with pytest.raises(TaskNotFoundError):
            await as_bob.get(mine.id)
        with pytest.raises(TaskNotFoundError):
            await as_bob.cancel(mine.id)
        with pytest.raises(TaskNotFoundError):
            await as_bob.send(user_msg("hijack", message_id=uid("m-"), task_id=mine.id))
        sub = Reader.subscribe(as_bob, mine.id)
        with pytest.raises(TaskNotFoundError):
            await sub.next()
        assert [t.id for t in (await as_alice.list()).tasks] == [mine.id], where
        assert [t.id for t in (await as_bob.list()).tasks] == [theirs.id], where

    assert await trace_status(srv, mine.id, alice) == 200
    assert await trace_status(srv, mine.id, bob) == 404
    as_alice = await clients("ask", "JSONRPC", "1.0", alice)
    still = await as_alice.get(mine.id)
    assert still.status.state is S.INPUT_REQUIRED
    assert [msg.text() for msg in still.history or []] == ["alice's question"]  # bob's message never got in
    # alice continues her task over another binding; bob's is untouched
    done = await (await clients("ask", "HTTP+JSON", "0.3", alice)).send(
        user_msg("green", message_id=uid("m-"), task_id=mine.id))
    assert done.status.state is S.COMPLETED
    assert (await (await clients("ask", "JSONRPC", "0.3", bob)).get(theirs.id)).status.state is S.INPUT_REQUIRED


@pytest.mark.parametrize("binding, version", pair_params())
async def test_the_owner_subscribes_and_cancels_over_any_binding(env, clients, binding, version):
    """Sections 3.1.5 and 3.1.6: alice's subscription (over `binding`) to her task created over JSON-RPC
    gets the Task first and ends with the cancel she sends over yet another binding."""
    alice = uid("alice-")
    task = await (await clients("ask", "JSONRPC", "1.0", alice)).send("to cancel")
    sub = Reader.subscribe(await clients("ask", binding, version, alice), task.id)
    first = await sub.next()
    assert first is not None and isinstance(first.event, m.Task) and first.event.id == task.id
    canceled = await (await clients("ask", "HTTP+JSON", "1.0", alice)).cancel(task.id)
    assert canceled.status.state is S.CANCELED
    rest = await sub.rest()
    assert rest and isinstance(rest[-1].event, m.TaskStatusUpdateEvent)
    assert rest[-1].event.status.state is S.CANCELED


# --- authorization and rate limits run for every binding -----------------------------------------------------


@pytest.mark.parametrize("binding, version", pair_params())
async def test_the_authorizer_runs_for_every_binding(env, clients, binding, version):
    """Section 7.5: a viewer may read but not cancel: CancelTask is refused with 403 / PERMISSION_DENIED
    over every binding, GetTask works, and the task is not canceled; the trace endpoint is refused too."""
    srv, journal = env
    viewer = uid("viewer-")
    client = await clients("ask", binding, version, viewer)
    task = await client.send("can I cancel?")
    assert (await client.get(task.id)).id == task.id
    status, reason = await raw(srv, binding, version, "cancel", task_id=task.id, user=viewer)
    assert status == expected_refusal(binding, 403, "PERMISSION_DENIED")
    if not (binding == "JSONRPC" and version == "0.3"):
        assert reason == ForbiddenError.reason
    assert (await client.get(task.id)).status.state is S.INPUT_REQUIRED
    assert (binding, Operation.CANCEL) in journal.of(viewer, "authorize")
    assert (binding, Operation.CANCEL) not in journal.of(viewer, "limit")  # refused before it
    assert await trace_status(srv, task.id, viewer) == 403


@pytest.mark.parametrize("binding, version", pair_params())
async def test_the_rate_limiter_runs_for_every_binding(env, binding, version):
    """The limiter step runs after authentication for every binding: a metered principal's first LIMIT calls
    reach the service (TaskNotFound for a task that does not exist), the next is refused with
    429 / RESOURCE_EXHAUSTED."""
    srv, journal = env
    metered = uid("metered-")
    not_found = {"GRPC": "NOT_FOUND", "HTTP+JSON": "404", "JSONRPC": "200:-32001"}[binding]
    for _ in range(LIMIT):
        status, _reason = await raw(srv, binding, version, "get", user=metered)
        assert status == not_found
    status, reason = await raw(srv, binding, version, "get", user=metered)
    assert status == expected_refusal(binding, 429, "RESOURCE_EXHAUSTED")
    if not (binding == "JSONRPC" and version == "0.3"):
        assert reason == RateLimitedError.reason
    assert journal.of(metered, "limit") == [(binding, Operation.GET)] * (LIMIT + 1)


async def test_the_rate_limiter_runs_for_the_trace_endpoint(env):
    """The trace endpoint goes through the same limiter: 404 (no such task) LIMIT times, then 429."""
    srv, _ = env
    metered = uid("metered-")
    assert [await trace_status(srv, "no-such-task", metered) for _ in range(LIMIT)] == [404] * LIMIT
    assert await trace_status(srv, "no-such-task", metered) == 429


@pytest.mark.parametrize("binding, version", pair_params())
async def test_another_principal_reusing_a_message_id_gets_a_task_of_their_own(env, clients, binding, version):
    """Sections 3.3.1 and 3.4.2 with 7.5: idempotency is per principal. Bob resending alice's exact message
    (same messageId, same content) gets a new task of his own, not alice's; naming alice's task with it
    is TaskNotFound."""
    alice, bob = uid("alice-"), uid("bob-")
    mid = uid("m-")
    mine = await (await clients("plain", "JSONRPC", "1.0", alice)).send(user_msg("same words", message_id=mid))
    as_bob = await clients("plain", binding, version, bob)
    his = await as_bob.send(user_msg("same words", message_id=mid))
    assert his.id != mine.id and his.context_id != mine.context_id
    assert his.status.state is S.COMPLETED
    assert [t.id for t in (await as_bob.list()).tasks] == [his.id]
    ask_mine = await (await clients("ask", "JSONRPC", "1.0", alice)).send(user_msg("open", message_id=mid))
    with pytest.raises(TaskNotFoundError):
        await (await clients("ask", binding, version, bob)).send(
            user_msg("open", message_id=mid, task_id=ask_mine.id))
    assert (await (await clients("ask", "JSONRPC", "1.0", alice)).get(ask_mine.id)).status.state is S.INPUT_REQUIRED
