"""The LLM-shaped agent bench/llm_stream.py serves with `parley serve --app llm_agents:app` (PYTHONPATH=bench/).

    llm   text "N INTERVAL_MS" (defaults 200, 50): streams N tokens, one every INTERVAL_MS on a fixed schedule
          (no drift; the first at once), as an async generator yielding plain text, as a Parley agent that
          relays a model's tokens is written. Each token is `token_text(i)`: " t<i>:<time.time_ns() at emit>",
          so the client can tell the delay from the agent's yield to its own receipt, and the order.

The same workload for the other servers: `LlmExecutor` in bench/sdk_llm_server.py (a2a-sdk) and
bench/js/llm_server.mjs (@a2a-js/sdk). The `asyncio.sleep` is the workload (a model producing tokens).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from parley import Parley
from parley.agents.base import AgentOutput, RunContext

DEFAULT_TOKENS, DEFAULT_INTERVAL_MS = 200, 50


def parse(text: str) -> tuple[int, float]:
    """(tokens, interval s) from "N INTERVAL_MS" (defaults 200, 50)."""
    fields = [int(x) for x in (text or "").split() if x.isdigit()]
    n, interval_ms = (fields + [DEFAULT_TOKENS, DEFAULT_INTERVAL_MS][len(fields):])[:2]
    return n, interval_ms / 1000


def token_text(i: int) -> str:
    """Token `i`, stamped with the wall clock (ns) at the moment it is emitted."""
    return f" t{i}:{time.time_ns()}"


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
