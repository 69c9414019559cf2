"""Memory per open stream (issue 25: <= 32 KiB): what the server's Python objects cost while SendStreamingMessage
streams stay open, each 120 tokens into its answer, on the default (SQLite) store.

Counted with tracemalloc (bytes allocated and still held), not RSS and not time: the count repeats. Each agent
yields a token only when the test lets it, so every token is one commit, one log entry and one SSE frame, as an
LLM's tokens tens of milliseconds apart are. Socket and HTTP-server buffers are not in this count (the app is
called with ASGI messages), nor SQLite's page cache (a fixed cost, not per stream).
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from parley import Parley
from parley.agents.base import RunContext
from parley.settings import Settings

STREAMS = 20
TOKENS = 120
# Measured 25,513-25,567 bytes per stream when this test was written; 33,701 while the SQLite store held its tails'
# bytes (~120 a token, up to 64 tokens a task) and each run two asyncio.Events (~700 bytes each).
BOUND = 28 * 1024

BODY = ('{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER",'
        '"parts":[{"text":"%d"}],"messageId":"m-%d"}}}')


class Stream:
    """One SendStreamingMessage call to the ASGI app; counts the token frames it was sent."""

    def __init__(self, app: Any, gates: dict[int, asyncio.Event], index: int) -> None:
        self.gate = gates[index] = asyncio.Event()
        self.frames = 0
        self.frame = asyncio.Event()
        self.ended = asyncio.Event()
        body = (BODY % (index, index)).encode()
        self.messages = [{"type": "http.request", "body": body, "more_body": False}]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/a2a/gated", "raw_path": b"/a2a/gated", "root_path": "",
                 "query_string": b"", "state": {}, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
                 "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                             (b"a2a-version", b"1.0"), (b"content-length", str(len(body)).encode())]}
        self.call = asyncio.ensure_future(app(scope, self.receive, self.send))

    async def receive(self) -> dict[str, Any]:
        if self.messages:
            return self.messages.pop()
        await self.ended.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            self.frames += message.get("body", b"").count(b'"text":" t')
            self.frame.set()

    async def token(self) -> None:
        """Let the agent yield one token; return once its SSE frame was sent."""
        want = self.frames + 1
        while self.frames < want:
            self.frame.clear()
            self.gate.set()
            await self.frame.wait()


async def test_an_open_stream_holds_less_than_28_kib_of_python_objects(tmp_path: Path) -> None:
    gates: dict[int, asyncio.Event] = {}
    app = Parley(settings=Settings(db=str(tmp_path / "t.db")))

    @app.agent(id="gated", name="Gated", description="a token each time the test opens the gate")
    async def gated(ctx: RunContext) -> AsyncIterator[str]:
        gate = gates[int(ctx.text)]
        for i in range(10**6):
            await gate.wait()
            gate.clear()
            yield f" t{i}:{1795879814388956376 + i * 50_000_000}"  # as bench/llm_agents.py stamps its tokens

    asgi = app.asgi(app.settings)
    runtime = asgi.state.parley
    await runtime.start()
    streams: list[Stream] = []
    warm = Stream(asgi, gates, 999)
    try:
        await warm.token()  # modules, caches and statements ready before the count
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            streams = [Stream(asgi, gates, i) for i in range(STREAMS)]
            for _ in range(TOKENS):
                for s in streams:
                    await s.token()
            gc.collect()
            per_stream = (tracemalloc.get_traced_memory()[0] - before) / STREAMS
        finally:
            tracemalloc.stop()
        assert all(s.frames == TOKENS for s in streams)
        assert per_stream < BOUND, f"{per_stream:,.0f} bytes per open stream"
    finally:
        for s in [*streams, warm]:
            s.ended.set()  # the clients leave: their streams end
        await asyncio.gather(*(s.call for s in [*streams, warm]), return_exceptions=True)
        await runtime.stop()
