"""SQLite persistence: tasks survive a restart; tasks left running are failed on start-up."""

from __future__ import annotations

import asyncio
import time

import pytest
from srvkit import D03, D10, DIALECTS, Dialect, Lab, lab_app, live, stream, text_of, uid

from parley.protocol import models as m
from parley.tasks.log import Entry
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import Lease, MessageKey, TaskRecord, fingerprint


def _server(db, lab: Lab | None = None):
    return live(lab_app(lab or Lab(), store=SqliteTaskStore(db)))


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_completed_task_survives_restart(tmp_path, d: Dialect):
    db = tmp_path / "tasks.db"
    with _server(db) as srv:
        with stream(srv.url, d.method("stream"), d.send_params("persist me please"), version=d.version) as sse:
            frames = sse.rest()
        task_id = d.event_body(frames[0].result)["id"]
        before = d.get(srv.url, task_id)
        listed = d.list(srv.url, includeArtifacts=True)
    with _server(db) as srv:
        after = d.get(srv.url, task_id)
        assert after == before
        assert after["status"]["state"] == d.state("completed")
        assert text_of(after["artifacts"][0]) == "persist me please"
        assert d.list(srv.url, includeArtifacts=True) == listed
        # the event log was persisted too: a replay gives the same frames
        with stream(srv.url, d.method("subscribe"), {"id": task_id}, version=d.version,
                    headers={"Last-Event-ID": str(frames[0].id)}) as sse:
            replay = sse.rest()
        assert [(f.id, f.result) for f in replay] == [(f.id, f.result) for f in frames[1:]]
        # and the server still works on the same file
        assert d.send(srv.url, "new one")["status"]["state"] == d.state("completed")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_input_required_task_can_be_answered_after_restart(tmp_path, d: Dialect):
    db = tmp_path / "tasks.db"
    with _server(db) as srv:
        first = d.send(srv.agent_url("interviewer"), "I like chess")
        assert first["status"]["state"] == d.state("input-required")
    with _server(db) as srv:
        url = srv.agent_url("interviewer")
        assert d.get(url, first["id"]) == first
        done = d.send(url, "it is beautiful", task_id=first["id"], context_id=first["contextId"])
        assert done["status"]["state"] == d.state("completed")
        assert [text_of(x) for x in done["history"]][0::2] == ["I like chess", "it is beautiful"]


def test_duplicate_message_id_after_restart_does_not_rerun(tmp_path):
    db = tmp_path / "tasks.db"
    mid = uid("mid-")
    lab1 = Lab()
    with _server(db, lab1) as srv:
        first = D03.send(srv.agent_url("counter"), "once", message_id=mid)
    lab2 = Lab()
    with _server(db, lab2) as srv:
        again = D03.send(srv.agent_url("counter"), "once", message_id=mid)
    assert again == first
    assert lab1.calls_of(mid) == 1 and lab2.calls_of(mid) == 0


def _write_unfinished_task(db, state: m.TaskState) -> str:
    """A task record left `submitted` or `working`, as a crashed process would leave it."""
    store = SqliteTaskStore(db)
    task_id, ctx = uid("left-"), uid("ctx-")
    msg = m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="unfinished business")],
                    task_id=task_id, context_id=ctx)
    task = m.Task(id=task_id, context_id=ctx, status=m.TaskStatus(state=m.TaskState.SUBMITTED,
                                                                    timestamp="2025-01-01T00:00:00.000Z"),
                  history=[msg])
    now = time.time()
    rec = TaskRecord(task=task, agent_id="echo", owner="anonymous", seq=1, created_at=now, updated_at=now)

    async def write() -> None:
        # Leased by a process that is gone (it crashed): its lease is not this server's.
        await store.create(rec, Entry(1, m.Task(id=task_id, context_id=ctx, status=task.status, history=[msg])),
                           MessageKey("echo", "anonymous", msg.message_id, fingerprint(msg)),
                           lease=Lease("crashed-process", time.time() + 3600))
        if state is m.TaskState.WORKING:
            working = m.TaskStatusUpdateEvent(task_id=task_id, context_id=ctx,
                                              status=m.TaskStatus(state=m.TaskState.WORKING,
                                                                  timestamp="2025-01-01T00:00:01.000Z"))
            task.status = working.status
            rec.seq = 2
            await store.append(task_id, 1, [Entry(2, working)], task, now)
        await store.close()

    asyncio.run(write())
    return task_id


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
@pytest.mark.parametrize("state", [m.TaskState.WORKING, m.TaskState.SUBMITTED], ids=["working", "submitted"])
def test_task_left_unfinished_is_failed_on_start(tmp_path, d: Dialect, state):
    db = tmp_path / "tasks.db"
    task_id = _write_unfinished_task(db, state)
    last = 2 if state is m.TaskState.WORKING else 1
    with _server(db) as srv:
        task = d.get(srv.url, task_id)
        assert task["status"]["state"] == d.state("failed")
        reason = text_of(task["status"].get("message"))
        assert "server stopped" in reason and "not resumed" in reason
        assert task["status"]["message"]["role"] == d.role("agent")
        assert [text_of(x) for x in task["history"]] == ["unfinished business"]
        # it is finished for good
        assert d.error(srv.url, "cancel", {"id": task_id})["code"] == -32002
        # and the failure is a logged event subscribers can replay
        with stream(srv.url, d.method("subscribe"), {"id": task_id}, version=d.version,
                    headers={"Last-Event-ID": str(last)}) as sse:
            frames = sse.rest()
        assert len(frames) == 1 and frames[0].id == last + 1
        assert d.event_body(frames[0].result)["status"]["state"] == d.state("failed")


def test_task_running_when_server_stops_is_failed_after_restart(tmp_path):
    db = tmp_path / "tasks.db"
    lab = Lab()
    key = uid("stop-")
    with _server(db, lab) as srv:
        task = D10.send(srv.agent_url("slow"), key, wait=False)
        lab.wait_reached(key)
    # the server stopped while the agent was waiting
    assert lab.cancel_event(key).is_set()
    with _server(db) as srv:
        after = D10.get(srv.agent_url("slow"), task["id"])
    assert after["status"]["state"] == "TASK_STATE_FAILED"
    assert "server stopped" in text_of(after["status"]["message"])
    assert "artifacts" not in after
