"""Latency of a shared event bus: from publish in one process to arrival at a subscriber in another.

    python bench/bus_latency.py redis                   # Redis Streams (parley.tasks.redis_bus)
    python bench/bus_latency.py postgres --events 5000  # PostgreSQL LISTEN/NOTIFY (parley.tasks.pg_bus)

This process starts bus B and subscribes to one task; a publisher process (multiprocessing,
spawn) starts bus A on the same namespace and publishes `--events` single-entry batches, one
every `--interval` ms (0: back to back, each publish awaited). Every entry is a status update
whose message text is the publisher's time.time_ns() just before publish(); B records the
arrival time of each entry. Prints p50 / p99 / max in ms, and how many entries were lost
(a None from the subscription counts the entries it covers as lost).

Needs the real services: PARLEY_BENCH_REDIS (default redis://127.0.0.1:6379/0) and
PARLEY_BENCH_POSTGRES (default postgresql://postgres@127.0.0.1:5432/test); the keys and
channels are under a fresh namespace, and the Redis keys are removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from parley.protocol import models as m
from parley.tasks.bus import EventBus
from parley.tasks.log import Entry

REDIS = os.environ.get("PARLEY_BENCH_REDIS", "redis://127.0.0.1:6379/0")
POSTGRES = os.environ.get("PARLEY_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
TASK = "bench-task"


def make_bus(kind: str, namespace: str) -> EventBus:
    if kind == "redis":
        from parley.tasks.redis_bus import RedisBus

        return RedisBus(REDIS, namespace=namespace, buffer=1_000_000)
    from parley.postgres import Postgres
    from parley.tasks.pg_bus import PostgresBus

    return PostgresBus(Postgres(POSTGRES, min_size=1, max_size=2), namespace=namespace, buffer=1_000_000)


def entry(seq: int) -> Entry:
    message = m.Message(message_id=f"b{seq}", role=m.Role.AGENT, parts=[m.Part(text=str(time.time_ns()))],
                        task_id=TASK, context_id="bench")
    return Entry(seq, m.TaskStatusUpdateEvent(task_id=TASK, context_id="bench",
                                              status=m.TaskStatus(state=m.TaskState.WORKING, message=message)))


async def publish(kind: str, namespace: str, events: int, interval: float) -> None:
    bus = make_bus(kind, namespace)
    await bus.start()
    try:
        for seq in range(1, events + 1):
            await bus.publish(TASK, [entry(seq)])
            if interval:
                await asyncio.sleep(interval)
    finally:
        await bus.close()


def publisher_main(kind: str, namespace: str, events: int, interval: float) -> None:
    asyncio.run(publish(kind, namespace, events, interval))


async def measure(kind: str, events: int, interval: float) -> None:
    namespace = f"parley_bench_{secrets.token_hex(4)}"
    bus = make_bus(kind, namespace)
    await bus.start()
    latencies: list[float] = []
    lost = 0
    last = 0
    try:
        with bus.subscribe(TASK) as sub:
            process = multiprocessing.get_context("spawn").Process(
                target=publisher_main, args=(kind, namespace, events, interval))
            process.start()
            started = time.monotonic()
            while last < events:
                batch = await sub.get(timeout=30)
                arrived = time.time_ns()
                if batch == []:
                    print(f"nothing for 30 s after entry {last}; giving up", file=sys.stderr)
                    break
                if batch is None:  # dropped entries: count what the next batch skips
                    continue
                for e in batch:
                    if e.seq <= last:
                        continue
                    lost += e.seq - last - 1
                    last = e.seq
                    sent = int(e.event.status.message.parts[0].text)  # type: ignore[union-attr]
                    latencies.append((arrived - sent) / 1e6)
            elapsed = time.monotonic() - started
            await asyncio.to_thread(process.join, 30)
    finally:
        await bus.close()
        if kind == "redis":
            import redis.asyncio as redis

            client = redis.from_url(REDIS)
            keys = [k async for k in client.scan_iter(match=f"{namespace}:*")]
            if keys:
                await client.delete(*keys)
            await client.aclose()
    if not latencies:
        print("no entries arrived")
        return
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))]

    print(f"{kind}: {len(latencies)} of {events} entries in {elapsed:.2f} s (interval {interval * 1000:g} ms), "
          f"lost {lost + events - last}")
    print(f"  latency ms: p50 {statistics.median(latencies):.3f}  p99 {pct(99):.3f}  max {latencies[-1]:.3f}"
          f"  mean {statistics.fmean(latencies):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["redis", "postgres"])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=1.0, help="ms between publishes (0: back to back)")
    args = parser.parse_args()
    asyncio.run(measure(args.kind, args.events, args.interval / 1000))


if __name__ == "__main__":
    main()
