"""Baseline for the benchmarks: the official a2a-sdk (1.3) server running an echo agent.

It does the same work as Parley's built-in `echo` agent
(src/parley/agents/builtin.py): the input text is streamed back in chunks of
3 words as artifact updates of one artifact named "response" (first chunk
append=false, later ones append=true, the last one lastChunk=true), then the
task completes. The event sequence a client sees is the same as Parley's:

    task (submitted) -> status working -> artifact chunk x N -> status completed

Stack: the SDK's standard Starlette JSON-RPC routes (`create_jsonrpc_routes`,
v0.3 compatibility enabled on the same endpoint), `create_agent_card_routes`,
`DefaultRequestHandler` (v2), `InMemoryTaskStore`, and an `AgentExecutor` that
publishes through `TaskUpdater`.

    python bench/sdk_echo_server.py --port 9002
"""

from __future__ import annotations

import argparse
import contextlib
import uuid

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette

CHUNK_WORDS = 3  # same as parley.agents.builtin.CHUNK_WORDS


def echo_chunks(text: str) -> list[str]:
    """The chunks Parley's echo agent yields for `text` (same split, same spacing)."""
    text = text or "(your message had no text)"
    words = text.split(" ")
    return [(" " if i else "") + " ".join(words[i : i + CHUNK_WORDS]) for i in range(0, len(words), CHUNK_WORDS)]


class EchoExecutor(AgentExecutor):
    """Echoes the user's text back, streamed in 3-word chunks as artifact updates."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
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


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="Echo",
        description="Repeats the text it receives, streamed in chunks.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
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


def create_app(url: str) -> Starlette:
    card = agent_card(url)
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette):
        try:
            yield
        finally:
            await handler.aclose()

    routes = [
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        *create_agent_card_routes(card),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9002)
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args()
    app = create_app(f"http://{args.host}:{args.port}/")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
