"""Agents the replica tests run inside real `parley serve` processes (imported through PYTHONPATH).

    ticker   streams `N` text chunks (N from the message, default 20), one every 50 ms, then completes
    counter  like ticker, with a checkpoint after each chunk (an awaited commit); resumed, it goes on from there
    waiter   says it started, then waits until it is canceled (a task that stays leased and running)
    stepper  checkpoints step 1, then waits; a replica that resumes it from the checkpoint completes it
    pauser   waits for the file <dir>/go, yields text, pauses up to 3 s until <dir>/on exists, says which ended it
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from parley.agents.base import AgentOutput, ArtifactChunk, RunContext
from parley.protocol import models as m


async def ticker(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    count = int(ctx.text) if ctx.text.strip().isdigit() else 20
    for i in range(count):
        # Each chunk is its own event (a new artifact per chunk): the test counts them one by one.
        yield ArtifactChunk(m.Artifact(artifact_id=f"tick-{i}", parts=[m.Part(text=f"tick {i}")]))
        await asyncio.sleep(0.05)  # pacing of the workload, not synchronisation


async def counter(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    count = int(ctx.text) if ctx.text.strip().isdigit() else 20
    start = ctx.checkpoint["next"] if ctx.checkpoint is not None else 0
    for i in range(start, count):
        yield ArtifactChunk(m.Artifact(artifact_id=f"tick-{i}", parts=[m.Part(text=f"tick {i}")]))
        yield ctx.internal("checkpoint", state={"next": i + 1})
        await asyncio.sleep(0.05)  # pacing of the workload, not synchronisation


async def waiter(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield ctx.say(f"started on pid {os.getpid()}")
    await asyncio.Event().wait()
    yield "never"


async def _file(path: Path, seconds: float) -> bool:
    """Whether `path` appears within `seconds` (the test's signal across processes; the agent's "tool")."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def pauser(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    folder = Path(ctx.text)
    await _file(folder / "go", 60)
    yield "Let me look that up..."
    signalled = await _file(folder / "on", 3.0)
    yield " Found it (signal)." if signalled else " Found it (timeout)."


async def stepper(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    if ctx.checkpoint is not None:
        yield f"resumed at step {ctx.checkpoint['step']} on pid {os.getpid()}"
        return
    yield ctx.internal("checkpoint", state={"step": 1})
    yield ctx.say(f"step 1 done on pid {os.getpid()}")
    await asyncio.Event().wait()


async def writer(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Text before and after a checkpoint, then waits; a resumed run writes the text after the checkpoint
    again (what the engine undid) and completes. (tests/cluster/test_failover.py: no text twice.)"""
    if ctx.checkpoint is None:
        yield "before the checkpoint. "
        yield ctx.internal("checkpoint", state={"step": 1})
        yield "after the checkpoint. "
        yield ctx.say(f"waiting on pid {os.getpid()}")
        await asyncio.Event().wait()
    yield "after the checkpoint. "
    yield f"resumed on pid {os.getpid()}"
