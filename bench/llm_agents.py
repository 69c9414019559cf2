"""The LLM-shaped agent bench/llm_stream.py serves with `parley serve --app llm_agents:app` (PYTHONPATH=bench/).

    llm   text "N INTERVAL_MS" (defaults 200, 50): streams N tokens, one every INTERVAL_MS on a fixed schedule
          (no drift; the first at once), as an async generator yielding plain text, as a Parley agent that
          relays a model's tokens is written. Each token is `llm_tokens.token_text(i)`: " t<i>:<time.time_ns() at
          emit>", so the client can tell the delay from the agent's yield to its own receipt, and the order.

The same workload for the other servers: `LlmExecutor` in bench/sdk_llm_server.py (a2a-sdk) and
bench/js/llm_server.mjs (@a2a-js/sdk). The `asyncio.sleep` is the workload (a model producing tokens).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from llm_tokens import parse, token_text

from parley import Parley
from parley.agents.base import AgentOutput, RunContext

app = Parley()


@app.agent(id="llm", name="LLM stream", description="Streams N tokens, one every INTERVAL_MS ('N INTERVAL_MS')")
async def llm(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    n, interval = parse(ctx.text)
    start = time.monotonic()
    for i in range(n):
        wait = start + i * interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)  # the model thinking: the workload
        yield token_text(i)
