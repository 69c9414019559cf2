"""tasks/cancel and CancelTask: really stopping agents, and what cannot be canceled."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from srvkit import DIALECTS, Dialect, is_status, stream, text_of, uid


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_cancel_running_task_stops_the_agent(lab_server, d: Dialect):
    url, lab, key = lab_server.agent("slow"), lab_server.lab, uid("cx-")
    task = d.send(url, key, wait=False)
    lab.wait_reached(key)
    canceled = d.result(url, "cancel", {"id": task["id"]})
    assert canceled["id"] == task["id"]
    assert canceled["status"]["state"] == d.state("canceled")
    # the agent's coroutine got CancelledError at its await, before the answer came back
    assert lab.cancel_event(key).is_set()
    assert task["id"] in lab.cancelled_tasks
    stored = d.get(url, task["id"])
    assert stored["status"]["state"] == d.state("canceled")
    assert "artifacts" not in stored  # the agent never got to answer
    # opening the gate now changes nothing: the agent is gone
    lab.open(key)
    assert d.get(url, task["id"]) == stored
    assert lab.calls_of(key) == 1


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_cancel_an_agent_that_yields_forever(lab_server, d: Dialect):
    url, lab, key = lab_server.agent("forever"), lab_server.lab, uid("fv-")
    task = d.send(url, key, wait=False)
    lab.open(f"{key}/1")
    lab.open(f"{key}/2")
    lab.wait_reached(f"{key}/3")
    assert d.get(url, task["id"])["status"]["state"] == d.state("working")
    canceled = d.result(url, "cancel", {"id": task["id"]})
    assert canceled["status"]["state"] == d.state("canceled")
    assert lab.cancel_event(key).is_set()


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_stream_of_a_canceled_task_ends_with_the_canceled_status(lab_server, d: Dialect):
    url, key = lab_server.agent("slow"), uid("cxs-")
    with stream(url, d.method("stream"), d.send_params(key), version=d.version) as sse:
        head = sse.until(lambda f: is_status(d, f, f"started {key}"))
        task_id = d.event_body(head[0].result)["id"]
        canceled = d.result(url, "cancel", {"id": task_id})
        assert canceled["status"]["state"] == d.state("canceled")
        rest = sse.rest()
    assert rest, "the stream closed without telling the client the task was canceled"
    assert is_status(d, rest[-1], state="canceled")
    if not d.v1:
        assert rest[-1].result["final"] is True


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_blocking_send_returns_canceled_task_when_canceled_meanwhile(lab_server, d: Dialect):
    url, lab, key = lab_server.agent("slow"), lab_server.lab, uid("cxb-")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(d.call, url, "send", d.send_params(key))
        lab.wait_reached(key)
        listed = d.list(url)["tasks"]
        task_id = next(t["id"] for t in listed if text_of(t["history"][0]) == key)
        d.result(url, "cancel", {"id": task_id})
        answer = pending.result(timeout=15)
    task = d.task_of(answer["result"])
    assert task["id"] == task_id and task["status"]["state"] == d.state("canceled")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_cancel_input_required_task(lab_server, d: Dialect):
    url = lab_server.agent("interviewer")
    task = d.send(url, "ask me")
    assert task["status"]["state"] == d.state("input-required")
    canceled = d.result(url, "cancel", {"id": task["id"]})
    assert canceled["status"]["state"] == d.state("canceled")
    err = d.error(url, "send", d.send_params("late answer", task_id=task["id"], context_id=task["contextId"]))
    assert err["code"] == -32004


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_cancel_completed_task_is_not_cancelable(lab_server, d: Dialect):
    done = d.send(lab_server.url, "all done")
    err = d.error(lab_server.url, "cancel", {"id": done["id"]})
    assert err["code"] == -32002
    assert d.get(lab_server.url, done["id"]) == done


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_cancel_twice_is_not_cancelable_the_second_time(lab_server, d: Dialect):
    url, key = lab_server.agent("slow"), uid("cx2-")
    task = d.send(url, key, wait=False)
    lab_server.lab.wait_reached(key)
    first = d.result(url, "cancel", {"id": task["id"]})
    err = d.error(url, "cancel", {"id": task["id"]})
    assert err["code"] == -32002
    assert d.get(url, task["id"]) == first


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_cancel_unknown_task_is_not_found(lab_server, d: Dialect):
    assert d.error(lab_server.url, "cancel", {"id": uid("ghost-")})["code"] == -32001


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_server_keeps_working_after_cancellations(lab_server, d: Dialect):
    task = d.send(lab_server.url, "still alive")
    assert task["status"]["state"] == d.state("completed")
    assert text_of(task["artifacts"][0]) == "still alive"
