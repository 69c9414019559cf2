"""Shared helpers of the cross-binding server tests (subscriptions, message identity, busy agents,
the access pipeline): live servers that also serve gRPC, Parley clients per (binding, version),
stream readers with bounded waits, and a comparable view of stream events.

Everything talks to a real uvicorn server on 127.0.0.1 (HTTP) and the gRPC port its lifespan
opens (`Settings.grpc_port`, what `parley serve --grpc-port` does). Test agents run on the
server's event loop, in the server thread; tests control them with :class:`srvkit.Gate`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from parley.app import Parley
from parley.client import A2AClient
from parley.client.jsonrpc import StreamItem
from parley.protocol import models as m
from parley.protocol.operations import Operation
from parley.protocol.states import is_terminal
from support import LiveServer, available, free_port, in_ci, needs, require

# The gRPC binding needs the parley-a2a[grpc] extra (installed by the dev extra): without it the gRPC pair is
# skipped, and fails under CI=true (see support.needs).
GRPC_CLIENT = "parley.client.grpc"
HAVE_GRPC = available(GRPC_CLIENT)

WAIT = 15.0  # the longest a single observable step may take before the test fails; never a pacing delay
USER_HEADER = "X-Test-User"
USER_METADATA = "x-test-user"

# Every (binding, version) pair Parley serves.
PAIRS: list[tuple[str, str]] = [
    ("JSONRPC", "1.0"),
    ("JSONRPC", "0.3"),
    ("HTTP+JSON", "1.0"),
    ("HTTP+JSON", "0.3"),
    ("GRPC", "1.0"),
]
PAIR_IDS = [f"{b}-{v}" for b, v in PAIRS]


def pair_params() -> list[Any]:
    """PAIRS as pytest params; the gRPC one needs the parley-a2a[grpc] extra (skipped without it, failed under
    CI=true)."""
    marks = {"GRPC": [needs(GRPC_CLIENT, "grpc")]}
    return [pytest.param(b, v, id=f"{b}-{v}", marks=marks.get(b, [])) for b, v in PAIRS]


def served_pairs() -> list[tuple[str, str]]:
    """The pairs a test that goes over every binding in turn covers: the gRPC one only with the extra, except under
    CI=true, where it is always there (and :func:`connect` fails without the extra)."""
    return [(b, v) for b, v in PAIRS if b != "GRPC" or HAVE_GRPC or in_ci()]


# --- live servers ---------------------------------------------------------------------------------


@dataclass
class Server:
    """A live Parley server: HTTP at `url`, gRPC at `grpc_target`."""

    live: LiveServer
    grpc_port: int | None
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every HTTP request

    @property
    def url(self) -> str:
        return self.live.url

    @property
    def grpc_target(self) -> str:
        assert self.grpc_port is not None, "this server does not serve gRPC"
        return f"127.0.0.1:{self.grpc_port}"

    def agent_url(self, agent_id: str) -> str:
        return f"{self.live.url}/a2a/{agent_id}"

    def stop(self) -> None:
        self.live.stop()


class CountRequests:
    """ASGI middleware: records (method, path) of every HTTP request that reaches the app."""

    def __init__(self, inner: Any, seen: list[tuple[str, str]]) -> None:
        self.inner = inner
        self.seen = seen
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # `.state` etc. of the wrapped Starlette app
        return getattr(self.inner, name)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            with self.lock:
                self.seen.append((scope["method"], scope["path"]))
        await self.inner(scope, receive, send)


def start(app: Parley, *, grpc: bool = True, self_url: bool = False, **access: Any) -> Server:
    """Serve `app` on 127.0.0.1 (and gRPC on a port of its own); `access` goes to `Parley.asgi`."""
    port = free_port() if grpc and HAVE_GRPC else None
    if port is not None:
        app.settings.grpc_port = port
    seen: list[tuple[str, str]] = []
    build = app.asgi

    def asgi(settings: Any = None) -> Any:
        return CountRequests(build(settings, **access), seen)

    app.asgi = asgi  # type: ignore[method-assign]
    live = LiveServer(app, self_url=self_url).start()
    return Server(live, port, seen)


# --- clients ----------------------------------------------------------------------------------------


async def connect(srv: Server, agent_id: str, binding: str, version: str, *, user: str | None = None) -> A2AClient:
    """A Parley client for one agent over (binding, version), as `user` (header / gRPC metadata) if given."""
    if binding == "GRPC":
        transport = require(GRPC_CLIENT, "grpc").GrpcTransport
        metadata = [(USER_METADATA, user)] if user is not None else None
        return A2AClient(transport(None, srv.grpc_target, "1.0", tenant=agent_id, metadata=metadata))
    headers = {USER_HEADER: user} if user is not None else None
    client = await A2AClient.connect(srv.agent_url(agent_id), bindings=[binding], version=version, headers=headers)
    assert (client.binding, client.version) == (binding, version)
    return client


@asynccontextmanager
async def clients_of(srv: Server) -> AsyncIterator[Callable[..., Awaitable[A2AClient]]]:
    """A factory for the block: `await make(agent, binding, version, user=None)` is :func:`connect`; every client
    made is closed when the block ends."""
    made: list[A2AClient] = []

    async def make(agent: str, binding: str, version: str, *, user: str | None = None) -> A2AClient:
        client = await connect(srv, agent, binding, version, user=user)
        made.append(client)
        return client

    try:
        yield make
    finally:
        for client in made:
            await client.close()


def user_msg(text: str, *, message_id: str, task_id: str | None = None,
             context_id: str | None = None) -> m.Message:
    """A user message with a chosen messageId (a fresh object each time: the client fills in ids)."""
    return m.Message(message_id=message_id, role=m.Role.USER, parts=[m.Part(text=text)], task_id=task_id,
                     context_id=context_id)


class Reader:
    """A stream of a transport read one event at a time, each read bounded by WAIT."""

    def __init__(self, stream: AsyncIterator[StreamItem]) -> None:
        self.stream = stream
        self.items: list[StreamItem] = []
        self.ended = False

    @classmethod
    def subscribe(cls, client: A2AClient, task_id: str, last_event_id: str | None = None) -> Reader:
        """SubscribeToTask / tasks/resubscribe over the client's transport (no client-side resuming)."""
        return cls(client.transport.stream(Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=task_id), last_event_id))

    async def next(self) -> StreamItem | None:
        """The next event, or None once the server closed the stream."""
        assert not self.ended, "the stream already ended"
        try:
            item = await asyncio.wait_for(self.stream.__anext__(), WAIT)
        except StopAsyncIteration:
            self.ended = True
            return None
        except TimeoutError:
            raise AssertionError(f"no event within {WAIT}s; got {[view(i.event) for i in self.items]}") from None
        self.items.append(item)
        return item

    async def until(self, pred: Callable[[Any], bool]) -> list[StreamItem]:
        """Items up to and including the first whose event matches `pred` (the stream must not end first)."""
        out = []
        while True:
            item = await self.next()
            assert item is not None, (f"the stream closed before the awaited event; "
                                      f"got {[view(i.event) for i in self.items]}")
            out.append(item)
            if pred(item.event):
                return out

    async def rest(self) -> list[StreamItem]:
        """Every item until the server closes the stream."""
        out = []
        while (item := await self.next()) is not None:
            out.append(item)
        return out

    async def close(self) -> None:
        await self.stream.aclose()  # type: ignore[attr-defined]

    @property
    def events(self) -> list[Any]:
        return [i.event for i in self.items]


# --- looking at events -----------------------------------------------------------------------------


def text_of(parts: list[m.Part] | None) -> str:
    return "".join(p.text or "" for p in parts or [])


def msg_text(msg: m.Message | None) -> str:
    return text_of(msg.parts) if msg is not None else ""


def view(ev: Any) -> tuple:
    """A binding-independent view of a stream event (0.3 and 1.0 decode to the same view)."""
    if isinstance(ev, m.Task):
        return ("task", ev.id, ev.status.state, msg_text(ev.status.message))
    if isinstance(ev, m.TaskStatusUpdateEvent):
        return ("status", ev.task_id, ev.status.state, msg_text(ev.status.message))
    if isinstance(ev, m.TaskArtifactUpdateEvent):
        return ("artifact", ev.task_id, ev.artifact.artifact_id, text_of(ev.artifact.parts), bool(ev.append),
                bool(ev.last_chunk))
    return ("message", msg_text(ev))


def is_status(ev: Any, state: m.TaskState | None = None, text: str | None = None) -> bool:
    if not isinstance(ev, m.TaskStatusUpdateEvent):
        return False
    return (state is None or ev.status.state is state) and (text is None or msg_text(ev.status.message) == text)


def is_final(ev: Any) -> bool:
    return isinstance(ev, m.TaskStatusUpdateEvent) and is_terminal(ev.status.state)


def states(events: list[Any]) -> list[m.TaskState]:
    return [ev.status.state for ev in events if isinstance(ev, m.TaskStatusUpdateEvent)]


def artifact_texts(events: list[Any]) -> list[str]:
    return [text_of(ev.artifact.parts) for ev in events if isinstance(ev, m.TaskArtifactUpdateEvent)]


def task_text(task: m.Task) -> str:
    return "".join(text_of(a.parts) for a in task.artifacts or [])


async def reached(gate: Any) -> None:
    """Wait (without blocking the test's loop) until an agent waits at a srvkit Gate."""
    ok = await asyncio.to_thread(gate.reached.wait, WAIT)
    assert ok, "the agent never reached its gate"


async def http_get(url: str, **kw: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        return await http.get(url, **kw)


__all__ = [
    "GRPC_CLIENT", "HAVE_GRPC", "PAIRS", "PAIR_IDS", "USER_HEADER", "USER_METADATA", "WAIT", "CountRequests", "Reader",
    "Server", "artifact_texts", "connect", "http_get", "is_final", "is_status", "msg_text", "pair_params", "reached",
    "served_pairs", "start", "states", "task_text", "text_of", "user_msg", "view",
]
