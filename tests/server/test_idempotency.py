"""Resending a message with the same messageId does not run the agent again."""

from __future__ import annotations

import pytest
from srvkit import DIALECTS, Dialect, stream, text_of, uid


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_same_message_id_returns_same_task_and_runs_agent_once(lab_server, d: Dialect):
    url, mid = lab_server.agent("counter"), uid("mid-")
    first = d.send(url, "count me", message_id=mid)
    again = d.send(url, "count me", message_id=mid)
    assert again["id"] == first["id"]
    assert again == first
    assert lab_server.lab.calls_of(mid) == 1
    assert text_of(first["artifacts"][0]) == "call 1: count me"
    # a new message id is a new task and a new run
    other = d.send(url, "count me", message_id=uid("mid-"))
    assert other["id"] != first["id"]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_duplicate_while_running_joins_the_running_task(lab_server, d: Dialect):
    url, lab, key, mid = lab_server.agent("slow"), lab_server.lab, uid("dup-"), uid("mid-")
    first = d.send(url, key, message_id=mid, wait=False)
    lab.wait_reached(key)
    second = d.send(url, key, message_id=mid, wait=False)
    assert second["id"] == first["id"]
    lab.open(key)
    done = d.wait_state(url, first["id"], {"completed"})
    assert lab.calls_of(key) == 1
    assert text_of(done["artifacts"][0]) == f"done {key}"
    assert len([t for t in d.list(url, contextId=first["contextId"])["tasks"]]) == 1


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_duplicate_on_a_stream_replays_instead_of_rerunning(lab_server, d: Dialect):
    url, mid = lab_server.agent("counter"), uid("mid-")
    first = d.send(url, "stream me", message_id=mid)
    with stream(url, d.method("stream"), d.send_params("stream me", message_id=mid), version=d.version) as sse:
        frames = sse.rest()
    assert frames, "a duplicate stream must still say which task it is"
    assert d.event_kind(frames[0].result) == "task"
    assert d.event_body(frames[0].result)["id"] == first["id"]
    assert lab_server.lab.calls_of(mid) == 1


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_duplicate_answer_does_not_continue_twice(lab_server, d: Dialect):
    url, mid = lab_server.agent("interviewer"), uid("ans-")
    first = d.send(url, "question me")
    done = d.send(url, "my answer", task_id=first["id"], context_id=first["contextId"], message_id=mid)
    again = d.send(url, "my answer", task_id=first["id"], context_id=first["contextId"], message_id=mid)
    assert again == done
    assert len(again["history"]) == 3
