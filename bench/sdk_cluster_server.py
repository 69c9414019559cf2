"""The a2a-sdk (1.3) in its cluster mode: several server processes sharing one PostgreSQL database.

What the SDK ships for this (a2a/server/cluster/): `VersionedDatabaseTaskStore` (SQLAlchemy; every
task write is a compare-and-swap on `task_versions` and appends the event to `task_events` in the
same transaction) and `DatabaseTaskEventStream`, which a replica that does NOT run the task uses
for SubscribeToTask: it serves the stored snapshot, then polls `task_events` for newer rows, and
sleeps `poll_interval_s` (default 0.5 s) whenever a poll returns nothing. The replica that runs the
task serves SubscribeToTask from its in-memory ActiveTask instead. Both are passed to
`DefaultRequestHandler` (v2) as `task_store=` and `event_stream=`.

    python bench/sdk_cluster_server.py --port 9003 --db postgresql://postgres@127.0.0.1:5432/test \
        --schema sdk_x [--poll 0.5]

The `--schema` must exist (bench/cluster_bench.py creates and drops it); tables are created in it
at start-up (start one process first, then the others, so they do not race on CREATE TABLE).
Needs `a2a-sdk[postgresql]` (SQLAlchemy with asyncpg).

Agents on the JSON-RPC endpoint `/` (A2A 1.0 and 0.3), chosen by the message text:

  "stamp N INTERVAL_MS DELAY_MS"  the same workload as bench/cluster_agents.py:stamper: waits
                                  DELAY_MS, then N chunks of one artifact, one every INTERVAL_MS,
                                  each "i <time.time_ns() at emit>", then completes
  anything else                   the echo agent of bench/sdk_echo_server.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_agents import parse
from sdk_echo_server import EchoExecutor, agent_card, working


class StamperExecutor(AgentExecutor):
    """`stamp N INTERVAL_MS DELAY_MS`: timestamped artifact chunks on a fixed schedule; else echo."""

    def __init__(self) -> None:
        self.echo = EchoExecutor()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input(delimiter="")
        if not text.startswith("stamp"):
            await self.echo.execute(context, event_queue)
            return
        n, interval, delay = parse(text.removeprefix("stamp"))
        updater = await working(context, event_queue)
        await asyncio.sleep(delay)  # pacing of the workload: subscribers attach during this
        start = time.monotonic()
        for i in range(n):
            wait = start + i * interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await updater.add_artifact([Part(text=f"{i} {time.time_ns()}")], artifact_id="stamps", name="stamps",
                                       append=i > 0, last_chunk=i == n - 1)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def create_app(url: str, db: str, schema: str, poll: float) -> Starlette:
    from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    dsn = db.replace("postgresql://", "postgresql+asyncpg://", 1)
    engine = create_async_engine(dsn, connect_args={"server_settings": {"search_path": schema}},
                                 pool_size=10, max_overflow=10)
    store = VersionedDatabaseTaskStore(engine)
    stream = DatabaseTaskEventStream(engine, poll_interval_s=poll)
    card = agent_card(url)
    handler = DefaultRequestHandler(agent_executor=StamperExecutor(), task_store=store, agent_card=card,
                                    event_stream=stream)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette):
        await store.initialize()
        await stream.initialize()
        try:
            yield
        finally:
            await handler.aclose()
            await engine.dispose()

    async def readyz(_request) -> PlainTextResponse:
        return PlainTextResponse("ready")

    routes = [
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        *create_agent_card_routes(card),
        Route("/readyz", readyz),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9003)
    ap.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--schema", required=True, help="an existing schema: the tables go there")
    ap.add_argument("--poll", type=float, default=0.5, help="DatabaseTaskEventStream poll_interval_s (SDK default 0.5)")
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args()
    app = create_app(f"http://{args.host}:{args.port}/", args.db, args.schema, args.poll)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
