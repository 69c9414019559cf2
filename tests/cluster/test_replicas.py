"""Several `parley serve` replicas behave as one server (issue: scale out), tested with real processes sharing
a real PostgreSQL and, for the Redis deployment, a real Redis.

A2A 1.0 (a2aproject/A2A docs/specification.md): section 3.1.6 SubscribeToTask (a stream of a task's events,
resumable: here with SSE `Last-Event-ID`), 3.1.4 GetTask, 3.1.5 ListTasks, 3.1.7 CancelTask, 3.1.1
SendMessage (a message continuing an `input-required` task names its taskId; messageId identifies the
message, so a retry returns the same task). Each scenario runs against both buses: Redis Streams and
PostgreSQL LISTEN/NOTIFY.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from replicas import Replica, replicas

from services import PostgresSchema, drop_redis_keys, require_postgres, require_redis, unique

V1 = {"A2A-Version": "1.0"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


@pytest.fixture(scope="module", params=["redis", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Replica]]:
    """Two replicas of one deployment, shared by the scenarios of this module (each uses its own tasks)."""
    require_postgres()
    redis = (require_redis(), unique("parley_t")) if request.param == "redis" else None
    schema = PostgresSchema().create()
    try:
        with replicas(tmp_path_factory.mktemp(request.param), schema.url, redis=redis) as started:
            yield started
    finally:
        schema.drop()
        if redis is not None:
            drop_redis_keys(redis[1])


def message(text: str, *, task_id: str | None = None, message_id: str | None = None) -> dict:
    msg = {"messageId": message_id or str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        msg["taskId"] = task_id
    return msg


def call(replica: Replica, agent: str, method: str, params: dict) -> dict:
    r = httpx.post(f"{replica.url}/a2a/{agent}", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                   headers=V1, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert "result" in body, body
    return body["result"]


def start(replica: Replica, agent: str, text: str) -> dict:
    """SendMessage that returns at once (the task keeps running on `replica`)."""
    return call(replica, agent, "SendMessage", {"message": message(text),
                                                "configuration": {"returnImmediately": True}})["task"]


def events(response_stream) -> Iterator[tuple[int, dict]]:
    """(SSE id, JSON-RPC result) of each frame."""
    for sse in response_stream.iter_sse():
        if not sse.data:
            continue
        body = sse.json()
        assert "result" in body, body
        yield int(sse.id), body["result"]


def ticks(results: list[dict]) -> list[str]:
    """The artifact ids of the ticker's artifact updates, in arrival order."""
    return [r["artifactUpdate"]["artifact"]["artifactId"] for r in results if "artifactUpdate" in r]


def state_of(result: dict) -> str | None:
    if "statusUpdate" in result:
        return result["statusUpdate"]["status"]["state"]
    if "task" in result:
        return result["task"]["status"]["state"]
    return None


def test_stream_resumes_on_another_replica_with_last_event_id(deployment: list[Replica]) -> None:
    """A stream from A drops after a few events; resubscribing on B with Last-Event-ID yields every later event
    exactly once, in order, through the end of the task."""
    a, b = deployment
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message("30")}}
    first: list[tuple[int, dict]] = []
    with httpx.Client(timeout=30) as client, connect_sse(client, "POST", f"{a.url}/a2a/ticker", json=body,
                                                         headers=V1) as stream:
        for seq, result in events(stream):
            first.append((seq, result))
            if len(ticks([r for _, r in first])) == 5:
                break  # the connection drops here
    task_id = first[0][1]["task"]["id"]
    last_id = first[-1][0]
    rest: list[tuple[int, dict]] = []
    sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}
    with httpx.Client(timeout=30) as client, connect_sse(client, "POST", f"{b.url}/a2a/ticker", json=sub,
                                                         headers={**V1, "Last-Event-ID": str(last_id)}) as stream:
        rest = list(events(stream))
    seqs = [s for s, _ in rest]
    assert seqs == sorted(set(seqs)) and seqs[0] > last_id, seqs  # in order, no repeats, nothing already seen
    got = ticks([r for _, r in first]) + ticks([r for _, r in rest])
    assert got == [f"tick-{i}" for i in range(30)]  # every tick exactly once
    assert state_of(rest[-1][1]) == "TASK_STATE_COMPLETED"


def test_subscriber_on_b_sees_a_task_running_on_a_live(deployment: list[Replica]) -> None:
    """A task runs on A; a subscriber on B receives its events as they happen, through completion."""
    a, b = deployment
    task = start(a, "ticker", "15")
    sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}}
    with httpx.Client(timeout=30) as client, connect_sse(client, "POST", f"{b.url}/a2a/ticker", json=sub,
                                                         headers=V1) as stream:
        got = list(events(stream))
    assert "task" in got[0][1]  # the subscription starts with the task as it is now (3.1.6)
    seen_before = len(got[0][1]["task"].get("artifacts") or [])
    assert ticks([r for _, r in got]) == [f"tick-{i}" for i in range(seen_before, 15)]
    assert state_of(got[-1][1]) == "TASK_STATE_COMPLETED"


def test_text_reaches_a_subscriber_on_another_replica_while_the_agent_pauses(deployment: list[Replica],
                                                                             tmp_path: Path) -> None:
    """Issue 25 across replicas (sections 3.1.2, 3.1.6): the pauser on A yields text, then waits up to 3 s for
    the test; the test lets it go on only after a subscriber on B has shown the text. Text held back until the
    agent's next output would reach B only after the pause ran out, and the answer would say "(timeout)"."""
    a, b = deployment
    task = start(a, "pauser", str(tmp_path))
    sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}}
    got: list[dict] = []
    with httpx.Client(timeout=30) as client, connect_sse(client, "POST", f"{b.url}/a2a/pauser", json=sub,
                                                         headers=V1) as stream:
        frames = events(stream)
        got.append(next(frames)[1])
        assert "task" in got[0] and not got[0]["task"].get("artifacts")  # attached before any text
        (tmp_path / "go").touch()
        for _, result in frames:
            got.append(result)
            if "artifactUpdate" in result:
                assert result["artifactUpdate"]["artifact"]["parts"] == [{"text": "Let me look that up..."}]
                (tmp_path / "on").touch()  # the text is on B: the agent may go on
                break
        got += [r for _, r in frames]
    texts = [p["text"] for r in got if "artifactUpdate" in r for p in r["artifactUpdate"]["artifact"]["parts"]]
    assert "".join(texts) == "Let me look that up... Found it (signal)."
    last = [r["artifactUpdate"].get("lastChunk", False) for r in got if "artifactUpdate" in r]
    assert last[-1] is True and sum(last) == 1
    assert state_of(got[-1]) == "TASK_STATE_COMPLETED"


def test_get_and_list_agree_on_every_replica(deployment: list[Replica]) -> None:
    a, b = deployment
    context = str(uuid.uuid4())
    ids = []
    for replica in (a, b, a):
        msg = message("hello") | {"contextId": context}
        ids.append(call(replica, "echo", "SendMessage", {"message": msg})["task"]["id"])
    for replica in (a, b):
        listed = call(replica, "echo", "ListTasks", {"contextId": context})
        assert sorted(t["id"] for t in listed["tasks"]) == sorted(ids)
        for task_id in ids:
            got = call(replica, "echo", "GetTask", {"id": task_id})
            assert got["status"]["state"] == "TASK_STATE_COMPLETED"
            assert got["contextId"] == context


def test_cancel_sent_to_b_stops_the_agent_running_on_a(deployment: list[Replica]) -> None:
    a, b = deployment
    task = start(a, "waiter", "go")
    # Wait (by subscribing on A) until the agent runs: it says which process it runs in.
    sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}}
    with httpx.Client(timeout=30) as client, connect_sse(client, "POST", f"{a.url}/a2a/waiter", json=sub,
                                                         headers=V1) as stream:
        for _, result in events(stream):
            status = result.get("statusUpdate", {}).get("status") or result.get("task", {}).get("status")
            if status and status.get("message"):
                assert f"pid {a.proc.pid}" in status["message"]["parts"][0]["text"]
                break
    canceled = call(b, "waiter", "CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    for replica in (a, b):
        assert call(replica, "waiter", "GetTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_CANCELED"


def test_input_required_task_started_on_a_continues_through_b(deployment: list[Replica]) -> None:
    a, b = deployment
    first = call(a, "interviewer", "SendMessage", {"message": message("hello")})["task"]
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    msg = message("Ada", task_id=first["id"]) | {"contextId": first["contextId"]}
    second = call(b, "interviewer", "SendMessage", {"message": msg})["task"]
    assert second["id"] == first["id"]
    assert second["status"]["state"] in {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"}
    history = call(a, "interviewer", "GetTask", {"id": first["id"]})["history"]
    assert [h["parts"][0]["text"] for h in history if h["role"] == "ROLE_USER"] == ["hello", "Ada"]


def test_same_message_id_on_another_replica_is_the_same_task(deployment: list[Replica]) -> None:
    a, b = deployment
    msg = message("once", message_id=str(uuid.uuid4()))
    on_a = call(a, "echo", "SendMessage", {"message": msg})["task"]
    on_b = call(b, "echo", "SendMessage", {"message": msg})["task"]
    assert on_b["id"] == on_a["id"]
    listed = call(b, "echo", "ListTasks", {"contextId": on_a["contextId"]})
    assert [t["id"] for t in listed["tasks"]] == [on_a["id"]]  # one agent run, one task


def test_readyz_reports_store_and_bus(deployment: list[Replica]) -> None:
    for replica in deployment:
        r = httpx.get(replica.url + "/readyz", timeout=10)
        assert r.status_code == 200
        assert r.json()["checks"] == {"runtime": "ok", "store": "ok", "bus": "ok"}


def test_rate_limits_hold_across_replicas(tmp_path: Path, postgres_url: str,
                                          redis_namespace: tuple[str, str]) -> None:
    """With Redis, a principal's budget is one budget over every replica (burst 4: the 5th request is refused
    wherever it lands)."""
    limits = "[server.limits]\nrequests_per_minute = 6\nburst = 4\n"
    with replicas(tmp_path, postgres_url, redis=redis_namespace, extra=limits) as (a, b):
        codes = []
        for replica in (a, b, a, b, a, b):
            r = httpx.post(f"{replica.url}/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                            "params": {"id": "nope"}}, headers=V1, timeout=10)
            codes.append(r.status_code)
        assert codes[:4] == [200, 200, 200, 200]  # JSON-RPC errors (no such task) are 200s
        assert codes[4:] == [429, 429]
