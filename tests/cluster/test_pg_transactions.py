"""What one send costs PostgreSQL (issue 25): at most 2 write transactions for a unary SendMessage and 3 for a
SendStreamingMessage of the echo agent, on a replica with the PostgreSQL store and the PostgreSQL bus.

It was 5.4-6 transactions per unary send and 8.6-12.7 per stream (bench/RESULTS.md, scale-out run): the pool
ran asyncpg's reset (`pg_advisory_unlock_all(); ...`) as a transaction of its own on every release, the bus
sent each commit's NOTIFY in a transaction of its own, and the push dispatcher read the outbox twice after every
commit, webhook or not. Now a send is the creating commit and the settling one; the NOTIFY rides in the
commit's statement, and the commit itself says whether the task has a webhook.

Counted with PostgreSQL's own transaction ids: every write transaction (a NOTIFY too) takes one, so the
difference of `pg_current_xact_id()` before and after N sends, less this test's own two reads of it, is what
the sends wrote (a replica idle between sends writes nothing: no lease to renew, no outbox to drain). Reads
were counted once with `log_statement = all` (bench/RESULTS.md): none per send.

Transaction ids are the whole PostgreSQL server's: another program writing meanwhile (CI runs other suites on
the same server) can only add to a window's count, never take from it. So each test counts WINDOWS windows and
keeps the smallest: a replica that really wrote more fails every window.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from replicas import Replica, replicas

from services import POSTGRES, PostgresSchema, require_postgres, run_sync

V1 = {"A2A-Version": "1.0"}
SENDS = 20
SLACK = 2  # a background write that may fall in the window (the key store's last-use stamp, a lease)
WINDOWS = 3


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    require_postgres()
    schema = PostgresSchema().create()
    try:
        with replicas(tmp_path_factory.mktemp("xacts"), schema.url, count=1) as (one,):
            yield one
    finally:
        schema.drop()


async def _xid() -> int:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES)
    try:
        return int(await conn.fetchval("SELECT pg_current_xact_id()::text"))
    finally:
        await conn.close()


def xid() -> int:
    """PostgreSQL's next transaction id (this read takes one)."""
    return run_sync(_xid())


def body(method: str) -> dict:
    msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hello there general kenobi"}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": msg}}


def writes_per_window(send: Callable[[], None]) -> int:
    """The fewest write transactions PostgreSQL counted over WINDOWS windows of SENDS calls of `send` (others'
    writes only inflate a window)."""
    counts = []
    for _ in range(WINDOWS):
        before = xid()
        for _ in range(SENDS):
            send()
        counts.append(xid() - before - 1)
    return min(counts)


def test_a_unary_send_is_at_most_two_write_transactions(replica: Replica) -> None:
    with httpx.Client(timeout=30) as client:
        client.post(f"{replica.url}/a2a/echo", json=body("SendMessage"), headers=V1)  # warm: schema, caches

        def send() -> None:
            r = client.post(f"{replica.url}/a2a/echo", json=body("SendMessage"), headers=V1)
            assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        written = writes_per_window(send)
    assert written <= 2 * SENDS + SLACK, f"{written / SENDS:.2f} write transactions per unary send"


def test_a_stream_is_at_most_three_write_transactions(replica: Replica) -> None:
    with httpx.Client(timeout=30) as client:

        def send() -> None:
            with client.stream("POST", f"{replica.url}/a2a/echo", json=body("SendStreamingMessage"),
                               headers=V1) as r:
                lines = [line for line in r.iter_lines() if line.startswith("data:")]
            assert "TASK_STATE_COMPLETED" in lines[-1]

        written = writes_per_window(send)
    assert written <= 3 * SENDS + SLACK, f"{written / SENDS:.2f} write transactions per stream"


def test_the_bus_still_reaches_a_subscriber_on_the_same_replica(replica: Replica, tmp_path: Path) -> None:
    """The NOTIFY now sent inside the commit's statement still reaches followers (a SubscribeToTask of a running
    task, answered from the bus)."""
    with httpx.Client(timeout=30) as client:
        started = client.post(f"{replica.url}/a2a/ticker", json={**body("SendMessage"), "params": {
            "message": {**body("SendMessage")["params"]["message"], "parts": [{"text": "12"}]},
            "configuration": {"returnImmediately": True}}}, headers=V1).json()["result"]["task"]
        sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": started["id"]}}
        with client.stream("POST", f"{replica.url}/a2a/ticker", json=sub, headers=V1) as r:
            frames = [line for line in r.iter_lines() if line.startswith("data:")]
    assert "TASK_STATE_COMPLETED" in frames[-1]
    assert sum('"artifactUpdate"' in f for f in frames) >= 1
