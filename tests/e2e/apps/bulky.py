"""An app for tests/e2e/test_slow_clients.py and test_slow_bodies.py: short client timeouts, and an agent with a
lot to say.

* `flood`: streams as many 64 KiB text chunks as its message says (default 400: 25 MiB), far more than
  the socket buffers between a server and a client that stopped reading can hold.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from parley import Parley
from parley.agents.base import AgentOutput, RunContext
from parley.settings import Settings

HEADER_SECONDS = 1.0
STALL_SECONDS = 1.0
BODY_SECONDS = 1.0  # a request body's time, plus 1 s per BODY_MIN_RATE bytes received
BODY_MIN_RATE = 1000.0
CHUNK = "x" * 65536

app = Parley(settings=Settings(header_timeout_seconds=HEADER_SECONDS, stall_timeout_seconds=STALL_SECONDS,
                               idle_timeout_seconds=1.0, body_timeout_seconds=BODY_SECONDS,
                               body_min_rate=BODY_MIN_RATE))


@app.agent(id="flood", description="Streams many large chunks")
async def flood(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    count = int(ctx.text) if ctx.text.strip().isdigit() else 400
    for _ in range(count):
        yield CHUNK
