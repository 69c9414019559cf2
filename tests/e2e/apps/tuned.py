"""An app with settings of its own, served by `parley serve --app tuned:app` in
tests/e2e/test_serve_processes.py: `parley serve` must keep them and apply only the flags it is given.

Its `public_url` is TUNED_PUBLIC_URL from the environment (default PUBLIC_URL, a host that
does not exist: only the card shows it), so a test can point it at a reachable address.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from parley import Parley
from parley.agents.base import AgentOutput, RunContext
from parley.settings import Settings

MAX_BODY_BYTES = 2048
PUBLIC_URL = "https://agents.example.test/parley"

app = Parley(settings=Settings(max_body_bytes=MAX_BODY_BYTES,
                               public_url=os.environ.get("TUNED_PUBLIC_URL", PUBLIC_URL)))


@app.agent(id="shout", description="Answers in capitals")
async def shout(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield ctx.text.upper()
