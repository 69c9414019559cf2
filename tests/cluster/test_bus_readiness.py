"""/readyz reflects the bus, and a bus that is down does not flood the log (issue 27, item 2; docs/operations.md,
"Health and stopping").

A replica whose Redis went away answered /readyz "bus": "ok" (neither shared bus checked anything) and
logged one warning per commit (about 260 lines in 13 s). Now /readyz PINGs Redis (PostgresBus: a query on its
listening connection) and says 503 with the reason while it cannot, and the failed publishes are one line per
10 s with a count. Tasks keep being served meanwhile (the store is PostgreSQL; followers read it). Real
processes: a redis-server of the test's own on a free port, a `parley serve` replica on it and on a fresh
PostgreSQL schema; the test stops that Redis and starts it again.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
from replicas import replicas

from services import PostgresSchema, require_postgres, unique
from support import PrivateRedis, rpc

WAIT = 30.0  # a failure detector only


def readyz(url: str) -> httpx.Response:
    return httpx.get(f"{url}/readyz", timeout=10)


def wait_readyz(url: str, status: int) -> dict:
    """The /readyz body once it answers `status` (polled with a deadline)."""
    deadline = time.monotonic() + WAIT
    while True:
        resp = readyz(url)
        if resp.status_code == status:
            return resp.json()
        assert time.monotonic() < deadline, f"/readyz still {resp.status_code} after {WAIT} s: {resp.text}"
        time.sleep(0.1)


def send(url: str, text: str) -> dict:
    params = {"message": {"messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER", "parts": [{"text": text}]}}
    resp = rpc(f"{url}/a2a/echo", "SendMessage", params, version="1.0")
    assert resp.status_code == 200 and "result" in resp.json(), resp.text
    return resp.json()["result"]["task"]


def publish_warnings(log: Path) -> int:
    return log.read_text(errors="replace").count("events on the bus failed")


def test_readyz_follows_redis_and_publish_warnings_are_bounded(tmp_path: Path) -> None:
    require_postgres()
    schema = PostgresSchema().create()
    redis = PrivateRedis().start()
    try:
        with replicas(tmp_path, schema.url, redis=(redis.url, unique("t_busready")), count=1) as [replica]:
            assert wait_readyz(replica.url, 200)["checks"]["bus"] == "ok"

            redis.stop()
            down = wait_readyz(replica.url, 503)
            assert down["checks"]["bus"] != "ok" and down["checks"]["store"] == "ok", down

            started = time.monotonic()
            sends = 0
            while sends < 60 or time.monotonic() - started < 3:  # many commits, each publish failing
                assert send(replica.url, f"while the bus is down {sends}")["status"]["state"] == \
                    "TASK_STATE_COMPLETED"
                sends += 1
            elapsed = time.monotonic() - started
            warned = publish_warnings(replica.log)
            assert 1 <= warned <= 1 + int(elapsed // 10) + 1, (warned, sends, elapsed, replica.output())
            assert readyz(replica.url).status_code == 503

            redis.start()
            assert wait_readyz(replica.url, 200)["checks"]["bus"] == "ok"
            assert send(replica.url, "the bus is back")["status"]["state"] == "TASK_STATE_COMPLETED"
            assert "publishing on the bus works again" in replica.log.read_text(errors="replace")
    finally:
        redis.stop()
        schema.drop()
