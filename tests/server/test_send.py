"""message/send and SendMessage: blocking and non-blocking sends."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from srvkit import D03, D10, DIALECTS, Dialect, post, stream, text_of, uid


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_blocking_send_returns_completed_task(lab_server, d: Dialect):
    text = "the quick brown fox jumps over the lazy dog"
    task = d.send(lab_server.url, text)
    assert task["status"]["state"] == d.state("completed")
    assert task["id"] and task["contextId"]
    assert len(task["artifacts"]) == 1
    assert text_of(task["artifacts"][0]) == text
    # the user's message is in history, attached to the task and context the server chose
    user = task["history"][0]
    assert user["role"] == d.role("user")
    assert text_of(user) == text
    assert user["taskId"] == task["id"] and user["contextId"] == task["contextId"]
    # what was returned is what is stored
    assert d.get(lab_server.url, task["id"]) == task


def test_v03_shapes_have_kinds_and_v10_shapes_do_not(lab_server):
    t03 = D03.send(lab_server.url, "hello")
    assert t03["kind"] == "task"
    assert t03["history"][0]["kind"] == "message"
    assert t03["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello"}]
    res = D10.result(lab_server.url, "send", D10.send_params("hello"))
    assert set(res) == {"task"}
    t10 = res["task"]
    assert "kind" not in t10 and "kind" not in t10["history"][0]
    assert t10["artifacts"][0]["parts"] == [{"text": "hello"}]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_client_context_id_is_kept(lab_server, d: Dialect):
    ctx = uid("ctx-")
    task = d.send(lab_server.url, "hi", context_id=ctx)
    assert task["contextId"] == ctx


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_non_blocking_send_returns_at_once_and_completes_in_background(lab_server, d: Dialect):
    url = lab_server.agent("slow")
    key = uid("nb-")
    # the agent cannot finish before the gate opens, so a blocking server would never answer
    task = d.send(url, key, wait=False)
    assert task["status"]["state"] in {d.state("submitted"), d.state("working")}
    assert "artifacts" not in task
    lab_server.lab.wait_reached(key)
    running = d.get(url, task["id"])
    assert running["status"]["state"] == d.state("working")
    assert text_of(running["status"].get("message")) == f"started {key}"

    # follow the task live, then let the agent finish
    with stream(url, d.method("subscribe"), {"id": task["id"]}, version=d.version) as sse:
        first = sse.next()
        assert d.event_kind(first.result) == "task"
        lab_server.lab.open(key)
        rest = sse.rest()
    last = d.event_body(rest[-1].result)
    assert last["status"]["state"] == d.state("completed")

    done = d.get(url, task["id"])
    assert done["status"]["state"] == d.state("completed")
    assert text_of(done["artifacts"][0]) == f"done {key}"
    assert lab_server.lab.calls_of(key) == 1


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_non_blocking_send_observed_by_polling(lab_server, d: Dialect):
    url = lab_server.agent("slow")
    key = uid("poll-")
    task = d.send(url, key, wait=False)
    lab_server.lab.open(key)
    done = d.wait_state(url, task["id"], {"completed"})
    assert text_of(done["artifacts"][0]) == f"done {key}"


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_send_history_length_trims_the_returned_task(lab_server, d: Dialect):
    params = d.send_params("trim me")
    params["configuration"] = {"historyLength": 1}
    task = d.task_of(d.result(lab_server.url, "send", params))
    assert len(task["history"]) == 1
    assert task["status"]["state"] == d.state("completed")


def test_v10_send_history_length_zero_omits_history(lab_server):
    params = D10.send_params("no history please")
    params["configuration"] = {"historyLength": 0}
    task = D10.task_of(D10.result(lab_server.url, "send", params))
    assert "history" not in task or task["history"] == []
    assert D10.get(lab_server.url, task["id"])["history"][0]["parts"] == [{"text": "no history please"}]


def test_v10_version_as_query_parameter(lab_server):
    body = {"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": D10.send_params("by query")}
    r = post(lab_server.url + "/?A2A-Version=1.0", body)
    assert r.status_code == 200
    assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_concurrent_sends_each_get_their_own_task(lab_server, d: Dialect):
    texts = [f"message number {i} from a busy client" for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        tasks = list(pool.map(lambda t: d.send(lab_server.url, t), texts))
    assert len({t["id"] for t in tasks}) == len(texts)
    for text, task in zip(texts, tasks, strict=True):
        assert task["status"]["state"] == d.state("completed")
        assert text_of(task["artifacts"][0]) == text
        assert text_of(task["history"][0]) == text
