"""A2A 1.1 (dev-1.1 branch, commit 28491879) `Task.generation`: the counter, the long-poll and the precondition.

Section 3.2.7: generation 1 at creation, exactly +1 per status or artifact event, carried on each event; section
3.2.2: `ifGenerationMatch` refuses a stale follow-up (TaskGenerationMismatchError, JSON-RPC -32010, HTTP 409);
section 3.2.7 long-polling: GetTask(currentGeneration) held until the generation exceeds it. 1.0 clients see none
of it. Real servers on 127.0.0.1 over the memory, SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import httpx
import pytest

from parley import Parley
from parley.agents.builtin import builtin_agents
from parley.settings import LimitSettings, Settings
from support import rpc, running


def msg(text: str, task_id: str | None = None) -> dict:
    out = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        out["taskId"] = task_id
    return out


def result(resp: httpx.Response) -> dict:
    body = resp.json()
    assert "result" in body, body
    return body["result"]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def db(request, tmp_path, monkeypatch) -> str:
    if request.param == "postgres":
        monkeypatch.setenv("PARLEY_KEY_PEPPER", "generation-tests")
        return request.getfixturevalue("postgres_url")
    return "memory" if request.param == "memory" else str(tmp_path / "tasks.db")


def app_on(db: str, **limits) -> Parley:
    app = Parley(settings=Settings(db=db, limits=LimitSettings(**limits)))
    for agent in builtin_agents():
        app.add_agent(agent)
    return app


def stream_events(url: str, params: dict, version: str) -> list[dict]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
    events = []
    with httpx.stream("POST", url, json=body, headers={"A2A-Version": version}, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:])["result"])
    return events


def test_each_event_is_one_generation_on_every_store(db) -> None:
    """Section 3.2.7: the task starts at 1 and every status and artifact event is exactly one more, never two
    events with one generation; GetTask and a replay (SubscribeToTask from Last-Event-ID 1) say the same numbers,
    read back from the store; a 1.0 or 0.3 client (JSON-RPC, HTTP+JSON) sees no `generation` anywhere."""
    with running(app_on(db)) as srv:
        url = f"{srv.url}/a2a/echo"
        events = stream_events(url, {"message": msg("word " * 400)}, "1.1")
        assert events[0]["task"]["generation"] == 1, events[0]
        updates = [e.get("statusUpdate") or e.get("artifactUpdate") for e in events[1:]]
        assert len(updates) >= 3 and all(u is not None for u in updates), events
        assert [u["generation"] for u in updates] == list(range(2, 2 + len(updates))), updates
        task_id = events[0]["task"]["id"]
        got = result(rpc(url, "GetTask", {"id": task_id}, version="1.1"))
        assert got["generation"] == 1 + len(updates), got
        listed = result(rpc(url, "ListTasks", {}, version="1.1"))["tasks"]
        assert [t["generation"] for t in listed] == [got["generation"]]
        plain = result(rpc(url, "GetTask", {"id": task_id}, version="1.0"))
        assert "generation" not in plain and plain["status"] == got["status"], plain
        assert all("generation" not in json.dumps(e) for e in stream_events(url, {"message": msg("x")}, "1.0"))
        old = result(rpc(url, "tasks/get", {"id": task_id}))
        assert old["kind"] == "task" and "generation" not in old, old
        old_rest = httpx.get(f"{url}/v1/tasks/{task_id}", timeout=30).json()
        assert old_rest["id"] == task_id and "generation" not in json.dumps(old_rest), old_rest
        rest = httpx.get(f"{url}/tasks/{task_id}", headers={"A2A-Version": "1.1"}, timeout=30).json()
        assert rest["generation"] == got["generation"], rest


def interviewer_task(url: str) -> dict:
    """A task of the interviewer agent, waiting for input (state input-required)."""
    task = result(rpc(url, "SendMessage", {"message": msg("cats")}, version="1.1"))["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task


def test_if_generation_match_refuses_a_stale_follow_up(db) -> None:
    """Sections 3.2.2 and 5.4: a follow-up whose ifGenerationMatch is not the task's generation is refused with
    TaskGenerationMismatchError (JSON-RPC -32010; HTTP+JSON 409, reason TASK_GENERATION_MISMATCH) and the task
    is unchanged; with the current generation the follow-up is taken."""
    with running(app_on(db)) as srv:
        url = f"{srv.url}/a2a/interviewer"
        task = interviewer_task(url)
        gen = task["generation"]
        stale = {"message": msg("because", task["id"]), "configuration": {"ifGenerationMatch": gen - 1}}
        error = rpc(url, "SendMessage", stale, version="1.1").json()["error"]
        assert error["code"] == -32010 and f"expected {gen - 1} but current generation is {gen}" in error["message"]
        rest = httpx.post(f"{url}/message:send", json=stale, headers={"A2A-Version": "1.1"}, timeout=30)
        assert rest.status_code == 409, rest.text
        info = rest.json()["error"]["details"][0]
        assert info["reason"] == "TASK_GENERATION_MISMATCH", rest.text
        assert info["metadata"] == {"taskId": task["id"], "expectedGeneration": str(gen - 1),
                                    "currentGeneration": str(gen)}, info
        assert error["data"][0]["reason"] == "TASK_GENERATION_MISMATCH" and error["data"][0]["metadata"] == \
            info["metadata"], error
        same = result(rpc(url, "GetTask", {"id": task["id"]}, version="1.1"))
        assert (same["generation"], same["status"]["state"]) == (gen, "TASK_STATE_INPUT_REQUIRED"), same
        fresh = {"message": msg("because", task["id"]), "configuration": {"ifGenerationMatch": gen}}
        done = result(rpc(url, "SendMessage", fresh, version="1.1"))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED" and done["generation"] > gen, done


def test_1_0_ignores_if_generation_match() -> None:
    """A 1.0 client sees no change: `ifGenerationMatch` is not a 1.0 field, so a 1.0 follow-up carrying it is
    taken as before (no -32010)."""
    with running(app_on("memory")) as srv:
        url = f"{srv.url}/a2a/interviewer"
        task = interviewer_task(url)
        params = {"message": msg("because", task["id"]), "configuration": {"ifGenerationMatch": 999}}
        done = result(rpc(url, "SendMessage", params, version="1.0"))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED" and "generation" not in done, done


def test_long_poll_returns_once_the_generation_moves(db) -> None:
    """Section 3.2.7 long-polling: GetTask(currentGeneration=G) on a task at G is held until the task moves past
    G (here: a follow-up from another client), then returns the new state. Two polls of one caller with
    `long_polls_per_principal = 1`, one JSON-RPC and one HTTP+JSON (`?currentGeneration=`): the one that comes
    second is refused 429 while the first is held (so it is held), and the held one returns once the follow-up
    moved the task. A currentGeneration already passed returns at once."""
    with running(app_on(db, long_polls_per_principal=1)) as srv:
        url = f"{srv.url}/a2a/interviewer"
        task = interviewer_task(url)
        gen = task["generation"]
        before = result(rpc(url, "GetTask", {"id": task["id"], "currentGeneration": gen - 1}, version="1.1"))
        assert before["generation"] == gen
        with ThreadPoolExecutor(2) as pool:
            polls = [pool.submit(lambda: rpc(url, "GetTask", {"id": task["id"], "currentGeneration": gen},
                                             version="1.1")),
                     pool.submit(httpx.get, f"{url}/tasks/{task['id']}?currentGeneration={gen}",
                                 headers={"A2A-Version": "1.1"}, timeout=30)]
            done, held = wait(polls, timeout=30, return_when=FIRST_COMPLETED)
            assert len(done) == 1 and len(held) == 1, (done, held)
            refused = done.pop().result()
            assert refused.status_code == 429 or refused.json().get("error", {}).get("code") == -31429, refused.text
            result(rpc(url, "SendMessage", {"message": msg("because", task["id"])}, version="1.1"))
            answer = held.pop().result(timeout=30).json()
        moved = answer.get("result", answer)
        assert moved["generation"] > gen and moved["status"]["state"] != "TASK_STATE_INPUT_REQUIRED", moved


def test_long_poll_timeout_and_bound() -> None:
    """Section 3.2.7 ("MAY return earlier, on an implementation-defined timeout, with the current task"): after
    `limits.long_poll_seconds` the unchanged task comes back; with `limits.long_polls_per_principal` held polls
    already waiting (0 here) one more is refused 429 RATE_LIMITED (JSON-RPC -31429), on HTTP+JSON as well; a 1.0
    GetTask with currentGeneration is not a long-poll at all."""
    with running(app_on("memory", long_poll_seconds=0.3)) as srv:
        url = f"{srv.url}/a2a/interviewer"
        task = interviewer_task(url)
        same = result(rpc(url, "GetTask", {"id": task["id"], "currentGeneration": task["generation"]}, version="1.1"))
        assert same == task
    with running(app_on("memory", long_polls_per_principal=0)) as srv:
        url = f"{srv.url}/a2a/interviewer"
        task = interviewer_task(url)
        params = {"id": task["id"], "currentGeneration": task["generation"]}
        assert rpc(url, "GetTask", params, version="1.1").json()["error"]["code"] == -31429
        rest = httpx.get(f"{url}/tasks/{task['id']}?currentGeneration={task['generation']}",
                         headers={"A2A-Version": "1.1"}, timeout=30)
        assert rest.status_code == 429 and rest.headers["retry-after"] == "1", rest.text
        assert result(rpc(url, "GetTask", params, version="1.0"))["id"] == task["id"]


def test_client_reads_old_and_new_access_codes() -> None:
    """Parley's access errors moved out of -32768..-32000 (docs/security.md); for one release the client still
    reads the old -32010 as UnauthenticatedError, unless it is A2A 1.1's generation mismatch (section 5.4)."""
    from parley.protocol.errors import TaskGenerationMismatchError, UnauthenticatedError, error_from_jsonrpc

    assert type(error_from_jsonrpc({"code": -31401, "message": "Authentication required"})) is UnauthenticatedError
    assert type(error_from_jsonrpc({"code": -32010, "message": "Authentication required"})) is UnauthenticatedError
    mismatch = {"code": -32010, "message": "Task generation mismatch: expected 1 but current generation is 2"}
    assert type(error_from_jsonrpc(mismatch)) is TaskGenerationMismatchError


def test_card_lists_1_1_to_a_1_1_client_only() -> None:
    """Section 3.2.7 "Backwards Compatibility" (1.1 is a minor version negotiated like 1.0, A2A-Version): a card
    asked for with `A2A-Version: 1.1` lists the JSON-RPC and HTTP+JSON interfaces with protocolVersion 1.1 after
    the others; the 1.0 card is what it was (no 1.1 interface)."""
    with running(app_on("memory")) as srv:
        url = f"{srv.url}/a2a/echo/.well-known/agent-card.json"
        v11 = httpx.get(url, headers={"A2A-Version": "1.1"}, timeout=30).json()["supportedInterfaces"]
        v10 = httpx.get(url, headers={"A2A-Version": "1.0"}, timeout=30).json()["supportedInterfaces"]
    assert all(i["protocolVersion"] != "1.1" for i in v10), v10
    assert v11[:len(v10)] == v10
    assert sorted(i["protocolBinding"] for i in v11[len(v10):] if i["protocolVersion"] == "1.1") == \
        ["HTTP+JSON", "JSONRPC"], v11


def test_parley_client_speaks_1_1() -> None:
    """Parley's JSON-RPC client with version 1.1 reads `generation` and sends `currentGeneration` (section
    3.2.7): a GetTask at an already passed generation comes back at once with the task's generation."""
    import asyncio

    from parley.client.jsonrpc import JsonRpcTransport
    from parley.protocol import models as m
    from parley.protocol.operations import Operation

    with running(app_on("memory")) as srv:
        url = f"{srv.url}/a2a/interviewer"
        task = interviewer_task(url)

        async def get() -> m.Task:
            async with httpx.AsyncClient() as http:
                transport = JsonRpcTransport(http, url, "1.1")
                return await transport.call(Operation.GET, m.GetTaskRequest(id=task["id"], current_generation=1))

        got = asyncio.run(get())
    assert got.generation == task["generation"] >= 2, got
