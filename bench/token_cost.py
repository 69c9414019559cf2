"""Instructions per streamed token, and memory per open stream, of the ASGI app alone (issue 25), counted so that
the numbers repeat on a shared, noisy machine.

    python bench/token_cost.py                          # instructions per token, --memory store (about 3 minutes)
    python bench/token_cost.py --store sqlite           # the default store (a fresh SQLite file)
    python bench/token_cost.py --idle 900               # the same with 900 more streams open that stay quiet
    python bench/token_cost.py --memory-per-stream 200  # bytes (tracemalloc) and GC-tracked objects per open stream

The app is called directly with ASGI messages (no sockets, no uvicorn, no load generator). The agent (`gated`)
yields one token each time the driver opens its gate, so nothing depends on the clock: the driver opens one
stream's gate, waits until that stream's SSE frame with the token was sent, then goes on to the next stream,
round after round. Every token is one chunk, one log entry and one SSE frame, as in bench/llm_stream.py, where
tokens of one stream come 50-200 ms apart.

Instructions: valgrind's callgrind counts every instruction of the process's main thread (the event loop), start-up
included, so each case runs twice (`--small` and `--large` tokens per stream) and the difference is divided by
the difference in tokens. The driver's own share (opening a gate, seeing a frame) is in the count: a few
thousand instructions per token. What the server does by the clock (keep-alives, lease renewals, a quiet
follower's look at the store every 5 s) is put off past the run: under callgrind a run lasts minutes, and
that work would count per second, not per token.

Memory per open stream: `--memory-per-stream N` opens N streams (each past its first token, its agent waiting),
and reports tracemalloc's traced bytes and gc's tracked objects with them open, per stream, against the same with
none open (after a warm-up stream). Python allocations only: not the socket buffers of a real server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import re
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from app_cost import lifespan

BODY = ('{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER",'
        '"parts":[{"text":"%d"}],"messageId":"m-%d"}}}')
GATES: dict[int, asyncio.Event] = {}
CLOCKLESS = 86400.0  # seconds: the intervals of what a server does by the clock, longer than any run here


def gated_app(db: str) -> Any:
    """A Parley app with the agent `gated`: text "I" -> a token each time gate I opens, until it opens past the end."""
    import parley.tasks.follow
    from parley import Parley
    from parley.agents.base import RunContext
    from parley.settings import Settings

    # Nothing by the clock: no keep-alives, lease renewals or store re-reads of quiet followers (under callgrind a
    # run lasts minutes, and their count would depend on how long, not on the tokens).
    parley.tasks.follow.RECHECK_SECONDS = CLOCKLESS
    app = Parley(settings=Settings(db=db, keepalive_seconds=CLOCKLESS, lease_seconds=CLOCKLESS))

    @app.agent(id="gated", name="Gated", description="a token each time the driver opens the gate")
    async def gated(ctx: RunContext) -> AsyncIterator[str]:
        gate = GATES[int(ctx.text)]
        i = 0
        while True:
            await gate.wait()
            gate.clear()
            if getattr(gate, "last", False):
                return
            yield f" t{i}"
            i += 1

    return app


def _scope(body: bytes) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/a2a/gated", "raw_path": b"/a2a/gated", "root_path": "", "query_string": b"",
            "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                        (b"a2a-version", b"1.0"), (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {}}


class Stream:
    """One SendStreamingMessage call to the app: counts the token frames it was sent."""

    def __init__(self, app: Any, index: int) -> None:
        self.index = index
        self.tokens = 0
        self.completed = False
        self.frame = asyncio.Event()
        GATES[index] = asyncio.Event()
        body = (BODY % (index, index)).encode()
        self.messages = [{"type": "http.request", "body": body, "more_body": False}]
        self.call = asyncio.ensure_future(app(_scope(body), self.receive, self.send))

    async def receive(self) -> dict[str, Any]:
        if self.messages:
            return self.messages.pop()
        await asyncio.Event().wait()  # no disconnect
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            body = message.get("body", b"")
            self.tokens += body.count(b'"text":" t')
            self.completed = self.completed or b"TASK_STATE_COMPLETED" in body
            self.frame.set()

    async def token(self) -> None:
        """Open the gate once and wait for the frame of the token it lets through."""
        want = self.tokens + 1
        while self.tokens < want:
            self.frame.clear()
            GATES[self.index].set()
            await self.frame.wait()

    async def end(self) -> None:
        gate = GATES[self.index]
        gate.last = True  # type: ignore[attr-defined]
        gate.set()
        await self.call


async def open_streams(app: Any, first: int, n: int) -> list[Stream]:
    """`n` streams, each past its first token (its agent waits at the gate)."""
    streams = [Stream(app, first + i) for i in range(n)]
    for s in streams:
        await s.token()
    return streams


async def _drive(db: str, streams: int, tokens: int, idle: int) -> None:
    app = gated_app(db)
    asgi = app.asgi(app.settings)
    async with lifespan(asgi):
        warm = await open_streams(asgi, 10**6, 2)
        for s in warm:
            await s.end()
        quiet = await open_streams(asgi, 0, idle)
        active = await open_streams(asgi, idle, streams)
        for _ in range(tokens - 1):
            for s in active:
                await s.token()
        for s in [*active, *quiet]:
            await s.end()
        bad = [s.index for s in active if s.tokens != tokens or not s.completed]
        if bad:
            raise SystemExit(f"streams {bad[:5]} did not get their {tokens} tokens and a completed status")


async def _memory(db: str, n: int) -> dict[str, float]:
    app = gated_app(db)
    asgi = app.asgi(app.settings)
    async with lifespan(asgi):
        for s in await open_streams(asgi, 10**6, 4):
            await s.end()
        gc.collect()
        tracemalloc.start()
        before_bytes, before_objects = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
        streams = await open_streams(asgi, 0, n)
        gc.collect()
        open_bytes, open_objects = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
        snapshot = tracemalloc.take_snapshot()
        for s in streams:
            await s.end()
        tracemalloc.stop()
    top = snapshot.statistics("lineno")[:15]
    for stat in top:
        print(f"  {stat.size / n:8.0f} B/stream  {stat.count / n:6.1f} blocks/stream  {stat.traceback}")
    return {"bytes_per_stream": (open_bytes - before_bytes) / n,
            "tracked_objects_per_stream": (open_objects - before_objects) / n}


def _instructions(store: str, streams: int, tokens: int, idle: int) -> int:
    """The instructions of the process's main thread (the event loop, with everything a token does on it)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                              f"--callgrind-out-file={tmp}/cg.out", sys.executable, __file__, "--child", store,
                              str(streams), str(tokens), str(idle)],
                             check=False, capture_output=True, text=True,
                             env={**os.environ, "TOKEN_COST_DIR": tmp, "PYTHONHASHSEED": "0"})
        if out.returncode != 0:
            raise SystemExit(f"the child failed:\n{out.stderr[-3000:]}")
        main_thread = Path(f"{tmp}/cg.out-01").read_text()
    found = re.search(r"^summary: (\d+)", main_thread, re.MULTILINE)
    if found is None:
        raise SystemExit(f"callgrind wrote no summary for the main thread:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def _db(store: str) -> str:
    from parley.settings import MEMORY

    return MEMORY if store == "memory" else str(Path(os.environ.get("TOKEN_COST_DIR") or tempfile.mkdtemp()) / "t.db")


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        import uvloop

        from parley.serve import tune_gc

        tune_gc()  # as `parley serve` does
        uvloop.install()
        asyncio.run(_drive(_db(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    ap.add_argument("--streams", type=int, default=10, help="streams that receive tokens")
    ap.add_argument("--idle", type=int, default=0, help="more streams held open, quiet, the whole time")
    ap.add_argument("--small", type=int, default=20, help="tokens per stream of the first run")
    ap.add_argument("--large", type=int, default=120, help="tokens per stream of the second run")
    ap.add_argument("--memory-per-stream", type=int, default=0, metavar="N",
                    help="instead: bytes and tracked objects per open stream, with N open")
    args = ap.parse_args()
    if args.memory_per_stream:
        import uvloop

        from parley.serve import tune_gc

        tune_gc()
        uvloop.install()
        result = asyncio.run(_memory(_db(args.store), args.memory_per_stream))
        print(f"{args.store}: {result['bytes_per_stream']:,.0f} traced bytes and "
              f"{result['tracked_objects_per_stream']:,.1f} GC-tracked objects per open stream "
              f"({args.memory_per_stream} open)")
        return
    small = _instructions(args.store, args.streams, args.small, args.idle)
    large = _instructions(args.store, args.streams, args.large, args.idle)
    tokens = args.streams * (args.large - args.small)
    print(f"{args.store}, {args.streams} streams + {args.idle} quiet: {(large - small) / tokens:,.0f} instructions "
          f"per token ({args.small} and {args.large} tokens per stream: {small:,} and {large:,})", flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
