"""Where the disk bytes of a streamed token go, counted rather than timed: WAL frames and pages per token commit.

    python bench/disk_per_token.py                        # 8 streams x 400 tokens, then 1 stream x 400 tokens
    python bench/disk_per_token.py --streams 100 --tokens 200
    python bench/disk_per_token.py --streams 1 --gap 3 --once  # each token a transaction of its own

Sends `--streams` concurrent `SendStreamingMessage` requests to a Parley app (called as ASGI, no sockets) on a
fresh SQLite file; each agent yields `--tokens` tokens of 5 characters, `--gap` event-loop turns apart, in
lockstep (so the store's group commit gets one commit of each stream per turn: its best case), and then the same
with one stream (one commit per transaction: its worst case; with `--gap 3` each token is a commit of its own). The WAL checkpointer is held off while the streams run, so
that nothing depends on the clock: the WAL then holds every frame the commits wrote, and the script reads its
frame headers. Reported per token:

- WAL bytes: frames x (page size + 24), what the commits handed to the kernel;
- pages per commit (frames / transactions) and which tables and indexes those pages belong to (`dbstat`);
- tail-file bytes: the records the streamed tokens appended to `<db>-tail.<n>` (tail_file), written once;
- checkpoint bytes: the distinct pages the run touched x page size, what one checkpoint at the end writes into
  the database file (a checkpoint every 50 ms, as `parley serve` runs them, writes each page once per round:
  between this and the WAL bytes again);
- `wchar` and `write_bytes` of /proc/self/io over the run (the kernel's counts; `write_bytes` is charged when a
  page of the page cache is first dirtied, so it depends on writeback timing and is only a cross-check).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sqlite3
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
TOKEN = " w{:03d}"


def io_counts() -> dict[str, int]:
    """This process's /proc/self/io counters."""
    out = {}
    for line in Path("/proc/self/io").read_text().splitlines():
        key, value = line.split(":")
        out[key] = int(value)
    return out


def wal_frames(wal: Path) -> tuple[int, list[int], int]:
    """(page size, the page number of each frame in order, transactions) of a WAL file that never restarted."""
    data = wal.read_bytes()
    if len(data) < 32:
        return 4096, [], 0
    page_size = struct.unpack(">I", data[8:12])[0]
    frame = 24 + page_size
    pages, commits = [], 0
    for off in range(32, len(data) - frame + 1, frame):
        pgno, size_after = struct.unpack(">II", data[off:off + 8])
        pages.append(pgno)
        commits += size_after != 0  # a commit frame carries the database size
    return page_size, pages, commits


def page_owners(db: Path) -> dict[int, str]:
    """Which table or index each page of the database belongs to (SQLite's dbstat virtual table)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {pgno: name for name, pgno in con.execute("SELECT name, pageno FROM dbstat")}
    except sqlite3.OperationalError:  # a build without dbstat
        return {}
    finally:
        con.close()


def make_app(db: str, tokens: int, gap: int, group_commit_seconds: float | None = None) -> Any:
    """A Parley app whose agent yields `tokens` tokens, `gap` loop turns apart."""
    from parley import Parley
    from parley.agents.base import FunctionAgent

    async def streamer(ctx: Any) -> Any:
        for i in range(tokens):
            yield TOKEN.format(i % 1000)
            for _ in range(gap):
                await asyncio.sleep(0)

    app = Parley()
    app.add_agent(FunctionAgent(streamer, id="streamer", name="Streamer"))
    return app.asgi(app.settings.merged(db=db, group_commit_seconds=group_commit_seconds))


async def run(db: Path, streams: int, tokens: int, gap: int = 1,
              group_commit_seconds: float | None = None) -> dict[str, Any]:
    """Stream `streams` x `tokens` tokens into a fresh database at `db`; what the WAL and the kernel counted."""
    import app_cost

    asgi = make_app(str(db), tokens, gap, group_commit_seconds)
    answers: list[bytes] = []
    async with app_cost.lifespan(asgi):
        wal = Path(str(db) + "-wal")
        _, before, before_commits = wal_frames(wal)
        io0 = io_counts()
        await asyncio.gather(*(app_cost._one(asgi, n, answers, "SendStreamingMessage") for n in range(streams)))
        io1 = io_counts()
        tail_bytes = sum(f.stat().st_size for f in db.parent.glob(db.name + "-tail.*"))  # streamed tokens' records
        page_size, frames, commits = wal_frames(wal)
        frames, commits = frames[len(before):], commits - before_commits
    text = "".join(TOKEN.format(i % 1000) for i in range(tokens))
    for stream in answers:
        chunks = [json.loads(line[6:])["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
                  for line in stream.decode().splitlines() if line.startswith("data: ") and "artifactUpdate" in line]
        if b"TASK_STATE_COMPLETED" not in stream or "".join(chunks) != text:
            raise SystemExit(f"a stream did not end completed with the whole answer: {stream[-300:]!r}")
    owners = page_owners(db)
    by_owner = collections.Counter(owners.get(p, "(freed/other)") for p in frames)
    n = streams * tokens
    return {"page_size": page_size, "frames": len(frames), "commits": commits, "distinct": len(set(frames)),
            "tokens": n, "tail_bytes": tail_bytes, "wchar": io1["wchar"] - io0["wchar"], "write_bytes": io1["write_bytes"] - io0["write_bytes"],
            "by_owner": by_owner}


def report(streams: int, tokens: int, out: dict[str, Any]) -> None:
    n, page = out["tokens"], out["page_size"]
    wal = out["frames"] * (page + 24)
    ckpt = out["distinct"] * page
    print(f"{streams} stream(s) x {tokens} tokens, page size {page}: {out['commits']:,} transactions, "
          f"{out['frames']:,} WAL frames ({out['frames'] / max(1, out['commits']):.2f} pages per transaction, "
          f"{out['frames'] / n:.2f} per token), {out['distinct']:,} distinct pages")
    tail = out["tail_bytes"]
    print(f"  per token: WAL {wal / n:,.0f} B + checkpoint {ckpt / n:,.0f} B (up to {wal / n:,.0f}) + tail file "
          f"{tail / n:,.0f} B = {(wal + ckpt + tail) / n:,.0f} B; kernel: wchar {out['wchar'] / n:,.0f} B, write_bytes {out['write_bytes'] / n:,.0f} B")
    print("  WAL frames by table/index: " + ", ".join(f"{k} {v / n:.2f}" for k, v in out["by_owner"].most_common()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--gap", type=int, default=1,
                    help="loop turns between a stream's tokens (1: two tokens often share a commit; 3: each "
                         "token is a commit of its own, as with an LLM's tokens 50 ms apart)")
    ap.add_argument("--page-size", type=int, default=None,
                    help="the page size of the new database (default: the store's, sqlite_store.PAGE_SIZE)")
    ap.add_argument("--group-commit-seconds", type=float, default=None,
                    help="the store's group-commit interval (default: Settings'; 0: off, each token committed as "
                         "soon as it is ready, as a token of an LLM 50 ms after the previous write is)")
    ap.add_argument("--once", action="store_true", help="only the --streams run, not the one-stream run after it")
    args = ap.parse_args()
    from parley.tasks import sqlite_store

    # no checkpoint while the streams run (see the docstring): the WAL keeps every frame, nothing depends on time
    sqlite_store.SqliteTaskStore.__init__.__kwdefaults__["wal_checkpoint_seconds"] = 3600.0
    if args.page_size is not None:  # to compare: --page-size 4096 is what the store used before schema 9
        sqlite_store.PAGE_SIZE = args.page_size
    for streams in dict.fromkeys((args.streams,) if args.once else (args.streams, 1)):
        with tempfile.TemporaryDirectory(dir=HERE.parent) as tmp:  # a real disk, not a tmpfs
            out = asyncio.run(run(Path(tmp) / "t.db", streams, args.tokens, args.gap, args.group_commit_seconds))
        report(streams, args.tokens, out)


if __name__ == "__main__":
    main()
