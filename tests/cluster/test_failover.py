"""Failover between `parley serve` replicas: a replica dies (SIGKILL) and the deployment goes on without it.
Real processes sharing a real PostgreSQL (and, for the Redis deployment, a real Redis), a real webhook.

The engine's rules (src/parley/tasks/engine.py): a running task is leased by the replica running it,
renewed every lease_seconds/3; every replica's heartbeat calls `recover()`, which claims tasks whose lease
expired and resumes them from their checkpoint (status `working` with RESUME_MESSAGE, then the agent again
with `ctx.checkpoint`), or fails them with RESTART_MESSAGE when there is none. A settled state is
committed before anyone hears of it, so what a client was told survives the replica that told it.
Push (docs/push.md): notifications are written to an outbox in the commit of the change; every replica
runs a dispatcher, and `due_notifications` claims a notification for one of them, so a webhook gets each
attempt once (`Parley-Signature`'s `jti` is `<event id>.<attempt>.<random>`, its `iss` the sending replica).

A2A 1.0 (a2aproject/A2A docs/specification.md): 3.1.1 SendMessage, 3.1.2 SendStreamingMessage, 3.1.4
GetTask, 3.1.5 ListTasks, 3.1.6 SubscribeToTask (resumable here with SSE `Last-Event-ID`), 3.1.7
CreateTaskPushNotificationConfig and 4.3 push notifications (configuration.taskPushNotificationConfig).

Each test gets a fresh victim replica (A) of a deployment whose survivor (B) lives for the module; the
victim is SIGKILLed (Replica.kill) while it holds a task's lease, and B takes over once the lease expires.
The bus matters for the takeover and for streams (those tests run on Redis and on PostgreSQL LISTEN/NOTIFY);
the others run on one deployment each. Two push tests guard against a bug they found in
PostgresTaskStore.due_notifications (a notification claimed by two replicas; see the note below).
Waits are bounded polls or event-driven waits with deadlines: failure detectors, never synchronisation by
sleeping and never timing assertions.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from replicas import Replica, write_config
from test_replicas import events

from parley.tasks.engine import RESTART_MESSAGE, RESUME_MESSAGE
from services import PostgresSchema, drop_redis_keys, require_postgres, require_redis, run_sync, unique

V1 = {"A2A-Version": "1.0"}
WAIT = 30.0  # the longest one observable step may take (a lease of 2 s expiring included); a failure detector
LEASE = 2.0
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
TOKEN = "failover-token"
# Webhooks on 127.0.0.1 are allowed (docs/push.md: "The test suite allows 127.0.0.1 only"); artifact updates
# are notified too (more notifications per task); retries are quick; both dispatchers read the outbox often,
# so the survivor's dispatcher competes for every notification the victim's wakes up for.
PUSH = """
[push]
allow = ["127.0.0.1/32"]
artifact_updates = true
backoff_seconds = 0.02
max_backoff_seconds = 0.04
max_attempts = 500
poll_seconds = 0.05

[[agents]]
id = "writer"
type = "python"
entry = "cluster_agents:writer"
"""


def _webhooks_module() -> ModuleType:
    """tests/push/webhooks.py (the recording webhook receiver) under a name of its own."""
    name = "cluster_failover_webhooks"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parent.parent / "push" / "webhooks.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


webhooks = _webhooks_module()


# --- the deployment ------------------------------------------------------------------------------------------------


@dataclass
class Deployment:
    """One deployment's config, and its survivor B (lives for the module); victims come and go."""

    folder: Path
    config: Path
    bus: str
    url: str  # the PostgreSQL schema's URL
    survivor: Replica | None = None
    started: list[Replica] = field(default_factory=list)

    def replica(self, name: str) -> Replica:
        r = Replica(self.config, self.folder / f"{name}-{len(self.started)}.log", name=name)
        self.started.append(r)
        return r.wait_ready()


@pytest.fixture(scope="module", params=["redis", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A deployment (its own schema and, for Redis, key prefix) with its survivor replica running."""
    require_postgres()
    redis = (require_redis(), unique("parley_t")) if request.param == "redis" else None
    schema = PostgresSchema().create()
    folder = tmp_path_factory.mktemp(f"failover-{request.param}")
    namespace = redis[1] if redis is not None else "t" + uuid.uuid4().hex[:8]
    config = write_config(folder, schema.url, redis=redis, namespace=namespace, lease_seconds=LEASE, extra=PUSH)
    dep = Deployment(folder, config, request.param, schema.url)
    try:
        dep.survivor = dep.replica("B")
        yield dep
    finally:
        try:
            for r in dep.started:
                r.stop()
        finally:
            schema.drop()
            if redis is not None:
                drop_redis_keys(redis[1])


@pytest.fixture
def pair(deployment: Deployment) -> Iterator[tuple[Replica, Replica]]:
    """(A, B): a fresh victim replica A and the deployment's survivor B. A is stopped afterwards if alive."""
    assert deployment.survivor is not None
    assert deployment.survivor.proc.poll() is None, deployment.survivor.output()
    victim = deployment.replica("A")
    try:
        yield victim, deployment.survivor
    finally:
        victim.stop()


@pytest.fixture(scope="module")
def hooks() -> Iterator[Any]:
    """The webhook receiver (tests/push/webhooks.py) on 127.0.0.1; each test uses its own path."""
    receiver = webhooks.Webhooks().start()
    yield receiver
    receiver.stop()


# --- talking to a replica ------------------------------------------------------------------------------------------


def rpc(replica: Replica, agent: str, method: str, params: dict) -> Any:
    r = httpx.post(f"{replica.url}/a2a/{agent}", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                   headers=V1, timeout=WAIT)
    assert r.status_code == 200, r.text
    body = r.json()
    assert "result" in body, body
    return body["result"]


def message(text: str, context_id: str | None = None) -> dict:
    msg = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if context_id is not None:
        msg["contextId"] = context_id
    return msg


def send(replica: Replica, agent: str, text: str, *, wait: bool, context_id: str | None = None,
         push_url: str | None = None) -> dict:
    """SendMessage; the task (at once with wait=False: it keeps running on `replica`)."""
    configuration: dict[str, Any] = {"returnImmediately": not wait}
    if push_url is not None:
        configuration["taskPushNotificationConfig"] = {"url": push_url, "token": TOKEN}
    result = rpc(replica, agent, "SendMessage", {"message": message(text, context_id),
                                                 "configuration": configuration})
    assert set(result) == {"task"}, result
    return result["task"]


def get_task(replica: Replica, agent: str, task_id: str) -> dict:
    return rpc(replica, agent, "GetTask", {"id": task_id})


def text_of(msg: dict | None) -> str | None:
    return None if msg is None else "".join(p.get("text", "") for p in msg["parts"])


def status_text(task: dict) -> str | None:
    return text_of(task["status"].get("message"))


def wait_task(replica: Replica, agent: str, task_id: str, predicate: Callable[[dict], bool], what: str) -> dict:
    """GetTask on `replica` until `predicate(task)` holds (a bounded poll)."""
    deadline = time.monotonic() + WAIT
    while True:
        task = get_task(replica, agent, task_id)
        if predicate(task):
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WAIT:g} s; the task is {json.dumps(task)[:2000]}\n"
                                 f"{replica.name}'s output:\n{replica.output()}")
        time.sleep(0.05)  # polling the store with a deadline


def terminal(task: dict) -> bool:
    return task["status"]["state"] in TERMINAL


def replay(replica: Replica, agent: str, task_id: str) -> list[tuple[int, dict]]:
    """The whole log of a finished task: SubscribeToTask with Last-Event-ID 0 (the stream ends at its end)."""
    sub = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    with httpx.Client(timeout=WAIT) as client, connect_sse(client, "POST", f"{replica.url}/a2a/{agent}", json=sub,
                                                         headers={**V1, "Last-Event-ID": "0"}) as stream:
        return list(events(stream))


def state_of(result: dict) -> str | None:
    if "statusUpdate" in result:
        return result["statusUpdate"]["status"]["state"]
    if "task" in result:
        return result["task"]["status"]["state"]
    return None


def statuses(entries: list[tuple[int, dict]]) -> list[tuple[str, str | None]]:
    """(state, status message text) of each status update of a log."""
    return [(r["statusUpdate"]["status"]["state"], text_of(r["statusUpdate"]["status"].get("message")))
            for _, r in entries if "statusUpdate" in r]


def artifact_texts(entries: list[tuple[int, dict]]) -> list[str]:
    """The text of every artifact update of a log, in order."""
    return ["".join(p.get("text", "") for p in r["artifactUpdate"]["artifact"]["parts"])
            for _, r in entries if "artifactUpdate" in r]


def check_log_shape(entries: list[tuple[int, dict]]) -> None:
    """A log as replayed: seqs 1..N without gaps or repeats, the task first, one terminal status, last."""
    seqs = [s for s, _ in entries]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert "task" in entries[0][1], entries[0]
    ends = [s for s, r in entries if state_of(r) in TERMINAL]
    assert ends == [seqs[-1]], (ends, entries)


# --- 1. a checkpointed task resumes on the survivor ----------------------------------------------------------------


def test_checkpointed_task_resumes_on_the_survivor(pair: tuple[Replica, Replica]) -> None:
    """`stepper` runs on A (checkpoint at step 1, then waits); A is SIGKILLed with the lease held. Once the
    lease expires B claims the task and resumes it from the checkpoint: the task completes with B's answer,
    GetTask on B shows it `completed`, and its log, history and artifacts hold each thing once: the resume
    status once, the resumed answer once (one artifact), nothing A wrote after its checkpoint repeated."""
    a, b = pair
    task = send(a, "stepper", "go", wait=False)
    task_id = task["id"]
    step1 = f"step 1 done on pid {a.proc.pid}"
    wait_task(b, "stepper", task_id, lambda t: status_text(t) == step1, "stepper at step 1 on A")
    a.kill()

    done = wait_task(b, "stepper", task_id, terminal, "the task taken over by B")
    answer = f"resumed at step 1 on pid {b.proc.pid}"
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    arts = done.get("artifacts") or []
    assert len(arts) == 1, arts  # the resumed run's answer, one artifact, written once
    assert "".join(p.get("text", "") for p in arts[0]["parts"]) == answer, arts
    history = done.get("history") or []
    assert [text_of(h) for h in history if h["role"] == "ROLE_USER"] == ["go"], history
    assert [text_of(h) for h in history if h["role"] == "ROLE_AGENT"] == [step1, RESUME_MESSAGE], history
    assert len({h["messageId"] for h in history}) == len(history), history

    log = replay(b, "stepper", task_id)
    check_log_shape(log)
    assert statuses(log) == [("TASK_STATE_WORKING", None), ("TASK_STATE_WORKING", step1),
                             ("TASK_STATE_WORKING", RESUME_MESSAGE), ("TASK_STATE_COMPLETED", None)], log
    assert "".join(artifact_texts(log)) == answer, artifact_texts(log)  # the answer's text, once


@pytest.mark.parametrize("deployment", ["postgres"], indirect=True)
def test_text_written_after_the_checkpoint_is_not_duplicated_by_the_resumed_run(
        pair: tuple[Replica, Replica]) -> None:
    """`writer` on A: text, checkpoint, more text (committed: a status follows it), then waits. A is SIGKILLed;
    B resumes from the checkpoint and the agent writes the text after the checkpoint again. The engine undid
    what A wrote after the checkpoint (`_undo_after`: the text artifact is reset to what it was then),
    so the answer holds each sentence once."""
    a, b = pair
    task_id = send(a, "writer", "go", wait=False)["id"]
    waiting = f"waiting on pid {a.proc.pid}"
    before = wait_task(b, "writer", task_id, lambda t: status_text(t) == waiting, "writer waiting on A")
    assert ["".join(p.get("text", "") for p in x["parts"]) for x in before.get("artifacts") or []] == [
        "before the checkpoint. after the checkpoint. "], before  # A's text after the checkpoint is committed
    a.kill()

    done = wait_task(b, "writer", task_id, terminal, "the task taken over by B")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    texts = ["".join(p.get("text", "") for p in x["parts"]) for x in done.get("artifacts") or []]
    assert texts == [f"before the checkpoint. after the checkpoint. resumed on pid {b.proc.pid}"], texts
    log = replay(b, "writer", task_id)
    check_log_shape(log)
    assert [t for t, _ in statuses(log)][-1] == "TASK_STATE_COMPLETED", log
    assert [m for _, m in statuses(log)].count(RESUME_MESSAGE) == 1, statuses(log)


# --- 2. a task without checkpoint fails on the survivor ------------------------------------------------------------


@pytest.mark.parametrize("deployment", ["postgres"], indirect=True)
def test_task_without_checkpoint_fails_with_the_restart_message(pair: tuple[Replica, Replica]) -> None:
    """`waiter` runs on A (no checkpoint); A is SIGKILLed. Once the lease expires B claims the task and fails
    it with the engine's RESTART_MESSAGE: `failed`, once, as the log's last entry."""
    a, b = pair
    task_id = send(a, "waiter", "go", wait=False)["id"]
    started = f"started on pid {a.proc.pid}"
    wait_task(b, "waiter", task_id, lambda t: status_text(t) == started, "waiter running on A")
    a.kill()

    done = wait_task(b, "waiter", task_id, terminal, "the task taken over by B")
    assert done["status"]["state"] == "TASK_STATE_FAILED", done
    assert status_text(done) == RESTART_MESSAGE, done
    assert not done.get("artifacts"), done
    log = replay(b, "waiter", task_id)
    check_log_shape(log)
    assert statuses(log) == [("TASK_STATE_WORKING", None), ("TASK_STATE_WORKING", started),
                             ("TASK_STATE_FAILED", RESTART_MESSAGE)], log


# --- 3. a subscriber of the dead replica follows the takeover on the survivor --------------------------------------


@pytest.mark.parametrize("agent", ["stepper", "waiter"])
def test_subscriber_reconnects_to_the_survivor_and_sees_the_takeover(agent: str,
                                                                     pair: tuple[Replica, Replica]) -> None:
    """A client streams a task from A (SendStreamingMessage); A is SIGKILLed mid-stream and the connection
    breaks. The client resubscribes on B with Last-Event-ID (3.1.6) at once, before B took the task over:
    it gets every later event exactly once, in order, without gaps (the resume status and the answer for
    `stepper`, the failure with RESTART_MESSAGE for `waiter`), and the stream ends at the terminal state."""
    a, b = pair
    marker = f"on pid {a.proc.pid}"  # stepper: "step 1 done on pid A", waiter: "started on pid A"
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message("go")}}
    seen: list[tuple[int, dict]] = []
    with httpx.Client(timeout=WAIT) as client, connect_sse(client, "POST", f"{a.url}/a2a/{agent}", json=body,
                                                         headers=V1) as stream:
        try:
            for seq, result in events(stream):
                seen.append((seq, result))
                msg = result.get("statusUpdate", {}).get("status", {}).get("message")
                if msg is not None and marker in (text_of(msg) or ""):
                    a.kill()  # the replica dies under the open stream
        except httpx.TransportError:
            pass  # the connection broke with A (or ended): the client reconnects elsewhere
    assert a.proc.poll() is not None, f"A was never seen at {marker!r}: {seen}"  # the kill happened mid-stream
    assert not any(state_of(r) in TERMINAL for _, r in seen), seen  # A's stream did not end the task
    task_id = seen[0][1]["task"]["id"]
    last_id = seen[-1][0]

    sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}
    with httpx.Client(timeout=WAIT) as client, connect_sse(client, "POST", f"{b.url}/a2a/{agent}", json=sub,
                                                         headers={**V1, "Last-Event-ID": str(last_id)}) as stream:
        rest = list(events(stream))  # returns only when B ends the stream
    seqs = [s for s, _ in rest]
    assert seqs == list(range(last_id + 1, last_id + 1 + len(rest))), seqs  # in order, once each, no gap
    assert rest and state_of(rest[-1][1]) in TERMINAL, rest
    assert [s for s, r in rest if state_of(r) in TERMINAL] == [seqs[-1]], rest  # the end, once, last
    if agent == "stepper":
        assert statuses(rest) == [("TASK_STATE_WORKING", RESUME_MESSAGE), ("TASK_STATE_COMPLETED", None)], rest
        assert "".join(artifact_texts(rest)) == f"resumed at step 1 on pid {b.proc.pid}", rest
    else:
        assert statuses(rest) == [("TASK_STATE_FAILED", RESTART_MESSAGE)], rest
        assert artifact_texts(rest) == [], rest
    # What the two connections saw together is the task's log, entry for entry.
    assert [*seen, *rest] == replay(b, agent, task_id)[: len(seen) + len(rest)]
    assert len(replay(b, agent, task_id)) == len(seen) + len(rest)


# --- 4. nothing acknowledged is lost ---------------------------------------------------------------------------------


@pytest.mark.parametrize("deployment", ["redis"], indirect=True)
def test_tasks_acknowledged_by_the_dead_replica_are_all_on_the_survivor(pair: tuple[Replica, Replica]) -> None:
    """Tasks A answered as completed (SendMessage waiting for the end, and a stream read to its terminal
    event) are, after A is SIGKILLed right after the last answer, all on B: GetTask returns each exactly as
    A acknowledged it (status, history, artifacts), ListTasks of their context lists them with their
    artifacts."""
    a, b = pair
    context = str(uuid.uuid4())
    acked: dict[str, tuple[str, dict]] = {}  # task id -> (agent, the task as A answered it)
    for agent, text in [("echo", "one"), ("ticker", "4"), ("echo", "two"), ("ticker", "2")]:
        task = send(a, agent, text, wait=True, context_id=context)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        acked[task["id"]] = (agent, task)
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": message("3", context)}}
    with httpx.Client(timeout=WAIT) as client, connect_sse(client, "POST", f"{a.url}/a2a/ticker", json=body,
                                                         headers=V1) as stream:
        streamed = list(events(stream))
    assert state_of(streamed[-1][1]) == "TASK_STATE_COMPLETED", streamed
    streamed_id = streamed[0][1]["task"]["id"]
    a.kill()  # at once: every answer above was given before this

    for task_id, (agent, task) in acked.items():
        got = get_task(b, agent, task_id)
        assert got == task, (json.dumps(got)[:1500], json.dumps(task)[:1500])
        if agent == "ticker":
            assert len(got["artifacts"]) == int(text_of(got["history"][0]) or 0), got
    on_b = get_task(b, "ticker", streamed_id)
    assert on_b["status"]["state"] == "TASK_STATE_COMPLETED", on_b
    assert [x["artifactId"] for x in on_b["artifacts"]] == ["tick-0", "tick-1", "tick-2"], on_b
    assert [(s, r) for s, r in replay(b, "ticker", streamed_id) if s > 1] == [(s, r) for s, r in streamed if s > 1]

    for agent in ("echo", "ticker"):
        listed = rpc(b, agent, "ListTasks", {"contextId": context, "includeArtifacts": True})
        want = {tid: t for tid, (ag, t) in acked.items() if ag == agent}
        if agent == "ticker":
            want[streamed_id] = on_b
        assert sorted(t["id"] for t in listed["tasks"]) == sorted(want), listed
        for t in listed["tasks"]:
            assert t["status"]["state"] == "TASK_STATE_COMPLETED", t
            assert t.get("artifacts") == want[t["id"]].get("artifacts"), (t, want[t["id"]])


# --- 5. push notifications across replicas ---------------------------------------------------------------------------

# What the exactly-once tests below guard (a bug they found): PostgresTaskStore.due_notifications locks lane
# heads with FOR UPDATE OF o SKIP LOCKED; whether a head is due and unclaimed came only from the statement's
# snapshot, so a claim another replica committed meanwhile was claimed again and both dispatchers POSTed the
# same attempt (and record_attempt's upsert hid the second from the delivery log). The claim and the due time
# are now checked again on the locked row.


class Duplicate(AssertionError):
    """A notification attempt was claimed, or sent, twice (the bug above), as opposed to any other failure."""


def jwt_claims(received: Any) -> dict:
    """The claims of a notification's Parley-Signature (read, not verified: tests/push checks signatures)."""
    token = received.headers["parley-signature"]
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def attempt_of(received: Any) -> int:
    """The attempt a request is (jti = <event id>.<attempt>.<random>)."""
    jti = jwt_claims(received)["jti"]
    eid, attempt, _ = jti.rsplit(".", 2)
    assert eid == received.event_id, (jti, received.event_id)
    return int(attempt)


def push_log(replica: Replica, agent: str, task_id: str) -> dict:
    r = httpx.get(f"{replica.url}/a2a/{agent}/tasks/{task_id}/pushLog", timeout=WAIT)
    assert r.status_code == 200, r.text
    return r.json()


def settled_push_log(replica: Replica, agent: str, task_id: str, count: int) -> dict:
    """The push log once it has `count` notifications and none is pending (a bounded poll: the outcome of an
    attempt is recorded just after the webhook's answer)."""
    deadline = time.monotonic() + WAIT
    while True:
        data = push_log(replica, agent, task_id)
        notes = data["notifications"]
        if len(notes) >= count and all(n["state"] != "pending" for n in notes):
            return data
        if time.monotonic() > deadline:
            raise AssertionError(f"the push log did not settle: {json.dumps(data, indent=1)[:4000]}")
        time.sleep(0.05)  # polling the store with a deadline


def notifiable(log: list[tuple[int, dict]]) -> dict[int, dict]:
    """seq -> entry of the log entries that are notifications here (status and, artifact_updates = true,
    artifact updates)."""
    return {s: r for s, r in log if "statusUpdate" in r or "artifactUpdate" in r}


def check_delivered(got: list, data: dict, task_id: str, expected: dict[int, dict]) -> None:
    """Every notification of the task was delivered (at least once): the delivery log has one notification per
    notifiable entry, each `delivered` with a 200 on its last attempt; the webhook got each one, with its event
    id and token, the body exactly the log's entry, in the log's order."""
    notes = data["notifications"]
    assert [n["seq"] for n in notes] == sorted(expected), notes
    bad = [n for n in notes if n["state"] != "delivered" or n["lastStatus"] != 200
           or [t["outcome"] for t in n["tries"]][-1:] != ["delivered"]
           or [t["attempt"] for t in n["tries"]] != list(range(1, n["attempts"] + 1))]
    assert not bad, "not delivered:\n" + json.dumps(bad, indent=1)
    assert {r.seq for r in got} == set(expected), (sorted({r.seq for r in got}), sorted(expected))
    assert all(r.event_id == f"{task_id}:{r.seq}" and r.headers.get("x-a2a-notification-token") == TOKEN
               for r in got), [(r.event_id, r.headers) for r in got]
    seqs = [r.seq for r in got]
    assert seqs == sorted(seqs), seqs  # one at a time, in the log's order
    for r in got:
        assert r.json() == expected[r.seq], (r.seq, r.body[:500], expected[r.seq])


def check_once(got: list, data: dict, seqs: set[int]) -> None:
    """Each attempt at the notifications `seqs` reached the webhook once (Duplicate otherwise), and the webhook
    got as many requests per notification as the delivery log has attempts."""
    per_attempt = Counter((r.seq, attempt_of(r)) for r in got if r.seq in seqs)
    twice = {k: v for k, v in sorted(per_attempt.items()) if v > 1}
    if twice:
        senders = {k: sorted({jwt_claims(r)["iss"] for r in got if (r.seq, attempt_of(r)) == k}) for k in twice}
        raise Duplicate(f"the same attempt was sent more than once, {{(seq, attempt): copies}}: {twice}; "
                        f"sent by {senders}")
    logged = {n["seq"]: n["attempts"] for n in data["notifications"] if n["seq"] in seqs}
    received = dict(Counter(r.seq for r in got if r.seq in seqs))
    assert logged == received, f"attempts in the delivery log {logged} != requests at the webhook {received}"


async def _outbox_backlog(url: str, count: int) -> None:
    """`count` pending notifications of other tasks, due in an hour (a webhook being retried), or none."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("DELETE FROM push_outbox WHERE task_id LIKE 'backlog-%'")
        if count:
            await conn.execute("INSERT INTO push_outbox (task_id, config_id, seq, kind, created_at, next_at) "
                               "SELECT 'backlog-' || g, 'c', 2, 'status', $1::float8, $1::float8 + 3600 "
                               "FROM generate_series(1, $2::int) g", time.time(), count)
        await conn.execute("ANALYZE push_outbox")
    finally:
        await conn.close()


RETRIES = 60  # the webhook answers 503 this often before it answers 200


@pytest.mark.parametrize("deployment", ["postgres"], indirect=True)
def test_push_notifications_are_sent_once_by_one_of_the_two_dispatchers(
        deployment: Deployment, pair: tuple[Replica, Replica], hooks: Any) -> None:
    """A task on A with a webhook registered inline (configuration.taskPushNotificationConfig); both replicas
    run a dispatcher over the shared outbox, reading it every 50 ms, and the outbox holds a backlog of 5000
    notifications of other tasks waiting for a retry in an hour. The webhook answers 503 to its first 60
    requests, so the task's first notification is retried 60 times, each retry at a due time both dispatchers
    wait for. Every notification (2 status + 12 artifact updates) is delivered, in order; each attempt must
    reach the webhook once (one dispatcher claims it), and the delivery log must have exactly the attempts the
    webhook saw. Fails (the bug above): some attempts are sent by both replicas."""
    a, b = pair
    run_sync(_outbox_backlog(deployment.url, 5000))
    try:
        path = hooks.path("once")
        hooks.program(path, *[503] * RETRIES, 200)
        task = send(a, "ticker", "12", wait=True, push_url=hooks.url(path))
        task_id = task["id"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        expected = notifiable(replay(b, "ticker", task_id))
        assert len(expected) == 14, expected

        hooks.wait_until(path, lambda got: any(r.seq == max(expected) for r in got), timeout=WAIT)
        data = settled_push_log(b, "ticker", task_id, len(expected))
        got = hooks.requests(path)
        check_delivered(got, data, task_id, expected)
        assert {jwt_claims(r)["iss"] for r in got} <= {a.url, b.url}
        check_once(got, data, set(expected))
        first = data["notifications"][0]
        assert [t["status"] for t in first["tries"]] == [503] * RETRIES + [200], first
    finally:
        run_sync(_outbox_backlog(deployment.url, 0))


@pytest.mark.parametrize("deployment", ["redis"], indirect=True)
def test_push_notifications_of_the_takeover_come_from_the_survivor(pair: tuple[Replica, Replica],
                                                                   hooks: Any) -> None:
    """`stepper` on A with a webhook registered inline. Once the notifications so far are delivered (none
    is in flight, so A holds no claim on one), A is SIGKILLed; B resumes the task, and the notifications of
    B's changes (the resume status, the answer, `completed`) reach the webhook from B (the signature's `iss`),
    each once, in order, after the ones A's changes made. (Before the kill both dispatchers run, and the bug
    above may send one of those twice: for them this test asks for delivery, not for once.)"""
    a, b = pair
    path = hooks.path("takeover")
    task_id = send(a, "stepper", "go", wait=False, push_url=hooks.url(path))["id"]
    step1 = f"step 1 done on pid {a.proc.pid}"

    def at_step1(got: list) -> bool:
        return any("statusUpdate" in r.json() and text_of(r.json()["statusUpdate"]["status"].get("message"))
                   == step1 for r in got)

    hooks.wait_until(path, at_step1, timeout=WAIT)
    before = settled_push_log(b, "stepper", task_id, 2)  # working, step 1: delivered, nothing claimed
    a.kill()

    done = wait_task(b, "stepper", task_id, terminal, "the task taken over by B")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    expected = notifiable(replay(b, "stepper", task_id))
    hooks.wait_until(path, lambda got: any(r.seq == max(expected) for r in got), timeout=WAIT)
    data = settled_push_log(b, "stepper", task_id, len(expected))
    got = hooks.requests(path)
    check_delivered(got, data, task_id, expected)

    old = {n["seq"] for n in before["notifications"]}
    new = set(expected) - old
    check_once(got, data, new)  # only B runs a dispatcher now
    texts = [text_of(expected[s]["statusUpdate"]["status"].get("message"))
             for s in sorted(new) if "statusUpdate" in expected[s]]
    assert texts == [RESUME_MESSAGE, None], texts  # the takeover's statuses: resumed, then completed
    assert any("artifactUpdate" in expected[s] for s in new), expected  # and the resumed answer
    assert {jwt_claims(r)["iss"] for r in got if r.seq in new} == {b.url}, [
        (r.seq, jwt_claims(r)["iss"]) for r in got]
    assert {jwt_claims(r)["iss"] for r in got if r.seq in old} <= {a.url, b.url}


# --- 5c. the claim of a notification, between two replicas' stores (the bug above, deterministically) --------------


class SetupError(RuntimeError):
    """The interleaving the test needs did not happen (not the bug: a failure of the test's setup)."""


BACKLOG = 400_000  # pending notifications waiting for a retry an hour away: B's lane-head scan takes a while


async def _claim_race(url: str) -> tuple[list, str, str, str]:
    """B's dispatcher reads the outbox (`due_notifications`) while A's dispatcher's claim of the same
    notification commits: the claim (claimed_by = A, claimed_until = now + 60 s) is committed after B's
    statement took its snapshot and before B locks the row. Returns (what B claimed of that notification,
    the row's claimer afterwards, A's holder, B's holder)."""
    import asyncpg

    from parley.postgres import Postgres
    from parley.tasks.postgres_store import PostgresTaskStore

    app_name = "parley_claim_" + uuid.uuid4().hex[:8]
    a = PostgresTaskStore(Postgres(url))
    b = PostgresTaskStore(Postgres(f"{url}&application_name={app_name}"))
    await a.open()
    await b.open()
    conn = await asyncpg.connect(url)
    try:
        now = time.time()
        await conn.execute("INSERT INTO push_outbox (task_id, config_id, seq, kind, created_at, next_at) "
                           "SELECT 'backlog-' || g, 'c', 2, 'status', $1::float8, $1::float8 + 3600 "
                           "FROM generate_series(1, $2::int) g", now, BACKLOG)
        due = await conn.fetchval("INSERT INTO push_outbox (task_id, config_id, seq, kind, created_at, next_at) "
                                  "VALUES ('task', 'config', 2, 'status', $1::float8, $1::float8) RETURNING id", now)
        await conn.execute("ANALYZE push_outbox")
        b_reads = asyncio.ensure_future(b.due_notifications(time.time(), 10, set()))
        # B's statement is executing (begun 50 ms ago: past its snapshot, which it takes when it starts).
        running = ("SELECT pid, query_start FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' "
                   "AND query LIKE 'WITH heads AS%' AND clock_timestamp() - query_start > interval '50 milliseconds'")
        deadline = time.monotonic() + WAIT
        while (row := await conn.fetchrow(running, app_name)) is None:
            if b_reads.done() or time.monotonic() > deadline:
                raise SetupError("B's read of the outbox ended before A's claim could be committed during it")
            await asyncio.sleep(0.002)  # polling pg_stat_activity for B's statement, with a deadline
        # A's claim, as A's due_notifications leaves the row (committed now, while B's statement runs).
        await conn.execute("UPDATE push_outbox SET claimed_by = $1, claimed_until = $2 WHERE id = $3",
                           a.holder, time.time() + a.claim_seconds, due)
        still = await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' "
                                    "AND query_start = $2", row["pid"], row["query_start"])
        if not still:
            raise SetupError("B's statement ended before A's claim was committed")
        claimed = await b_reads
        claimer = await conn.fetchval("SELECT claimed_by FROM push_outbox WHERE id = $1", due)
        return [n for n in claimed if n.id == due], claimer, a.holder, b.holder
    finally:
        await conn.close()
        await a.close()
        await b.close()


def test_a_notification_claimed_by_one_replica_is_not_claimed_by_another(postgres_url: str) -> None:
    """docs/push.md and postgres_store.py: `due_notifications` claims a notification for one store (replica)
    for `claim_seconds`, "so two replicas' dispatchers never send the same one". Two stores on one schema
    (two replicas); the outbox has a backlog, so B's read takes a while; A's claim of the one due
    notification commits while B's read runs. B must not claim it as well (it would POST it too)."""
    claimed, claimer, a_holder, b_holder = run_sync(_claim_race(postgres_url))
    if claimed:
        raise Duplicate(f"B claimed the notification A holds a claim on (claimed_by is now "
                        f"{'B' if claimer == b_holder else repr(claimer)}, A is {a_holder!r})")
    assert claimer == a_holder
