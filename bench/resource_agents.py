"""Agents for bench/resources.py, served by a real `parley serve --app resource_agents:app` (PYTHONPATH=bench/).

    echo, interviewer  the built-in agents (echo is the default), as `parley serve` has them
    hold               says "holding <gate>" (a working status, so the stream's first event arrives at
                       once), then waits until the `release` agent is sent the same text; answers
                       "released <gate>". Keeps a SendStreamingMessage stream open as long as the
                       benchmark wants (open-streams).
    release            opens the gate named by its text: every `hold` task waiting on it completes.
    flood              text "KIB INTERVAL_MS MAX_SECONDS" (defaults 32, 20, 300): appends a chunk of
                       KIB KiB to one artifact every INTERVAL_MS ms, until it is canceled or
                       MAX_SECONDS have passed, then completes. A steady producer for a client that
                       stops reading (slow-reader).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from parley import Parley
from parley.agents.base import AgentOutput, ArtifactChunk, RunContext, new_id
from parley.agents.builtin import builtin_agents
from parley.protocol import models as m

app = Parley()
for _agent in builtin_agents():
    app.add_agent(_agent)

_gates: dict[str, asyncio.Event] = {}


def _gate(name: str) -> asyncio.Event:
    """The gate called `name` (made on first use, by either side)."""
    return _gates.setdefault(name, asyncio.Event())


@app.agent(id="hold", description="Holds its stream open until the release agent is sent the same text")
async def hold(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield ctx.say(f"holding {ctx.text}")
    await _gate(ctx.text).wait()
    yield f"released {ctx.text}"


@app.agent(id="release", description="Releases every hold task waiting on the gate named by the text")
async def release(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    _gate(ctx.text).set()
    _gates.pop(ctx.text, None)  # later holds on the same name wait on a fresh gate
    yield f"released {ctx.text}"


def flood_params(text: str) -> tuple[int, float, float]:
    """(chunk bytes, interval s, max seconds) from "KIB INTERVAL_MS MAX_SECONDS" (defaults 32, 20, 300)."""
    fields = [int(x) for x in text.split() if x.isdigit()]
    kib, interval_ms, max_s = (fields + [32, 20, 300][len(fields):])[:3]
    return kib * 1024, interval_ms / 1000, float(max_s)


@app.agent(id="flood", description="Streams a large artifact, one chunk every few ms, until canceled")
async def flood(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    size, interval, max_s = flood_params(ctx.text)
    artifact_id = new_id()
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < max_s:
        wait = start + i * interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)  # the producer's pace (a fixed schedule, no drift)
        body = f"{i:08d} ".ljust(size, "x")
        yield ArtifactChunk(m.Artifact(artifact_id=artifact_id, name="flood", parts=[m.Part(text=body)]),
                            append=i > 0, last_chunk=False)
        i += 1
    yield ArtifactChunk(m.Artifact(artifact_id=artifact_id, name="flood", parts=[m.Part(text="end")]),
                        append=i > 0, last_chunk=True)
