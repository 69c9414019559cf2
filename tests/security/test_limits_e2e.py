"""Rate, concurrency and input limits end to end: real servers, real API keys, every binding.

The issue: "Token buckets per principal and per agent, configured in parley.toml; responses carry the IETF
RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers); when exceeded, 429 with
Retry-After (gRPC RESOURCE_EXHAUSTED). Also limits on concurrent streams per principal and concurrent
running tasks per agent." Input limits: "history length, subscribers per task, with a precise error each".

Every server is a real uvicorn server on 127.0.0.1 (and its gRPC port) built by `Parley(settings=...)` with
`LimitSettings`, secured by API keys made in its own key store (the principal of a key is who is limited);
the last tests run `parley serve --config parley.toml` as a process. Nothing is mocked: the limiter is the
one the runtime builds from the settings (real clock, `running` = the engine's runs). To keep the real clock
out of the assertions the buckets refill slowly (1 request a minute), so nothing refills during a test.
Agents that must stay running wait on a gate the test opens; waits are bounded (WAIT) and only detect
failures, never pace the test.

Spec: A2A 1.0 section 3.3.2 (system errors: "rate limit exceeded", retry guidance such as Retry-After;
validation errors name the parameter), 5.4 / 9.5 / 10.6 / 11.6 (one error, mapped per binding: JSON-RPC
-31429 here, HTTP 429 with a google.rpc.Status + ErrorInfo RATE_LIMITED, gRPC RESOURCE_EXHAUSTED with the
ErrorInfo in grpc-status-details-bin), 3.1.2 / 3.1.6 (streams and subscriptions), 3.4 (multi-turn: a task
continued with its taskId), 7.4 (every request authenticated: the principal the buckets are keyed by).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents.base import RunContext, Status
from parley.app import Parley, Settings
from parley.protocol import models as m
from parley.protocol.operations import Operation
from parley.runtime import Runtime
from parley.settings import LimitSettings
from parley.tasks.store import TaskQuery
from support import Gate, LiveServer, free_port, grpc_error_reason, grpc_text_trailers, needs

from .secured import ENV, PARLEY, Sse, served, sf_item

try:  # the gRPC binding needs the parley-a2a[grpc] extra (installed by the dev extra)
    import grpc
    import grpc.aio

    from parley.grpc import a2a_pb2, a2a_pb2_grpc, convert

    HAVE_GRPC = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_GRPC = False

needs_grpc = needs("grpc", "grpc")

WAIT = 15.0  # the longest one observable step may take before a test fails; never a pacing delay
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
QUESTION = "Which colour?"


# --- gates: agents wait, the test opens --------------------------------------------------------------------------


class Gates:
    """Gates by name (the text of the message that makes an agent wait)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[str, Gate] = {}

    def __getitem__(self, name: str) -> Gate:
        with self._lock:
            return self._gates.setdefault(name, Gate())

    def open_all(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:
            gate.open()

    async def reached(self, name: str) -> None:
        assert await asyncio.to_thread(self[name].reached.wait, WAIT), f"no agent reached gate {name!r}"


# --- the server ----------------------------------------------------------------------------------------------


def limits_app(settings: Settings, gates: Gates) -> Parley:
    app = Parley(settings=settings)

    @app.agent(id="quick", description="Answers at once", default=True)
    async def quick(ctx: RunContext):
        yield f"quick: {ctx.text}"

    @app.agent(id="other", description="Answers at once")
    async def other(ctx: RunContext):
        yield f"other: {ctx.text}"

    @app.agent(id="held", description="Says it is working, waits for the gate its text names, then answers")
    async def held(ctx: RunContext):
        yield Status(m.TaskState.WORKING, "waiting")
        await gates[ctx.text].wait()
        yield f"done: {ctx.text}"

    @app.agent(id="work", description="'ask' asks a question and answers the reply; other texts wait on a gate")
    async def work(ctx: RunContext):
        if ctx.turn > 1:
            yield f"answer: {ctx.text}"
            return
        if ctx.text == "ask":
            yield ctx.ask(QUESTION)
            return
        await gates[ctx.text].wait()
        yield f"done: {ctx.text}"

    @app.agent(id="chat", description="Asks a question on every turn")
    async def chat(ctx: RunContext):
        yield ctx.ask(f"question {ctx.turn}")

    return app


@dataclass
class Srv:
    live: LiveServer
    runtime: Runtime
    gates: Gates
    grpc_port: int | None
    tokens: dict[str, str] = field(default_factory=dict)

    def url(self, agent: str) -> str:
        return f"{self.live.url}/a2a/{agent}"

    @property
    def grpc_target(self) -> str:
        assert self.grpc_port is not None
        return f"127.0.0.1:{self.grpc_port}"

    async def keys(self, *principals: str) -> None:
        """An API key (opening every agent) per principal, made before the first request, so the server is
        secured from its first request on."""
        for principal in principals:
            _, token = await self.runtime.keys.create("*", principal=principal, name=principal)
            self.tokens[principal] = token


@pytest.fixture
def start() -> Iterator[Callable[..., Srv]]:
    """Factory: `start(LimitSettings(...), grpc=False)` serves the test agents with those limits."""
    started: list[Srv] = []

    def go(limits: LimitSettings, *, grpc: bool = False) -> Srv:
        gates = Gates()
        port = free_port() if grpc and HAVE_GRPC else None
        app = limits_app(Settings(db="memory", grpc_port=port, limits=limits), gates)
        live = LiveServer(app).start()
        srv = Srv(live, live.server.config.app.state.parley, gates, port)
        started.append(srv)
        return srv

    yield go
    for srv in started:
        srv.gates.open_all()  # let every waiting agent finish so the server can stop
        srv.live.stop()


# --- the RateLimit fields (Structured Fields, RFC 9651) -----------------------------------------------------------


def policy_of(headers: Any) -> dict[str, int]:
    name, params = sf_item(headers.get("ratelimit-policy"))
    assert name == "default" and set(params) == {"q", "w"}, (name, params)
    return params


def state_of(headers: Any) -> dict[str, int]:
    name, params = sf_item(headers.get("ratelimit"))
    assert name == "default" and set(params) == {"r", "t"}, (name, params)
    return params


# --- requests ------------------------------------------------------------------------------------------------


def message(text: str, task_id: str | None = None, context_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        msg["taskId"] = task_id
    if context_id is not None:
        msg["contextId"] = context_id
    return msg


def headers_of(token: str, version: str | None = "1.0") -> dict[str, str]:
    return {"X-API-Key": token, **({"A2A-Version": version} if version else {})}


async def jsonrpc(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], token: str,
                  version: str | None = "1.0") -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await http.post(url, json=body, headers=headers_of(token, version))


async def send(http: httpx.AsyncClient, url: str, text: str, token: str, *, task_id: str | None = None,
               context_id: str | None = None, immediately: bool = False) -> httpx.Response:
    params: dict[str, Any] = {"message": message(text, task_id, context_id)}
    if immediately:
        params["configuration"] = {"returnImmediately": True}
    return await jsonrpc(http, url, "SendMessage", params, token)


def task_of(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, (resp.status_code, resp.text)
    body = resp.json()
    assert "result" in body, body
    return body["result"]["task"]


def rpc_error(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert "error" in body, (resp.status_code, body)
    return body["error"]


def reasons(details: list[dict[str, Any]] | None) -> list[str]:
    return [d.get("reason") for d in details or [] if d.get("@type") == ERROR_INFO]


def assert_rate_limited(resp: httpx.Response, binding: str = "JSONRPC", retry_after: str | None = None) -> str:
    """A refusal by a limit: 429 with Retry-After, the RATE_LIMITED reason (JSON-RPC -31429, or a
    google.rpc.Status body); returns its message."""
    assert resp.status_code == 429, (resp.status_code, resp.text)
    assert resp.headers.get("retry-after", "").isdigit(), resp.headers
    if retry_after is not None:
        assert resp.headers["retry-after"] == retry_after, resp.headers
    if binding == "JSONRPC":
        err = rpc_error(resp)
        assert err["code"] == -31429, err
        assert reasons(err.get("data")) == ["RATE_LIMITED"], err
    else:
        err = resp.json()["error"]
        assert (err["code"], err["status"]) == (429, "RESOURCE_EXHAUSTED"), err
        assert reasons(err.get("details")) == ["RATE_LIMITED"], err
    return err["message"]


@asynccontextmanager
async def sse_jsonrpc(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], token: str,
                      version: str | None = "1.0") -> AsyncIterator[httpx.Response]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.stream("POST", url, json=body, headers=headers_of(token, version)) as resp:
        yield resp


@asynccontextmanager
async def sse_rest(http: httpx.AsyncClient, method: str, url: str, token: str,
                   body: dict[str, Any] | None = None) -> AsyncIterator[httpx.Response]:
    async with http.stream(method, url, json=body, headers=headers_of(token)) as resp:
        yield resp


def payload(event: dict[str, Any]) -> dict[str, Any]:
    """The StreamResponse of an SSE event (JSON-RPC events wrap it in `result`)."""
    return event.get("result", event)


def final_state(events: list[dict[str, Any]]) -> str:
    last = payload(events[-1])
    return (last.get("statusUpdate") or last.get("task"))["status"]["state"]


# --- gRPC --------------------------------------------------------------------------------------------------------


@dataclass
class GrpcRefusal:
    code: Any
    message: str
    reason: str | None
    trailers: dict[str, str]


def grpc_refusal(exc: Any) -> GrpcRefusal:
    return GrpcRefusal(exc.code(), exc.details() or "", grpc_error_reason(exc), grpc_text_trailers(exc))


class Grpc:
    """A gRPC channel to a server, calling as one principal (its key in the `x-api-key` metadata)."""

    def __init__(self, srv: Srv, token: str) -> None:
        self.channel = grpc.aio.insecure_channel(srv.grpc_target)
        self.stub = a2a_pb2_grpc.A2AServiceStub(self.channel)
        self.metadata = [("a2a-version", "1.0"), ("x-api-key", token)]

    async def close(self) -> None:
        await self.channel.close()

    def _rpc(self, op: Operation) -> Any:
        return getattr(self.stub, convert.RPCS[op])

    async def unary(self, op: Operation, request: Any, agent: str) -> Any:
        return await self._rpc(op)(convert.encode_request(op, request, agent), metadata=self.metadata, timeout=WAIT)

    async def unary_trailers(self, op: Operation, request: Any, agent: str) -> dict[str, str]:
        """Call a unary `op` that must succeed; its trailing metadata."""
        call = self._rpc(op)(convert.encode_request(op, request, agent), metadata=self.metadata, timeout=WAIT)
        await call
        return {k: v for k, v in (await call.trailing_metadata() or ()) if isinstance(v, str)}

    async def refused(self, op: Operation, request: Any, agent: str) -> GrpcRefusal:
        """Call `op` (unary or streaming); it must fail before any event."""
        try:
            if op.streams:
                call = self._rpc(op)(convert.encode_request(op, request, agent), metadata=self.metadata)
                try:
                    first = await asyncio.wait_for(call.read(), WAIT)
                finally:
                    call.cancel()
                raise AssertionError(f"{convert.RPCS[op]} was served: {first}")
            result = await self.unary(op, request, agent)
            raise AssertionError(f"{convert.RPCS[op]} was served: {result}")
        except grpc.aio.AioRpcError as exc:
            return grpc_refusal(exc)

    async def open_stream(self, op: Operation, request: Any, agent: str) -> tuple[Any, Any]:
        """Start a streaming call and read its first event; (the call, that event)."""
        call = self._rpc(op)(convert.encode_request(op, request, agent), metadata=self.metadata)
        first = await asyncio.wait_for(call.read(), WAIT)
        assert first is not grpc.aio.EOF, "the stream ended before its first event"
        return call, first


def list_request() -> Any:
    return m.ListTasksRequest()


def stream_request(text: str) -> Any:
    return m.SendMessageRequest(message=m.Message(message_id=uuid.uuid4().hex, role=m.Role.USER,
                                                  parts=[m.Part(text=text)]))


# =================================================================================================================
# Request rate: token buckets per (agent, principal), with the RateLimit fields
# =================================================================================================================


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_successful_responses_carry_the_ratelimit_fields_and_r_counts_down_to_a_429(start, binding):
    """draft-ietf-httpapi-ratelimit-headers; A2A 3.3.2 / 5.4 / 9.5 / 11.6. One request a minute, burst 4:
    every successful response (send, get, list, get: every operation takes a token) carries
    `RateLimit-Policy: "default";q=4;w=240` (the bucket holds 4 and refills in 240 s) and `RateLimit:
    "default";r=<left>;t=<s>`, both valid Structured Field items; q and w stay put while r counts down 3, 2, 1,
    0 (t is within (0, 60]: one token accrues a minute). The fifth request is 429 with r=0, the same policy and
    Retry-After equal to the `t` of its RateLimit field; JSON-RPC says -31429 (RATE_LIMITED), HTTP+JSON a
    google.rpc.Status with ErrorInfo RATE_LIMITED. The refused send made no task."""
    srv = start(LimitSettings(requests_per_minute=1, burst=4))
    await srv.keys("p1")
    token, url = srv.tokens["p1"], srv.url("quick")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        if binding == "JSONRPC":
            first = await send(http, url, "one", token)
            task_id = task_of(first)["id"]
            later = [jsonrpc(http, url, "GetTask", {"id": task_id}, token),
                     jsonrpc(http, url, "ListTasks", {}, token),
                     jsonrpc(http, url, "GetTask", {"id": task_id, "historyLength": 1}, token)]
        else:
            first = await http.post(f"{url}/message:send", json={"message": message("one")}, headers=headers_of(token))
            assert first.status_code == 200, first.text
            task_id = first.json()["task"]["id"]
            later = [http.get(f"{url}/tasks/{task_id}", headers=headers_of(token)),
                     http.get(f"{url}/tasks", headers=headers_of(token)),
                     http.get(f"{url}/tasks/{task_id}?historyLength=1", headers=headers_of(token))]
        answers = [first]
        for pending in later:
            answers.append(await pending)
        remaining = []
        for resp in answers:
            assert resp.status_code == 200, resp.text
            assert "retry-after" not in resp.headers
            assert policy_of(resp.headers) == {"q": 4, "w": 240}
            state = state_of(resp.headers)
            assert 0 < state["t"] <= 60, state
            remaining.append(state["r"])
        assert remaining == [3, 2, 1, 0]

        if binding == "JSONRPC":
            refused = await send(http, url, "five", token)
        else:
            refused = await http.post(f"{url}/message:send", json={"message": message("five")},
                                      headers=headers_of(token))
        assert_rate_limited(refused, binding)
        assert policy_of(refused.headers) == {"q": 4, "w": 240}
        state = state_of(refused.headers)
        assert state["r"] == 0 and 0 < state["t"] <= 60, state
        assert refused.headers["retry-after"] == str(state["t"]), "Retry-After must equal the t of RateLimit"
    page = await srv.runtime.store.list(TaskQuery(agent_id="quick", owner="p1"))  # the memory store's list never awaits
    assert [r.task.id for r in page.records] == [task_id], "the refused send must not make a task"


@needs_grpc
async def test_grpc_refuses_with_resource_exhausted_and_retry_after_trailing_metadata(start):
    """A2A 10.6 / 5.4: over gRPC the request after the burst (2) is RESOURCE_EXHAUSTED with the ErrorInfo
    reason RATE_LIMITED in grpc-status-details-bin, and the transport fields travel as trailing metadata:
    `retry-after` equal to the `t` of the `ratelimit` entry, and `ratelimit-policy: "default";q=2;w=120`.
    The bucket is the principal's on that agent whatever the binding (JSON-RPC is refused too), and another
    principal is served over gRPC."""
    srv = start(LimitSettings(requests_per_minute=1, burst=2), grpc=True)
    await srv.keys("p1", "p2")
    p1, p2 = Grpc(srv, srv.tokens["p1"]), Grpc(srv, srv.tokens["p2"])
    try:
        for left in (1, 0):  # successful calls carry the bucket's state too, as trailing metadata
            trailers = await p1.unary_trailers(Operation.LIST, list_request(), "quick")
            assert policy_of(trailers) == {"q": 2, "w": 120} and state_of(trailers)["r"] == left, trailers
        refusal = await p1.refused(Operation.LIST, list_request(), "quick")
        assert refusal.code is grpc.StatusCode.RESOURCE_EXHAUSTED, refusal
        assert refusal.reason == "RATE_LIMITED", refusal
        state = state_of(refusal.trailers)
        assert state["r"] == 0 and 0 < state["t"] <= 60, refusal.trailers
        assert refusal.trailers.get("retry-after") == str(state["t"]), refusal.trailers
        assert policy_of(refusal.trailers) == {"q": 2, "w": 120}
        stream = await p1.refused(Operation.STREAM, stream_request("a stream"), "quick")
        assert stream.code is grpc.StatusCode.RESOURCE_EXHAUSTED and "retry-after" in stream.trailers, stream

        async with httpx.AsyncClient(timeout=WAIT) as http:
            assert_rate_limited(await jsonrpc(http, srv.url("quick"), "ListTasks", {}, srv.tokens["p1"]))
        await p2.unary(Operation.LIST, list_request(), "quick")
    finally:
        await p1.close()
        await p2.close()


async def test_buckets_are_per_principal_and_per_agent(start):
    """Buckets are keyed by (agent, principal): p1 spends her burst (2) on `quick` and is refused; p2's first
    request there is served from a full bucket (r=1); p1's bucket on `other` is untouched (r=1), and p1 stays
    refused on `quick`."""
    srv = start(LimitSettings(requests_per_minute=1, burst=2))
    await srv.keys("p1", "p2")
    p1, p2 = srv.tokens["p1"], srv.tokens["p2"]
    async with httpx.AsyncClient(timeout=WAIT) as http:
        codes = [(await jsonrpc(http, srv.url("quick"), "ListTasks", {}, p1)).status_code for _ in range(2)]
        assert codes == [200, 200]
        assert_rate_limited(await jsonrpc(http, srv.url("quick"), "ListTasks", {}, p1))

        theirs = await jsonrpc(http, srv.url("quick"), "ListTasks", {}, p2)
        assert theirs.status_code == 200, theirs.text
        assert state_of(theirs.headers)["r"] == 1

        elsewhere = await jsonrpc(http, srv.url("other"), "ListTasks", {}, p1)
        assert elsewhere.status_code == 200, elsewhere.text
        assert state_of(elsewhere.headers)["r"] == 1

        assert_rate_limited(await jsonrpc(http, srv.url("quick"), "ListTasks", {}, p1))


async def test_a_per_agent_override_applies_to_that_agent_only(start):
    """`[server.limits.agents.<id>]` (LimitSettings.agents): the server allows a burst of 5, the `other` agent's
    override a burst of 2. `other` announces q=2;w=120 and refuses p1's third request; `quick` (no override)
    announces q=5;w=300 and serves five requests of the same principal before refusing the sixth."""
    srv = start(LimitSettings(requests_per_minute=1, burst=5,
                              agents={"other": LimitSettings(requests_per_minute=1, burst=2)}))
    await srv.keys("p1")
    token = srv.tokens["p1"]
    async with httpx.AsyncClient(timeout=WAIT) as http:
        for left in (1, 0):
            resp = await jsonrpc(http, srv.url("other"), "ListTasks", {}, token)
            assert resp.status_code == 200, resp.text
            assert policy_of(resp.headers) == {"q": 2, "w": 120}
            assert state_of(resp.headers)["r"] == left
        refused = await jsonrpc(http, srv.url("other"), "ListTasks", {}, token)
        assert_rate_limited(refused)
        assert policy_of(refused.headers) == {"q": 2, "w": 120}

        for left in (4, 3, 2, 1, 0):
            resp = await jsonrpc(http, srv.url("quick"), "ListTasks", {}, token)
            assert resp.status_code == 200, resp.text
            assert policy_of(resp.headers) == {"q": 5, "w": 300}
            assert state_of(resp.headers)["r"] == left
        assert_rate_limited(await jsonrpc(http, srv.url("quick"), "ListTasks", {}, token))


# =================================================================================================================
# Concurrency: streams per principal, running tasks per agent
# =================================================================================================================


async def test_streams_per_principal_refuses_the_stream_over_the_limit_and_a_freed_slot_is_reused(start):
    """streams_per_principal=2, over every agent and binding. p1 holds two streams open (a JSON-RPC
    SendStreamingMessage and an HTTP+JSON message:stream, each to an agent waiting on its gate). Her third
    stream is refused: JSON-RPC SendStreamingMessage and SubscribeToTask are 429 (Retry-After, -31429, a message
    saying so), gRPC SendStreamingMessage is RESOURCE_EXHAUSTED with retry-after metadata. Her unary calls are
    served, and p2's stream is served. When one of her streams ends (its task completes), a new stream of hers
    is accepted; with that one held open, the next is refused again (exactly one slot was freed)."""
    srv = start(LimitSettings(streams_per_principal=2), grpc=True)
    await srv.keys("p1", "p2")
    p1, p2 = srv.tokens["p1"], srv.tokens["p2"]
    held, quick = srv.url("held"), srv.url("quick")
    async with (
        httpx.AsyncClient(timeout=WAIT) as http,
        sse_jsonrpc(http, held, "SendStreamingMessage", {"message": message("s-1")}, p1) as r1,
        sse_rest(http, "POST", f"{held}/message:stream", p1, {"message": message("s-2")}) as r2,
    ):
        assert (r1.status_code, r2.status_code) == (200, 200)
        s1, s2 = Sse(r1), Sse(r2)
        first = payload(await s1.next() or {})
        assert "task" in first, first
        assert "task" in payload(await s2.next() or {})
        await srv.gates.reached("s-1")
        await srv.gates.reached("s-2")

        third = await jsonrpc(http, quick, "SendStreamingMessage", {"message": message("s-3")}, p1)
        msg = assert_rate_limited(third, retry_after="1")
        assert "streams" in msg and "2" in msg, msg
        sub = await jsonrpc(http, held, "SubscribeToTask", {"id": first["task"]["id"]}, p1)
        assert_rate_limited(sub)
        if HAVE_GRPC:
            g1 = Grpc(srv, p1)
            try:
                refusal = await g1.refused(Operation.STREAM, stream_request("s-grpc"), "quick")
            finally:
                await g1.close()
            assert refusal.code is grpc.StatusCode.RESOURCE_EXHAUSTED, refusal
            assert refusal.reason == "RATE_LIMITED" and refusal.trailers.get("retry-after") == "1", refusal

        unary = await send(http, quick, "unary is fine", p1)
        assert task_of(unary)["status"]["state"] == "TASK_STATE_COMPLETED"
        async with sse_jsonrpc(http, quick, "SendStreamingMessage", {"message": message("p2")}, p2) as theirs:
            assert theirs.status_code == 200
            assert final_state(await Sse(theirs).rest()) == "TASK_STATE_COMPLETED"

        srv.gates["s-1"].open()
        events = await s1.rest()  # until the server closes the stream: the slot is given back by then
        assert final_state(events) == "TASK_STATE_COMPLETED"

        async with sse_jsonrpc(http, quick, "SendStreamingMessage", {"message": message("again")}, p1) as r:
            assert r.status_code == 200, (await r.aread())
            assert final_state(await Sse(r).rest()) == "TASK_STATE_COMPLETED"
        async with sse_jsonrpc(http, held, "SendStreamingMessage", {"message": message("s-4")}, p1) as r4:
            assert r4.status_code == 200
            s4 = Sse(r4)
            assert await s4.next() is not None
            over = await jsonrpc(http, quick, "SendStreamingMessage", {"message": message("s-5")}, p1)
            assert_rate_limited(over)
            srv.gates["s-4"].open()
            assert final_state(await s4.rest()) == "TASK_STATE_COMPLETED"
        srv.gates["s-2"].open()
        assert final_state(await s2.rest()) == "TASK_STATE_COMPLETED"


async def test_tasks_per_agent_refuses_new_tasks_but_not_a_conversation_in_progress(start):
    """tasks_per_agent=2 (A2A 3.4: a task is continued by a message naming its taskId). p1 has a task waiting
    for input on `work`, and starts two tasks there that keep running (their agent waits on a gate). A new task
    on `work` is then refused, whoever asks and however (SendMessage and SendStreamingMessage over JSON-RPC,
    message:send over HTTP+JSON: 429, Retry-After, a message naming the agent and the limit) and leaves no task
    behind; another agent is not limited by it. The answer continuing the input-required task is accepted and
    completes. Once one running task completes, a new task is accepted again."""
    srv = start(LimitSettings(tasks_per_agent=2, tasks_per_principal=2))  # the pool alone (p1 may fill it)
    await srv.keys("p1", "p2")
    p1, p2 = srv.tokens["p1"], srv.tokens["p2"]
    work = srv.url("work")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        asked = task_of(await send(http, work, "ask", p1))
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        running = []
        for name in ("hold-1", "hold-2"):
            running.append(task_of(await send(http, work, name, p1, immediately=True)))
            await srv.gates.reached(name)
        assert srv.runtime.engine.running("work") == 2

        msg = assert_rate_limited(await send(http, work, "hold-3", p2), retry_after="1")
        assert "'work'" in msg and "2" in msg, msg
        assert_rate_limited(await jsonrpc(http, work, "SendStreamingMessage", {"message": message("hold-3")}, p2))
        assert_rate_limited(await http.post(f"{work}/message:send", json={"message": message("hold-3")},
                                            headers=headers_of(p2)), "HTTP+JSON")
        assert_rate_limited(await send(http, work, "ask", p1))  # p1 too: the limit is the agent's, not a caller's
        listed = await jsonrpc(http, work, "ListTasks", {}, p2)
        assert listed.status_code == 200 and listed.json()["result"]["tasks"] == [], listed.text
        elsewhere = task_of(await send(http, srv.url("quick"), "not limited here", p2))
        assert elsewhere["status"]["state"] == "TASK_STATE_COMPLETED"

        answered = task_of(await send(http, work, "blue", p1, task_id=asked["id"]))
        assert answered["id"] == asked["id"]
        assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
        assert "answer: blue" in json.dumps(answered["artifacts"])

        async with sse_jsonrpc(http, work, "SubscribeToTask", {"id": running[0]["id"]}, p1) as sub:
            assert sub.status_code == 200
            events = Sse(sub)
            assert await events.next() is not None
            srv.gates["hold-1"].open()
            assert final_state(await events.rest()) == "TASK_STATE_COMPLETED"
        again = task_of(await send(http, work, "ask", p2))
        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_one_principal_fills_only_its_share_of_the_agents_tasks(start):
    """Issue 28 item 9: tasks_per_agent=4 leaves one principal half (tasks_per_principal defaults to 2). p1
    starts two tasks that keep running; its third new task is refused (429, Retry-After, a message naming its
    share), and leaves no task behind; p2 still starts tasks on the same agent. Once one of p1's tasks has
    finished, p1 starts again. A2A 3.3.2 (429 with Retry-After for a client over a limit)."""
    srv = start(LimitSettings(tasks_per_agent=4))
    await srv.keys("p1", "p2")
    p1, p2 = srv.tokens["p1"], srv.tokens["p2"]
    work = srv.url("work")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        mine = []
        for name in ("hold-a", "hold-b"):
            mine.append(task_of(await send(http, work, name, p1, immediately=True)))
            await srv.gates.reached(name)
        msg = assert_rate_limited(await send(http, work, "hold-x", p1, immediately=True), retry_after="1")
        assert msg == ("You are running as many tasks on agent 'work' as one caller may (2 of its 4); "
                       "retry when one of them has finished"), msg
        listed = await jsonrpc(http, work, "ListTasks", {}, p1)
        assert len(listed.json()["result"]["tasks"]) == 2, listed.text

        theirs = task_of(await send(http, work, "hold-c", p2, immediately=True))  # p2 is not held back
        await srv.gates.reached("hold-c")
        assert theirs["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")

        async with sse_jsonrpc(http, work, "SubscribeToTask", {"id": mine[0]["id"]}, p1) as sub:
            events = Sse(sub)
            assert await events.next() is not None
            srv.gates["hold-a"].open()
            assert final_state(await events.rest()) == "TASK_STATE_COMPLETED"
        again = task_of(await send(http, work, "hold-d", p1, immediately=True))
        assert again["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")


# =================================================================================================================
# Input limits: subscribers per task, history length
# =================================================================================================================


@needs_grpc
async def test_max_subscribers_per_task_refuses_the_next_subscriber_naming_the_setting(start):
    """max_subscribers_per_task=2 (A2A 3.1.6): one task followed by a JSON-RPC 1.0 SubscribeToTask stream and a
    JSON-RPC 0.3 tasks/resubscribe stream. A third subscriber is refused, over every binding, before any event:
    JSON-RPC 429 (-31429) and HTTP+JSON 429 with a message naming the task and
    `limits.max_subscribers_per_task`, gRPC SubscribeToTask RESOURCE_EXHAUSTED with the same message. Another
    task can still be followed. When the client closes one subscription, the server frees its place (a bounded
    wait for the server's count), a new (gRPC) subscriber is accepted, and the one after it is refused again;
    when the task completes, every remaining subscriber sees the end."""
    srv = start(LimitSettings(max_subscribers_per_task=2), grpc=True)
    await srv.keys("p1")
    token, held = srv.tokens["p1"], srv.url("held")
    setting = "limits.max_subscribers_per_task"
    counts = srv.runtime.service.subscribers.counts
    g = Grpc(srv, token)
    try:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            task_id = task_of(await send(http, held, "sub", token, immediately=True))["id"]
            other_id = task_of(await send(http, held, "sub-other", token, immediately=True))["id"]
            await srv.gates.reached("sub")
            async with sse_jsonrpc(http, held, "tasks/resubscribe", {"id": task_id}, token, version=None) as r2:
                assert r2.status_code == 200, await r2.aread()
                s2 = Sse(r2)
                assert payload(await s2.next() or {}).get("id") == task_id
                async with sse_jsonrpc(http, held, "SubscribeToTask", {"id": task_id}, token) as r1:
                    assert r1.status_code == 200, await r1.aread()
                    s1 = Sse(r1)  # kept: dropping the reader would close the connection (a subscriber less)
                    assert payload(await s1.next() or {})["task"]["id"] == task_id

                    msg = assert_rate_limited(await jsonrpc(http, held, "SubscribeToTask", {"id": task_id}, token))
                    assert setting in msg and task_id in msg, msg
                    async with sse_rest(http, "GET", f"{held}/tasks/{task_id}:subscribe", token) as rest:
                        assert rest.status_code == 429, f"a third subscriber was served over HTTP+JSON: {rest}"
                        await rest.aread()
                    msg = assert_rate_limited(rest, "HTTP+JSON")
                    assert setting in msg and task_id in msg, msg
                    refusal = await g.refused(Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=task_id), "held")
                    assert refusal.code is grpc.StatusCode.RESOURCE_EXHAUSTED, refusal
                    assert setting in refusal.message and task_id in refusal.message, refusal

                    async with sse_jsonrpc(http, held, "SubscribeToTask", {"id": other_id}, token) as elsewhere:
                        assert elsewhere.status_code == 200, await elsewhere.aread()
                        other_reader = Sse(elsewhere)
                        assert await other_reader.next() is not None
                        assert counts.get(task_id) == 2, dict(counts)  # both subscribers still open
                # the client closed the SubscribeToTask stream: the server notices the disconnect on its own
                deadline = time.monotonic() + WAIT
                while counts.get(task_id, 0) != 1:
                    assert time.monotonic() < deadline, f"the closed subscription still counts: {dict(counts)}"
                    await asyncio.sleep(0.01)  # polling interval of a bounded wait, not a synchronisation
                call, first = await g.open_stream(Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=task_id), "held")
                assert first.WhichOneof("payload") == "task", first
                again = await jsonrpc(http, held, "SubscribeToTask", {"id": task_id}, token)
                assert setting in assert_rate_limited(again)

                srv.gates["sub"].open()
                last = payload((await s2.rest())[-1])  # A2A 0.3: the event itself, with `kind` and 0.3 states
                assert (last.get("kind"), last["status"]["state"], last.get("final")) == ("status-update",
                                                                                          "completed", True), last

                async def rest_of_grpc() -> list[Any]:
                    events = []
                    while (event := await call.read()) is not grpc.aio.EOF:
                        events.append(event)
                    return events

                grpc_events = await asyncio.wait_for(rest_of_grpc(), WAIT)
                assert grpc_events, "the gRPC subscription ended without an event"
                final = grpc_events[-1].status_update.status.state
                assert a2a_pb2.TaskState.Name(final) == "TASK_STATE_COMPLETED", grpc_events[-1]
    finally:
        await g.close()


async def test_max_history_length_refuses_the_next_message_and_leaves_the_task_unchanged(start):
    """max_history_length=5 (A2A 3.3.2 validation error, -32602 / HTTP 400): a task of `chat` (which asks a
    question every turn) holds 1, 3, then 5 messages (each turn adds the agent's question and the reply). The
    next message is refused with -32602 naming the task, its 5 messages and `limits.max_history_length` (also
    over HTTP+JSON: 400 INVALID_PARAMS), and the task is exactly as before (GetTask compares equal, the refused
    message is not in it, it still waits for input). As the message advises, a new task in the same context is
    accepted."""
    srv = start(LimitSettings(max_history_length=5))
    await srv.keys("p1")
    token, chat = srv.tokens["p1"], srv.url("chat")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        task = task_of(await send(http, chat, "turn 1", token))
        sizes = [len(task["history"])]
        for turn in (2, 3):
            task = task_of(await send(http, chat, f"turn {turn}", token, task_id=task["id"]))
            sizes.append(len(task["history"]))
        assert sizes == [1, 3, 5]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        before = await jsonrpc(http, chat, "GetTask", {"id": task["id"]}, token)
        assert before.status_code == 200

        refused_msg = message("turn 4", task["id"])
        resp = await jsonrpc(http, chat, "SendMessage", {"message": refused_msg}, token)
        err = rpc_error(resp)
        assert err["code"] == -32602, err
        assert reasons(err.get("data")) == ["INVALID_PARAMS"], err
        assert "limits.max_history_length" in err["message"] and task["id"] in err["message"], err
        assert re.search(r"\b5 messages\b", err["message"]), err

        rest = await http.post(f"{chat}/message:send", json={"message": message("turn 4 (rest)", task["id"])},
                               headers=headers_of(token))
        assert rest.status_code == 400, rest.text
        assert "limits.max_history_length" in rest.json()["error"]["message"]
        assert reasons(rest.json()["error"]["details"]) == ["INVALID_PARAMS"]

        after = await jsonrpc(http, chat, "GetTask", {"id": task["id"]}, token)
        assert after.json() == before.json(), "a refused message must leave the task unchanged"
        assert refused_msg["messageId"] not in after.text
        assert after.json()["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        fresh = task_of(await send(http, chat, "carry on", token, context_id=task["contextId"]))
        assert fresh["id"] != task["id"] and fresh["contextId"] == task["contextId"]


async def test_a_task_never_holds_more_than_max_history_length_messages(start):
    """max_history_length is "messages a task may hold" (src/parley/settings.py, docs/security.md) and "a
    message that would go over it is refused" (TaskEngine). With a limit of 4, `chat` takes its task to 1, then
    3 messages; a reply now would add the pending question and the reply (5 > 4), so it must be refused with
    -32602 naming limits.max_history_length; in no case may the task end up holding more than 4 messages."""
    srv = start(LimitSettings(max_history_length=4))
    await srv.keys("p1")
    token, chat = srv.tokens["p1"], srv.url("chat")
    async with httpx.AsyncClient(timeout=WAIT) as http:
        task = task_of(await send(http, chat, "turn 1", token))
        task = task_of(await send(http, chat, "turn 2", token, task_id=task["id"]))
        assert len(task["history"]) == 3
        resp = await send(http, chat, "turn 3", token, task_id=task["id"])
        body = resp.json()
        if "result" in body:
            held = len(body["result"]["task"]["history"])
            pytest.fail(f"the message was accepted and the task now holds {held} messages, over the limit of 4")
        assert body["error"]["code"] == -32602 and "limits.max_history_length" in body["error"]["message"], body
        got = await jsonrpc(http, chat, "GetTask", {"id": task["id"]}, token)
        assert len(got.json()["result"]["history"]) <= 4


# =================================================================================================================
# parley.toml: `parley serve --config` enforces [server.limits] and [server.limits.agents.<id>]
# =================================================================================================================


def write_config(path: Path, agents_table: str) -> Path:
    path.write_text(
        '[server]\nbuiltin_agents = true\ndb = "memory"\n\n'
        "[server.limits]\nrequests_per_minute = 1\nburst = 5\n\n"
        f"[server.limits.agents.{agents_table}]\nrequests_per_minute = 1\nburst = 2\n",
        encoding="utf-8")
    return path


def test_parley_serve_config_enforces_a_per_agent_limit_from_the_file(tmp_path: Path):
    """`parley serve --config parley.toml` (a real process; open on loopback, so every caller is the anonymous
    principal): `[server.limits]` gives a burst of 5, `[server.limits.agents.interviewer]` a burst of 2.
    `interviewer` announces q=2;w=120 and refuses the third request (429, Retry-After = t, -31429); `echo`
    announces q=5;w=300 and serves the same caller's requests."""
    config = write_config(tmp_path / "parley.toml", "interviewer")
    with served("--config", str(config), cwd=tmp_path) as srv, httpx.Client(timeout=WAIT) as http:
        def call(agent: str) -> httpx.Response:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
            return http.post(srv.agent_url(agent), json=body, headers={"A2A-Version": "1.0"})

        for left in (1, 0):
            resp = call("interviewer")
            assert resp.status_code == 200, resp.text
            assert policy_of(resp.headers) == {"q": 2, "w": 120}
            assert state_of(resp.headers)["r"] == left
        refused = call("interviewer")
        assert_rate_limited(refused)
        assert refused.headers["retry-after"] == str(state_of(refused.headers)["t"])
        for left in (4, 3, 2):
            resp = call("echo")
            assert resp.status_code == 200, resp.text
            assert policy_of(resp.headers) == {"q": 5, "w": 300}
            assert state_of(resp.headers)["r"] == left


def serve_config(config: Path) -> subprocess.CompletedProcess[str]:
    """`parley serve --config CONFIG` expected to refuse to start (a server that starts fails the test)."""
    try:
        return subprocess.run([*PARLEY, "serve", "--config", str(config), "--port", str(free_port())],
                              check=False, capture_output=True, text=True, env=ENV, cwd=config.parent, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("parley serve started with a limits table for an agent that does not exist")


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    return lines[0]


def test_a_limits_table_naming_no_agent_is_refused_naming_it(tmp_path: Path):
    """A `[server.limits.agents.nosuch]` table names no agent of the file: `parley serve --config` does not
    start; it exits non-zero with one `error:` line, no traceback, naming `nosuch`, the setting
    (`limits.agents`) and the agents there are."""
    line = error_line(serve_config(write_config(tmp_path / "parley.toml", "nosuch")))
    assert "nosuch" in line and "limits.agents" in line, line
    assert "echo" in line and "interviewer" in line, line


def test_a_limits_table_naming_no_agent_is_reported_like_every_config_error(tmp_path: Path):
    """README ("An invalid config stops `parley serve` with one line naming the file, the key and the reason")
    and src/parley/hub/config.py (ConfigError: "<file>: <key>: <reason>", as for a route or delegation naming
    an undeclared agent): the refusal of `[server.limits.agents.nosuch]` names the config file and the key
    `server.limits.agents.nosuch`."""
    config = write_config(tmp_path / "parley.toml", "nosuch")
    line = error_line(serve_config(config))
    assert str(config) in line, f"the error does not name the config file: {line}"
    assert "server.limits.agents.nosuch" in line, f"the error does not name the key: {line}"
