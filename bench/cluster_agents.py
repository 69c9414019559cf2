"""The agent bench/cluster_bench.py runs inside real `parley serve` replicas (imported through PYTHONPATH=bench/).

    stamper   text "N INTERVAL_MS DELAY_MS": waits DELAY_MS (so subscribers can attach), then emits N
              artifact chunks of one artifact, one every INTERVAL_MS on a fixed schedule (no drift),
              each chunk's text "i <time.time_ns() at emit>", then completes.

The same workload for the a2a-sdk cluster baseline is `StamperExecutor` in bench/sdk_cluster_server.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from parley.agents.base import AgentOutput, ArtifactChunk, RunContext
from parley.protocol import models as m


def parse(text: str) -> tuple[int, float, float]:
    """(events, interval s, delay s) from "N INTERVAL_MS DELAY_MS" (defaults 100, 20 ms, 500 ms)."""
    fields = [int(x) for x in text.split() if x.isdigit()]
    n, interval, delay = (fields + [100, 20, 500][len(fields):])[:3]
    return n, interval / 1000, delay / 1000


async def stamper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    n, interval, delay = parse(ctx.text)
    await asyncio.sleep(delay)  # pacing of the workload: subscribers attach during this
    start = time.monotonic()
    for i in range(n):
        wait = start + i * interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        yield ArtifactChunk(m.Artifact(artifact_id="stamps", name="stamps",
                                       parts=[m.Part(text=f"{i} {time.time_ns()}")]),
                            append=i > 0, last_chunk=i == n - 1)
