"""Several agents on one server: each sees only its own tasks."""

from __future__ import annotations

import pytest
from srvkit import D03, DIALECTS, Dialect, http, post, uid


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_task_of_one_agent_is_not_found_through_another(lab_server, d: Dialect):
    echo, other = lab_server.agent("echo"), lab_server.agent("interviewer")
    ctx = uid("ctx-")
    task = d.send(echo, "mine", context_id=ctx)
    assert d.error(other, "get", {"id": task["id"]})["code"] == -32001
    assert d.error(other, "cancel", {"id": task["id"]})["code"] == -32001
    assert d.error(other, "subscribe", {"id": task["id"]})["code"] == -32001
    assert d.error(other, "send", d.send_params("hijack", task_id=task["id"]))["code"] == -32001
    assert d.list(other, contextId=ctx)["tasks"] == []
    assert task["id"] not in {t["id"] for t in d.list(other, pageSize=100)["tasks"]}
    # still the owner's, unchanged
    assert d.get(echo, task["id"]) == task
    assert [t["id"] for t in d.list(echo, contextId=ctx)["tasks"]] == [task["id"]]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_root_endpoint_is_the_default_agent(lab_server, d: Dialect):
    task = d.send(lab_server.url, "via root")
    assert d.get(lab_server.agent("echo"), task["id"]) == task
    task2 = d.send(lab_server.agent("echo"), "via path")
    assert d.get(lab_server.url, task2["id"]) == task2
    assert d.error(lab_server.agent("slow"), "get", {"id": task["id"]})["code"] == -32001


def test_unknown_agent_path_is_404(lab_server):
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send",
            "params": {"message": D03.message("anyone there?")}}
    r = post(lab_server.agent("nobody"), body)
    assert r.status_code == 404
    err = r.json()
    assert err["jsonrpc"] == "2.0" and isinstance(err["error"]["code"], int)
    r = post(lab_server.agent("nobody"), {**body, "method": "SendMessage"}, version="1.0")
    assert r.status_code == 404
    assert http.get(lab_server.url + "/a2a/nobody/.well-known/agent-card.json").status_code == 404
    # the server still serves
    assert D03.send(lab_server.url, "still here")["status"]["state"] == "completed"


def test_same_message_id_on_two_agents_makes_two_tasks(lab_server):
    mid = uid("mid-")
    a = D03.send(lab_server.agent("echo"), "one", message_id=mid)
    b = D03.send(lab_server.agent("counter"), "one", message_id=mid)
    assert a["id"] != b["id"]
    assert lab_server.lab.calls_of(mid) == 1
