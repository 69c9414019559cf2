"""Shared helpers for the interop tests: official a2a-sdk clients against a live Parley.

Kept out of a `conftest.py` on purpose: `tests/conftest.py` is imported as the
top-level module `conftest` (test modules do `from conftest import rpc`), and a
second `conftest.py` here would replace it in `sys.modules`.

Everything here is about the a2a-sdk 1.3 client (flavours "1.0" and "0.3-compat")
and about the Parley apps the tests serve. The a2a-sdk 0.3.26 client runs in its
own virtualenv through `sdk03_driver.py`; see `test_interop_sdk03.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard, StreamResponse
from a2a.utils.constants import TransportProtocol

from parley.agents.base import ArtifactChunk, RunContext
from parley.app import Parley, Settings
from parley.protocol import models as m
from support import Gate, drain_within, next_within

# Bounded waits: the longest any single step may take before a test fails.
WAIT = 20.0
# The gate of the slow agent gives up (and the task fails) after this long.
GATE_TIMEOUT = 60.0

# Echo splits its reply into chunks of three words: this text gives three chunks.
ECHO_TEXT = "one two three four five six seven"
ECHO_CHUNKS = ["one two three", " four five six", " seven"]

# a2a-sdk 1.3 client flavours: A2A 1.0 over JSON-RPC and over HTTP+JSON, and its 0.3 compat mode.
FLAVOURS = ["1.0", "1.0-rest", "0.3-compat"]
V1_FLAVOURS = ["1.0", "1.0-rest"]

SLOW_FIRST = "first chunk"
SLOW_SECOND = " second chunk"
SLOW_ARTIFACT_ID = "slow-output"


# --- a gate an agent awaits and a test (another thread) opens -----------------


def slow_app(gate: Gate, settings: Settings | None = None) -> Parley:
    """A Parley app with `slow` (default) and `release` agents sharing `gate`.

    `slow` emits a first artifact chunk at once, waits for the gate, then emits
    the last chunk and completes. `release` opens the gate (so a client in
    another process can release `slow` over A2A) and answers "released".
    """
    app = Parley(settings=settings)

    @app.agent(id="slow", description="Emits a chunk, waits for a gate, then finishes")
    async def slow(ctx: RunContext):
        yield ArtifactChunk(
            m.Artifact(artifact_id=SLOW_ARTIFACT_ID, name="response", parts=[m.Part(text=SLOW_FIRST)]),
            append=False,
            last_chunk=False,
        )
        await gate.wait(GATE_TIMEOUT)
        yield ArtifactChunk(
            m.Artifact(artifact_id=SLOW_ARTIFACT_ID, name="response", parts=[m.Part(text=SLOW_SECOND)]),
            append=True,
            last_chunk=True,
        )

    @app.agent(id="release", description="Opens the gate the slow agent waits for")
    async def release(ctx: RunContext):
        gate.open()
        yield "released"

    return app


class OpenGateOnKeepalive:
    """Serves a Parley app and opens `gate` right after an SSE keep-alive comment went out.

    Passed to the `serve` fixture in place of the app (it only calls `.asgi()`),
    so a test knows, without sleeping, that the client's stream carried a
    keep-alive comment before the agent was released.
    """

    KEEPALIVE = b": keep-alive"

    def __init__(self, app: Parley, gate: Gate) -> None:
        self.app = app
        self.gate = gate
        self.keepalives = 0

    def asgi(self):
        inner = self.app.asgi()

        async def watched(scope, receive, send):
            async def watching_send(message):
                await send(message)
                if message["type"] == "http.response.body" and self.KEEPALIVE in message.get("body", b""):
                    self.keepalives += 1
                    self.gate.open()

            await inner(scope, receive, watching_send)

        return watched


# --- a2a-sdk 1.3 clients --------------------------------------------------------


@dataclass
class Wire:
    """What the SDK client put on the wire: (A2A-Version header, call) per request, card fetches excepted.

    A call is the JSON-RPC method name (`SendMessage`, `message/send`, ...) or, for
    HTTP+JSON, `VERB /path` below the agent's URL with the task id as `{id}`
    (`POST /tasks/{id}:cancel`).
    """

    base_path: str = ""
    calls: list[tuple[str | None, str]] = field(default_factory=list)

    async def hook(self, request: httpx.Request) -> None:
        path = request.url.path
        if path.endswith((".well-known/agent-card.json", ".well-known/agent.json")):
            return
        self.calls.append((request.headers.get("a2a-version"), self._call(request, path)))

    def _call(self, request: httpx.Request, path: str) -> str:
        if request.method == "POST":
            try:
                body = json.loads(request.content or b"null")
            except ValueError:
                body = None
            if isinstance(body, dict) and body.get("jsonrpc") == "2.0":
                return str(body.get("method"))
        rel = path.removeprefix(self.base_path)
        return f"{request.method} {re.sub(r'/tasks/[^/:]+', '/tasks/{id}', rel)}"

    @property
    def methods(self) -> list[str]:
        return [call for _, call in self.calls]

    @property
    def versions(self) -> set[str | None]:
        return {version for version, _ in self.calls}


def only_v03_interfaces(card: AgentCard) -> AgentCard:
    """A copy of `card` whose supportedInterfaces are only the 0.3 entries.

    `ClientFactory` prefers a 1.0 interface; with only a 0.3 one left it builds
    `CompatJsonRpcTransport` (see `client_factory.jsonrpc_transport_producer`).
    """
    legacy = [i for i in card.supported_interfaces if i.protocol_version.split(".")[:2] == ["0", "3"]]
    assert legacy, f"the card offers no 0.3 interface: {list(card.supported_interfaces)}"
    out = AgentCard()
    out.CopyFrom(card)
    del out.supported_interfaces[:]
    out.supported_interfaces.extend(legacy)
    return out


@dataclass
class SdkClient:
    """An a2a-sdk 1.3 client, the card it was built from, and a record of its requests."""

    client: Client
    card: AgentCard
    wire: Wire
    flavour: str


@asynccontextmanager
async def sdk_client(agent_url: str, flavour: str, *, streaming: bool) -> AsyncIterator[SdkClient]:
    """An a2a-sdk 1.3 client for the agent whose base URL is `agent_url`.

    flavour "1.0": `ClientFactory.create_from_url` (card fetched with `A2A-Version: 1.0`),
    JSON-RPC binding.
    flavour "1.0-rest": the same, with the client configured for HTTP+JSON only.
    flavour "0.3-compat": the card is resolved the way a legacy client would (no
    version header, so Parley adds the 0.3 fields) and the client is built from
    it with only the 0.3 interface left, which makes the SDK use its 0.3 compat
    JSON-RPC transport.
    """
    wire = Wire(base_path=httpx.URL(agent_url).path.rstrip("/"))
    http = httpx.AsyncClient(timeout=WAIT, event_hooks={"request": [wire.hook]})
    try:
        if flavour in ("1.0", "1.0-rest"):
            bindings = [TransportProtocol.HTTP_JSON] if flavour == "1.0-rest" else [TransportProtocol.JSONRPC]
            config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=bindings)
            client = await ClientFactory(config).create_from_url(agent_url)
            card = client._card
        elif flavour == "0.3-compat":
            async with httpx.AsyncClient(timeout=WAIT) as plain:
                resolved = await A2ACardResolver(plain, agent_url).get_agent_card()
            card = only_v03_interfaces(resolved)
            client = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)
        else:
            raise ValueError(f"unknown flavour {flavour!r}")
        try:
            yield SdkClient(client, card, wire, flavour)
        finally:
            await client.close()
    finally:
        await http.aclose()


# --- reading what the SDK returns ------------------------------------------------


async def next_event(stream: AsyncIterator[StreamResponse]) -> StreamResponse:
    """The next event of an SDK stream, within the bounded wait (same task: no cross-task iteration)."""
    return await next_within(stream, WAIT)


async def drain(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    """Every remaining event until the server closes the stream (bounded)."""
    return await drain_within(stream, WAIT)
