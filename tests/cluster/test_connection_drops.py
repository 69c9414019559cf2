"""PostgreSQL drops Parley's connections (`pg_terminate_backend`, as a failover or a proxy restart does) while
tasks stream on two replicas: nothing fails (issue 27 item 1). Real `parley serve` processes on the real
PostgreSQL, for both shared buses (Redis Streams and PostgreSQL LISTEN/NOTIFY).

The engine's rule (src/parley/tasks/engine.py, `_commit`): a commit that fails because the database cannot be
reached is re-checked (its entries are in the log: it was written) and retried, idempotently (a compare-and-set
on the log's seq plus the message's idempotency key); only past a bounded retry budget is the run left to be
resumed from its checkpoint once its lease expires, never failed for a fault that is not the agent's. A request
that meets a dropped connection is answered UNAVAILABLE (-31503, HTTP 503 with Retry-After: A2A 1.0 section
5.4 / 11.6), and the same request sent again succeeds (a SendMessage with the same messageId is a retry,
section 3.1.1). A2A 1.0 section 3.1.6 SubscribeToTask: a subscriber resumes with `Last-Event-ID` and sees each
event once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from replicas import Replica, outage, replicas, terminate_in_flight
from test_replicas import events, state_of

from parley.tasks.engine import RESUME_MESSAGE
from services import PostgresSchema, drop_redis_keys, require_postgres, require_redis, unique

V1 = {"A2A-Version": "1.0"}
WAIT = 60.0  # a failure detector for one task's run, drops included
TASKS = 6  # running tasks, half on each replica
TICKS = 60  # artifact updates per task, each with a checkpoint (one every 50 ms: about 3 s of streaming)
DROPS = 3  # times every connection of the deployment is terminated while the tasks stream
LEASE = 2.0  # seconds a run's lease lasts without renewal
BUDGET = 1.0  # the impatient deployment's commit_retry_seconds
OUTAGE = 4.0  # seconds the database stays away in the second test (longer than BUDGET and LEASE)
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


@contextmanager
def _deployment(bus: str, folder: Path, extra: str = "") -> Iterator[tuple[list[Replica], str, list[str]]]:
    """Two replicas whose PostgreSQL connections carry an application_name of their own; (replicas, the
    schema's URL, the application names of their connections: the pool's and the LISTEN bus's)."""
    require_postgres()
    redis = (require_redis(), unique("parley_t")) if bus == "redis" else None
    schema = PostgresSchema().create()
    app = unique("parley_drop")
    namespace = redis[1] if redis is not None else "t" + uuid.uuid4().hex[:8]
    try:
        with replicas(folder, f"{schema.url}&application_name={app}", redis=redis, namespace=namespace,
                      lease_seconds=LEASE, extra=extra) as started:
            yield started, schema.url, [app, f"parley-bus {namespace}"]
    finally:
        schema.drop()
        if redis is not None:
            drop_redis_keys(redis[1])


@pytest.fixture(params=["redis", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[Replica], str, list[str]]]:
    with _deployment(request.param, tmp_path) as dep:
        yield dep


@pytest.fixture(params=["redis", "postgres"])
def impatient(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[Replica], str, list[str]]]:
    """The same, with a retry budget of 1 s: an outage of a few seconds outlasts it."""
    with _deployment(request.param, tmp_path, f"commit_retry_seconds = {BUDGET}") as dep:
        yield dep


def send(replica: Replica, agent: str, text: str, *, wait: bool) -> dict:
    """SendMessage, sent again (same messageId: a retry) while the answer is UNAVAILABLE; returns the task."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]},
                       "configuration": {"returnImmediately": not wait}}}
    deadline = time.monotonic() + WAIT
    while True:
        r = httpx.post(f"{replica.url}/a2a/{agent}", json=body, headers=V1, timeout=WAIT)
        if r.status_code == 503 and time.monotonic() < deadline:
            assert r.json()["error"]["code"] == -31503, r.text  # UNAVAILABLE, retryable
            assert r.headers.get("retry-after"), r.headers
            time.sleep(0.1)  # the client's back-off before its retry
            continue
        assert r.status_code == 200, r.text
        assert "result" in r.json(), (r.json(), replica.output())
        return r.json()["result"]["task"]


class Subscriber(threading.Thread):
    """SubscribeToTask until the task ends, resuming with Last-Event-ID when the stream breaks; keeps every
    (seq, result) received, repeats included."""

    def __init__(self, replica: Replica, task_id: str) -> None:
        super().__init__(daemon=True)
        self.replica, self.task_id = replica, task_id
        self.got: list[tuple[int, dict]] = []
        self.errors: list[str] = []
        self.attached = threading.Event()
        self.done = False

    def run(self) -> None:
        deadline = time.monotonic() + WAIT
        sub = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": self.task_id}}
        while time.monotonic() < deadline and not self.done:
            headers = {**V1, "Last-Event-ID": str(self.got[-1][0] if self.got else 0)}
            try:
                with httpx.Client(timeout=WAIT) as client, connect_sse(
                        client, "POST", f"{self.replica.url}/a2a/counter", json=sub, headers=headers) as stream:
                    if stream.response.status_code != 200:
                        self.errors.append(f"HTTP {stream.response.status_code}")
                        time.sleep(0.1)  # the subscriber's back-off before it resubscribes
                        continue
                    self.attached.set()
                    for seq, result in events(stream):
                        self.got.append((seq, result))
                        if state_of(result) in TERMINAL:
                            self.done = True
            except (httpx.HTTPError, AssertionError) as exc:  # the stream broke (or ended with an error frame)
                self.errors.append(repr(exc))
                time.sleep(0.1)  # the subscriber's back-off before it resubscribes


def ticks_seen(sub: Subscriber) -> int:
    return sum(1 for _, r in sub.got if "artifactUpdate" in r)


def test_dropped_connections_neither_fail_running_tasks_nor_lose_events(
        deployment: tuple[list[Replica], str, list[str]]) -> None:
    """6 counter tasks (60 artifact updates each, a checkpoint after each: commits the run waits for) run on A and B, each followed by a subscriber on the other
    replica. While they stream, every PostgreSQL connection of the deployment (the replicas' pools and the
    LISTEN connections) is terminated 3 times, and after each drop a new blocking send goes to each replica.
    Every task completes with all its ticks, none fails; each subscriber saw the task's events with seqs
    1..N, each once, ending `completed`; each new send succeeds (a retry after UNAVAILABLE allowed)."""
    (a, b), url, names = deployment
    tasks = [(r, send(r, "counter", str(TICKS), wait=False)["id"]) for r in (a, b) * (TASKS // 2)]
    subs = [Subscriber(b if r is a else a, task_id) for r, task_id in tasks]
    for s in subs:
        s.start()
    for s in subs:
        assert s.attached.wait(WAIT), s.errors
    sends = []
    for drop in range(DROPS):
        target = (drop + 1) * TICKS // (DROPS + 2)
        deadline = time.monotonic() + WAIT
        while min(ticks_seen(s) for s in subs) < target and time.monotonic() < deadline:
            time.sleep(0.02)  # polling what the subscribers saw, with a deadline
        with ThreadPoolExecutor(2) as pool:  # a new send to each replica, its creation's commit in flight
            sending = [pool.submit(send, r, "ticker", "3", wait=True) for r in (a, b)]
            assert terminate_in_flight(url, names, waiting=2 + sum(not s.done for s in subs)) > 0
            sends += [f.result() for f in sending]
    for s in subs:
        s.join(WAIT)
        assert not s.is_alive(), f"subscriber of {s.task_id} did not see the end: {s.errors}"

    for sent in sends:
        assert sent["status"]["state"] == "TASK_STATE_COMPLETED", sent
    check_completed(tasks, subs)


def check_completed(tasks: list[tuple[Replica, str]], subs: list[Subscriber]) -> list[dict]:
    """Every task completed with every tick once, in order; each subscriber saw seqs 1..N once each, the
    ticks in order, ending `completed`. Returns the tasks (GetTask)."""
    found = []
    for (r, task_id), sub in zip(tasks, subs, strict=True):
        task = httpx.post(f"{r.url}/a2a/counter", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                        "params": {"id": task_id}}, headers=V1,
                          timeout=WAIT).json()["result"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", (task["status"], r.output())
        assert [x["artifactId"] for x in task.get("artifacts") or []] == [f"tick-{i}" for i in range(TICKS)]
        seqs = [s for s, _ in sub.got]
        assert seqs == list(range(1, len(seqs) + 1)), (seqs, sub.errors)  # each event once, none missed
        assert "task" in sub.got[0][1]
        seen = [x["artifactUpdate"]["artifact"]["artifactId"] for _, x in sub.got if "artifactUpdate" in x]
        snapshot = [x["artifactId"] for x in sub.got[0][1]["task"].get("artifacts") or []]
        assert snapshot + seen == [f"tick-{i}" for i in range(TICKS)], (snapshot, seen)
        assert state_of(sub.got[-1][1]) == "TASK_STATE_COMPLETED", sub.got[-1]
        found.append(task)
    return found


def test_a_database_away_past_the_retry_budget_leaves_tasks_to_be_resumed_not_failed(
        impatient: tuple[list[Replica], str, list[str]]) -> None:
    """The same tasks, on replicas that try a commit again for 1 s (commit_retry_seconds). The database stays
    away for 4 s (writes held, every connection terminated every 200 ms): commits, lease renewals and
    takeovers all fail. Past its budget each run stops without writing and without failing its task; once
    the database is back its lease has expired and recovery resumes it from its checkpoint (status
    RESUME_MESSAGE), so every task still completes with every tick once and the subscribers see each event
    once."""
    (a, b), url, names = impatient
    tasks = [(r, send(r, "counter", str(TICKS), wait=False)["id"]) for r in (a, b) * (TASKS // 2)]
    subs = [Subscriber(b if r is a else a, task_id) for r, task_id in tasks]
    for s in subs:
        s.start()
    deadline = time.monotonic() + WAIT
    while min(ticks_seen(s) for s in subs) < TICKS // 4 and time.monotonic() < deadline:
        time.sleep(0.02)  # polling what the subscribers saw, with a deadline
    assert outage(url, names, OUTAGE) > 0
    for s in subs:
        s.join(WAIT)
        assert not s.is_alive(), f"subscriber of {s.task_id} did not see the end: {s.errors}"
    for task in check_completed(tasks, subs):
        said = ["".join(p.get("text", "") for p in h["parts"]) for h in task.get("history") or []]
        assert RESUME_MESSAGE in said, said  # left by its run, resumed by recovery
