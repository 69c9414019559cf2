"""Agents for the dashboard's browser tests (tests/e2e/test_dashboard_browser.py), served from a parley.toml.

    slow     says it is working, then waits until it is canceled
    writer   answers with an artifact of Markdown (and a <script> and a javascript: link, which must stay
             inert), a data part and a file part
    front    answers greetings; its route sends "broken" messages to fixer (a delegation)
    fixer    diagnoses
    chatty   streams a word every 50 ms, never pausing, until it is canceled (as an LLM streams an answer)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from parley.agents.base import AgentOutput, ArtifactChunk, RunContext, new_id
from parley.protocol import models as m

MARKDOWN = ("# Report\n\nThis is **bold** and `code`.\n\n<script>window.__pwned = 1</script>\n\n"
            "[a bad link](javascript:window.__pwned=2) and [a good link](https://example.com/docs)\n")


async def slow(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Reports progress, then works until it is canceled."""
    yield ctx.say("Working on it…")
    await asyncio.Event().wait()


async def writer(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """A rich answer: Markdown with hostile bits, structured data and a file."""
    parts = [m.Part(text=MARKDOWN + "\n" + (ctx.text or "")), m.Part(data={"total": 3, "items": ["a", "b"]}),
             m.Part(raw=b"col1,col2\n1,2\n", filename="report.csv", media_type="text/csv")]
    yield ArtifactChunk(m.Artifact(artifact_id=new_id(), name="report", parts=parts), last_chunk=True)


async def front(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Greets; broken things are routed to fixer by the config's routing rule."""
    yield "Hello from the front desk."


async def fixer(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Diagnoses whatever it is told about."""
    yield f"Diagnosis: {ctx.text} (fixer)"


async def chatty(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """A word every 50 ms until canceled: w0 w1 w2 ... (the pace is the workload: a model producing tokens)."""
    i = 0
    while True:
        yield f"w{i} "
        i += 1
        await asyncio.sleep(0.05)
