"""The a2a-sdk server of bench/llm_stream.py: the LLM-shaped agent of bench/llm_agents.py as an AgentExecutor.

Text "N INTERVAL_MS" (defaults 200, 50): N tokens, one every INTERVAL_MS on a fixed schedule (the first at
once), each an artifact update (`TaskUpdater.add_artifact`, append after the first, lastChunk on the last)
of one artifact named "response" whose text is `llm_tokens.token_text(i)`; then the task completes. The
event sequence: task (submitted) -> status working -> artifact update x N -> status completed. The rest of
the server (routes, DefaultRequestHandler, InMemoryTaskStore, uvicorn settings) is bench/sdk_echo_server.py's.

    python bench/sdk_llm_server.py --port 9002
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types.a2a_pb2 import Part
from llm_tokens import parse, token_text
from sdk_echo_server import EchoExecutor, create_app, working


class LlmExecutor(AgentExecutor):
    """Streams N stamped tokens, one every INTERVAL_MS, as artifact updates."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await working(context, event_queue)
        n, interval = parse(context.get_user_input(delimiter=""))
        artifact_id = str(uuid.uuid4())
        start = time.monotonic()
        for i in range(n):
            wait = start + i * interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)  # the model thinking: the workload
            await updater.add_artifact([Part(text=token_text(i))], artifact_id=artifact_id, name="response",
                                       append=i > 0, last_chunk=i == n - 1)
        await updater.complete()

    cancel = EchoExecutor.cancel


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9002)
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args()
    app = create_app(f"http://{args.host}:{args.port}/", executor=LlmExecutor())
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
