"""What a long streamed answer costs to store: an agent that yields its answer a piece per event-loop turn (as an
LLM's tokens arrive): a commit follows every piece or two.

    python bench/long_answer.py                       # 4,000 pieces, 3 rounds
    python bench/long_answer.py --pieces 8000 --rounds 5

Each round sends one `SendStreamingMessage` to a fresh app (called as ASGI, no sockets) on a fresh SQLite
file, and the same to `--memory` (the baseline: the same engine and request path, nothing written),
alternating; the stream must end completed and its artifact updates must make the whole answer. Measured for
the send: the process's CPU time (every thread: SQLite's checkpoints too) and the bytes it handed to the
kernel in write calls (`wchar` of /proc/self/io: the WAL, the checkpoints into the database file). Printed as
medians, with the bytes written per byte of the answer and SQLite's CPU over memory's. Until schema 8 every
commit rewrote the whole task, so the bytes grew with the square of the answer's length. Run an older Parley
with `PYTHONPATH=<its checkout>/src` to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def written_bytes() -> int:
    """Bytes this process has passed to write system calls so far (/proc/self/io, `wchar`)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise SystemExit("/proc/self/io has no wchar line")


def make_app(db: str, pieces: int) -> Any:
    """A Parley app whose one agent streams `pieces` pieces of text, one per loop turn."""
    from parley import Parley
    from parley.agents.base import FunctionAgent

    async def streamer(ctx: Any) -> Any:
        for i in range(pieces):
            yield f" w{i % 1000:03d}"
            await asyncio.sleep(0)  # the next piece arrives in a later loop turn: a commit per piece

    app = Parley()
    app.add_agent(FunctionAgent(streamer, id="streamer", name="Streamer"))
    return app.asgi(app.settings.merged(db=db))


async def one_send(db: str, pieces: int) -> dict[str, float]:
    """One SendMessage to a fresh app over `db`: the CPU time and bytes written while it was answered."""
    import app_cost  # the ASGI calls of bench/app_cost.py

    asgi = make_app(db, pieces)
    answers: list[bytes] = []
    async with app_cost.lifespan(asgi):
        cpu, wrote = time.process_time(), written_bytes()
        await app_cost._one(asgi, 1, answers, "SendStreamingMessage")
        cpu, wrote = time.process_time() - cpu, written_bytes() - wrote
    stream = answers[0]
    text = "".join(f" w{i % 1000:03d}" for i in range(pieces))
    chunks = [json.loads(line[6:])["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
              for line in stream.decode().splitlines() if line.startswith("data: ") and "artifactUpdate" in line]
    if b"TASK_STATE_COMPLETED" not in stream or "".join(chunks) != text:
        raise SystemExit(f"the stream did not end completed with the whole answer: {stream[-300:]!r}")
    return {"cpu_s": cpu, "written": wrote, "answer": len(text), "commits": len(chunks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pieces", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import uvloop

    from parley.settings import MEMORY

    uvloop.install()  # as `parley serve` runs

    runs: dict[str, list[dict[str, float]]] = {"sqlite": [], "memory": []}
    for r in range(args.rounds):
        for which in ("sqlite", "memory"):
            with tempfile.TemporaryDirectory() as tmp:
                db = str(Path(tmp) / "t.db") if which == "sqlite" else MEMORY
                out = asyncio.run(one_send(db, args.pieces))
            runs[which].append(out)
            print(f"round {r + 1} {which:6s} cpu {out['cpu_s']:.3f} s, wrote {out['written'] / 1e6:.2f} MB "
                  f"(answer {out['answer']:,} characters in {out['commits']:,.0f} artifact updates)", flush=True)
    med = {w: {k: statistics.median(o[k] for o in v) for k in v[0]} for w, v in runs.items()}
    s, mem = med["sqlite"], med["memory"]
    print(f"\n{args.pieces:,} pieces, {args.rounds} rounds, medians:")
    for w in ("sqlite", "memory"):
        x = med[w]
        print(f"  {w:6s} cpu {x['cpu_s']:.3f} s ({x['cpu_s'] / args.pieces * 1e6:.0f} µs per piece; "
              f"{x['commits']:,.0f} artifact updates), "
              f"wrote {x['written'] / 1e6:.2f} MB = {x['written'] / x['answer']:.1f} bytes per byte of the answer")
    print(f"  SQLite/memory CPU: {s['cpu_s'] / mem['cpu_s']:.2f}x")


if __name__ == "__main__":
    main()
