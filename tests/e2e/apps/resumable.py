"""Agents served by real `parley serve --app resumable:app` processes in tests/e2e/test_serve_processes.py.

* `pieces`: streams its answer as PIECES text chunks ("t07-w0 t07-w1 ... t07-w39 ", the tag
  being the first word of the message), with a short real pause before each (its simulated
  work, so a SIGKILL lands mid-run). Every `every` pieces (the second word of the message,
  default 5) it checkpoints the index of the next piece, `ctx.internal("checkpoint",
  state={"next": i})`, and a resumed run starts from `ctx.checkpoint["next"]`: the way
  docs/operations.md ("Storage and restarts") tells any agent to make itself resumable.
  `full_answer(tag)` is what an uninterrupted run produces. With RESUMABLE_HOLD_AT=N in the
  server's environment, a run waits (until the process is killed) before producing piece N:
  the test that kills the server mid-answer can then never see a task finish first, however
  slowly a loaded machine lets it watch.
* `gated`: says it is waiting (a `working` status with a message), then waits until the
  `opener` agent of the same process is sent the same text; answers `released <text>`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from parley import Parley
from parley.agents.base import AgentOutput, RunContext

PIECES = 40
PAUSE = 0.01  # seconds of simulated work before each piece
DEFAULT_EVERY = 5
HOLD_AT = int(os.environ.get("RESUMABLE_HOLD_AT", PIECES))

app = Parley()


def piece(tag: str, i: int) -> str:
    return f"{tag}-w{i} "


def full_answer(tag: str) -> str:
    """The answer of an uninterrupted run of `pieces` for `tag`."""
    return "".join(piece(tag, i) for i in range(PIECES))


@app.agent(id="pieces", description="Streams 40 pieces, checkpointing as it goes; resumable after a crash")
async def pieces(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    words = ctx.text.split()
    tag = words[0] if words else "x"
    every = int(words[1]) if len(words) > 1 else DEFAULT_EVERY
    start = int(ctx.checkpoint["next"]) if ctx.checkpoint else 0
    for i in range(start, PIECES):
        if i >= HOLD_AT:
            await asyncio.Event().wait()  # held until the test kills this process
        if i % every == 0:
            yield ctx.internal("checkpoint", state={"next": i})
        await asyncio.sleep(PAUSE)
        yield piece(tag, i)


_gates: dict[str, asyncio.Event] = {}


def _gate(key: str) -> asyncio.Event:
    return _gates.setdefault(key, asyncio.Event())


@app.agent(id="gated", description="Waits until the opener agent is sent the same text")
async def gated(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield ctx.say(f"waiting at gate {ctx.text}")
    await _gate(ctx.text).wait()
    yield f"released {ctx.text}"


@app.agent(id="opener", description="Opens the gate named by the message text")
async def opener(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    _gate(ctx.text).set()
    yield f"opened {ctx.text}"
