"""Baseline for the benchmarks: the official a2a-sdk (1.3) server running an echo agent.

It does the same work as Parley's built-in `echo` agent
(src/parley/agents/builtin.py): the input text is streamed back in the same pieces
(`parley.agents.builtin.chunks_of`, imported: the one function outside the SDK this server calls) as
artifact updates of one artifact named "response" (first chunk
append=false, later ones append=true, the last one lastChunk=true), then the
task completes. The event sequence a client sees is the same as Parley's:

    task (submitted) -> status working -> artifact chunk x N -> status completed

Stack: the SDK's standard Starlette JSON-RPC routes (`create_jsonrpc_routes`,
v0.3 compatibility enabled on the same endpoint), its HTTP+JSON routes
(`create_rest_routes`, v0.3 compatibility enabled: 1.0 at /message:send, 0.3 at
/v1/message:send), `create_agent_card_routes`, `DefaultRequestHandler` (v2),
`InMemoryTaskStore`, and an `AgentExecutor` that publishes through `TaskUpdater`.
With --grpc-port, the same request handler is also served over gRPC (A2A 1.0):
the SDK's `GrpcHandler` registered with its generated `a2a_pb2_grpc` on a
grpc.aio server that the app's lifespan starts on uvicorn's event loop, as
Parley's server does.

    python bench/sdk_echo_server.py --port 9002 [--grpc-port 9102]
"""

from __future__ import annotations

import argparse
import contextlib
import uuid

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette

from parley.agents.builtin import chunks_of


def echo_chunks(text: str) -> list[str]:
    """The pieces Parley's echo agent yields for `text` (the same function: the same work)."""
    return chunks_of(text or "(your message had no text)")


async def working(context: RequestContext, event_queue: EventQueue) -> TaskUpdater:
    """The SDK's preamble of an executor: the task (created and enqueued if new), moved to `working`."""
    task = context.current_task
    if task is None:
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
    updater = TaskUpdater(event_queue, task.id, task.context_id)
    await updater.start_work()
    return updater


class EchoExecutor(AgentExecutor):
    """Echoes the user's text back, streamed in pieces as artifact updates."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await working(context, event_queue)
        chunks = echo_chunks(context.get_user_input(delimiter=""))
        artifact_id = str(uuid.uuid4())
        last = len(chunks) - 1
        for i, chunk in enumerate(chunks):
            await updater.add_artifact(
                [Part(text=chunk)],
                artifact_id=artifact_id,
                name="response",
                append=i > 0,
                last_chunk=i == last,
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def agent_card(url: str, grpc_address: str | None = None) -> AgentCard:
    interfaces = [
        AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
        AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        AgentInterface(url=url.rstrip("/"), protocol_binding="HTTP+JSON", protocol_version="1.0"),
        AgentInterface(url=url.rstrip("/"), protocol_binding="HTTP+JSON", protocol_version="0.3"),
    ]
    if grpc_address:
        interfaces.append(AgentInterface(url=grpc_address, protocol_binding="GRPC", protocol_version="1.0"))
    return AgentCard(
        name="Echo",
        description="Repeats the text it receives, streamed in chunks.",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo",
                name="Echo",
                description="Repeats the text it receives, streamed in chunks.",
                tags=["echo", "test"],
                examples=["hello world"],
            )
        ],
    )


async def start_grpc(handler: DefaultRequestHandler, host: str, port: int):
    """A grpc.aio server for `handler` (the SDK's GrpcHandler), started on the running loop."""
    import grpc.aio
    from a2a.server.request_handlers.grpc_handler import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    return server


def create_app(url: str, grpc_host: str = "127.0.0.1", grpc_port: int | None = None,
               executor: AgentExecutor | None = None) -> Starlette:
    """The server's app; `executor` (default: EchoExecutor) does the agent's work (bench/sdk_llm_server.py)."""
    card = agent_card(url, f"{grpc_host}:{grpc_port}" if grpc_port else None)
    handler = DefaultRequestHandler(agent_executor=executor or EchoExecutor(), task_store=InMemoryTaskStore(),
                                    agent_card=card)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette):
        grpc_server = await start_grpc(handler, grpc_host, grpc_port) if grpc_port else None
        try:
            yield
        finally:
            if grpc_server is not None:
                await grpc_server.stop(grace=1.0)
            await handler.aclose()

    routes = [
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        *create_agent_card_routes(card),
        # after the card routes: the REST routes end with a `/{tenant}` mount
        *create_rest_routes(handler, enable_v0_3_compat=True),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9002)
    ap.add_argument("--grpc-port", type=int, default=None, help="also serve A2A 1.0 over gRPC on this port")
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args()
    app = create_app(f"http://{args.host}:{args.port}/", args.host, args.grpc_port)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
