"""Helpers for the gRPC tests: a Parley app whose lifespan also serves gRPC, test agents, a gate.

The gRPC server must run on the event loop of the Parley server it fronts (the
engine's asyncio objects belong to it), which is uvicorn's loop in the server
thread. :func:`with_grpc` wraps the app's ASGI application so that the lifespan
starts Parley's gRPC server right after the app's own start-up and stops it
before the app's shutdown, which is what `parley serve --grpc-port` does.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from support import Gate, require

# Without grpcio / googleapis-common-protos every module that imports this one is skipped (failed under CI=true).
require("grpc", "grpc")
require("google.rpc.status_pb2", "grpc")

from parley.agents.base import ArtifactChunk, RunContext, Status
from parley.app import Parley
from parley.protocol import models as m
from parley.server.grpc_server import start_grpc_server

WAIT = 10.0  # upper bound for waiting on something observable; never a pacing delay
CHUNKS = ["one ", "two ", "three"]
# As streamed: each chunk at once, then an empty chunk that marks the answer's end (lastChunk; issue 25).
STREAMED = [*CHUNKS, ""]
SLOW_FIRST = "first chunk"
SLOW_LAST = " last chunk"
SLOW_ARTIFACT = "slow-output"
EXTENSION = "https://example.com/ext/required/v1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grpc_app(gate: Gate) -> Parley:
    """The test agents.

    `chunks` (default): three text chunks, then completed. `slow`: a working status, a first artifact
    chunk, then waits for the gate before the last chunk. `ask`: input-required, then greets. `mirror`:
    returns the message's parts (any media type) as an artifact carrying the message's metadata.
    `ext`: requires the extension EXTENSION.
    """
    app = Parley()

    @app.agent(id="chunks", description="Streams three text chunks", default=True)
    async def chunks(ctx: RunContext):
        for piece in CHUNKS:
            yield piece
            await asyncio.sleep(0)  # one chunk per loop turn (text yielded in one turn is coalesced)

    @app.agent(id="slow", description="Emits a chunk, waits for a gate, then finishes")
    async def slow(ctx: RunContext):
        yield Status(m.TaskState.WORKING, "working")
        yield ArtifactChunk(
            m.Artifact(artifact_id=SLOW_ARTIFACT, name="response", parts=[m.Part(text=SLOW_FIRST)]),
            append=False,
            last_chunk=False,
        )
        await gate.wait()
        yield ArtifactChunk(
            m.Artifact(artifact_id=SLOW_ARTIFACT, name="response", parts=[m.Part(text=SLOW_LAST)]),
            append=True,
            last_chunk=True,
        )

    @app.agent(id="ask", description="Asks for a name, then greets")
    async def ask(ctx: RunContext):
        if ctx.turn == 1:
            yield ctx.ask("What is your name?")
            return
        yield f"Hello, {ctx.text}!"

    @app.agent(id="mirror", description="Returns the message's parts", input_modes=["*/*"], output_modes=["*/*"])
    async def mirror(ctx: RunContext):
        yield m.Artifact(artifact_id="mirror", parts=ctx.message.parts, metadata=ctx.message.metadata)

    @app.agent(id="ext", description="Needs an extension", extensions=[m.AgentExtension(uri=EXTENSION, required=True)])
    async def ext(ctx: RunContext):
        yield "extended"

    return app


class GrpcLifespan:
    """ASGI wrapper: start Parley's gRPC server after the app's start-up, stop it before its shutdown."""

    def __init__(self, inner: Any, host: str, port: int) -> None:
        self.inner = inner
        self.host = host
        self.port = port
        self.grpc_server: Any = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.inner(scope, receive, send)
            return

        async def send_(message: dict) -> None:
            if message["type"] == "lifespan.startup.complete":
                self.grpc_server = await start_grpc_server(self.inner.state.parley, self.host, self.port)
            await send(message)

        async def receive_() -> dict:
            message = await receive()
            if message["type"] == "lifespan.shutdown" and self.grpc_server is not None:
                await self.grpc_server.stop(grace=1.0)
            return message

        await self.inner(scope, receive_, send_)


def with_grpc(app: Parley, port: int, host: str = "127.0.0.1") -> Parley:
    """Make `app.asgi()` also serve gRPC on host:port for the lifetime of the ASGI app."""
    build = app.asgi

    def asgi() -> GrpcLifespan:
        return GrpcLifespan(build(), host, port)

    app.asgi = asgi  # type: ignore[method-assign]
    return app


def text_of(parts: list[m.Part] | None) -> str:
    return "".join(p.text or "" for p in parts or [])


def artifact_text(task: m.Task) -> str:
    return "".join(text_of(a.parts) for a in task.artifacts or [])
