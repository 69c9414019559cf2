"""Instructions per unary SendMessage (or per SendStreamingMessage stream) of an ASGI app alone, counted by valgrind's callgrind: no sockets, no
uvicorn, no load generator, so the count repeats run after run on a shared, noisy machine.

    python bench/app_cost.py                 # Parley --memory and the floor (about 2 minutes)
    python bench/app_cost.py --apps parley
    python bench/app_cost.py --apps parley --scenario stream   # SSE streams (the floor has none)
    python bench/app_cost.py --apps parley-sqlite               # the default store, SQLite's own code counted too

The app is called directly with ASGI messages, 8 requests in flight, each a fresh `SendMessage` (A2A 1.0
JSON-RPC, the body of `targets.py`'s wrk script). callgrind counts every instruction of the process, start-up
included, so each app is run twice (`--small` and `--large` requests) and the difference is divided by the
difference in requests. The engine's pacing by the clock is off (see `_serve`). Only the main thread (the event
loop) is counted: with SQLite, the group writes and SQLite's work for them, not the checkpoint thread (which works
by the clock) nor the time the disk takes. Needs valgrind (Debian's package).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BODY = ('{"jsonrpc":"2.0","id":1,"method":"%s","params":{"message":{"role":"ROLE_USER","parts":[{"text":'
        '"the quick brown fox jumps over the lazy dog and runs away"}],"messageId":"m-%d"}}}')
IN_FLIGHT = 8


def _scope(body: bytes) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/", "raw_path": b"/", "root_path": "", "query_string": b"",
            "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                        (b"a2a-version", b"1.0"), (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {}}


async def _one(app: Any, n: int, answers: list[bytes], method: str) -> None:
    body = (BODY % (method, n)).encode()
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # no disconnect while the app answers
        raise AssertionError("unreachable")

    parts: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            parts.append(message.get("body", b""))

    await app(_scope(body), receive, send)
    answers.append(b"".join(parts))


async def _drive(app: Any, requests: int, method: str = "SendMessage") -> None:
    answers: list[bytes] = []
    counter = iter(range(requests))

    async def worker() -> None:
        for n in counter:
            await _one(app, n, answers, method)

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    bad = [a for a in answers if b"TASK_STATE_COMPLETED" not in a]
    if len(answers) != requests or bad:
        raise SystemExit(f"{len(bad)} bad answers of {len(answers)}: {bad[:1]!r}")


async def _serve(which: str, requests: int, method: str) -> None:
    if which == "floor":
        sys.path.insert(0, str(HERE))
        import floor_server

        await _drive(floor_server.app, requests, method)
        return
    import parley.tasks.engine
    from parley.serve import default_app
    from parley.settings import MEMORY

    # An agent that never waits gets the loop back to the others every PACE_SECONDS of the clock (2 ms). Natively
    # an echo run takes a small part of that; under callgrind, 50 times slower, it would be paced (its commit
    # split) more or less often with the machine's load: not by the clock here, so that the count repeats.
    parley.tasks.engine.PACE_SECONDS = 86400.0

    db = MEMORY if which == "parley" else str(Path(os.environ["APP_COST_DIR"]) / "parley.db")  # parley-sqlite
    parley = default_app(db)
    app = parley.asgi(parley.settings.merged(db=db))
    async with lifespan(app):
        await _drive(app, requests, method)


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """The ASGI app started (its lifespan's startup complete) for the block, shut down after it."""
    startup: asyncio.Queue = asyncio.Queue()
    events: asyncio.Queue = asyncio.Queue()
    await startup.put({"type": "lifespan.startup"})
    life = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, startup.get,
                                   events.put))
    started = await events.get()
    assert started["type"] == "lifespan.startup.complete", started
    try:
        yield
    finally:
        await startup.put({"type": "lifespan.shutdown"})
        await life


def _instructions(which: str, requests: int, method: str, keep: str | None = None) -> int:
    """The instructions of the process's main thread: the event loop, with everything a request does on it.
    (The SQLite store's checkpoint thread works by the clock, so its share would vary from run to run.)
    `keep`: a directory the main thread's callgrind file is copied to (for callgrind_annotate)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                              f"--callgrind-out-file={tmp}/cg.out", sys.executable,
                              __file__, "--child", which, str(requests), method],
                             capture_output=True, text=True, check=True, env={**os.environ, "APP_COST_DIR": tmp})
        main_thread = Path(f"{tmp}/cg.out-01").read_text()
        if keep is not None:
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / f"{which}-{method}-{requests}.cg").write_text(main_thread)
    found = re.search(r"^summary: (\d+)", main_thread, re.MULTILINE)
    if found is None:
        raise SystemExit(f"callgrind wrote no summary for the main thread:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        import uvloop

        from parley.serve import tune_gc

        tune_gc()  # as `parley serve` does
        uvloop.install()
        asyncio.run(_serve(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default="parley,floor",
                    help="comma-separated, of parley (--memory), parley-sqlite (a fresh SQLite file) and floor")
    ap.add_argument("--scenario", choices=("unary", "stream"), default="unary")
    ap.add_argument("--small", type=int, default=300)
    ap.add_argument("--large", type=int, default=1300)
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind files there (APP-METHOD-REQUESTS.cg), to compare "
                    "functions with callgrind_annotate")
    args = ap.parse_args()
    method = "SendMessage" if args.scenario == "unary" else "SendStreamingMessage"
    for which in args.apps.split(","):
        small = _instructions(which, args.small, method, args.keep)
        large = _instructions(which, args.large, method, args.keep)
        print(f"{which} {args.scenario}: {(large - small) / (args.large - args.small):,.0f} instructions per request "
              f"({args.small} and {args.large} requests: {small:,} and {large:,})", flush=True)


if __name__ == "__main__":
    main()
