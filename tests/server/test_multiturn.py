"""Multi-turn tasks: input-required, continuing with taskId, and the errors around it."""

from __future__ import annotations

import pytest
from srvkit import DIALECTS, Dialect, increasing, is_status, stream, text_of, uid


def _ask(lab_server, d: Dialect, text: str = "I want to learn Rust", **kw) -> dict:
    task = d.send(lab_server.agent("interviewer"), text, **kw)
    assert task["status"]["state"] == d.state("input-required")
    return task


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_input_required_then_answer_completes_the_same_task(lab_server, d: Dialect):
    url = lab_server.agent("interviewer")
    first = _ask(lab_server, d)
    question = first["status"]["message"]
    assert question["role"] == d.role("agent")
    assert "Why does that matter" in text_of(question)
    assert [text_of(m) for m in first["history"]] == ["I want to learn Rust"]

    second = d.send(url, "it is fast", task_id=first["id"], context_id=first["contextId"])
    assert second["id"] == first["id"]
    assert second["contextId"] == first["contextId"]
    assert second["status"]["state"] == d.state("completed")
    hist = second["history"]
    assert [m["role"] for m in hist] == [d.role("user"), d.role("agent"), d.role("user")]
    assert text_of(hist[0]) == "I want to learn Rust"
    assert text_of(hist[1]) == text_of(question)
    assert text_of(hist[2]) == "it is fast"
    assert all(m["taskId"] == first["id"] and m["contextId"] == first["contextId"] for m in hist)
    answer = text_of(second["artifacts"][0])
    assert "I want to learn Rust" in answer and "it is fast" in answer
    assert d.get(url, first["id"]) == second


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_answer_with_only_task_id_infers_the_context(lab_server, d: Dialect):
    first = _ask(lab_server, d)
    second = d.send(lab_server.agent("interviewer"), "because", task_id=first["id"])
    assert second["id"] == first["id"] and second["contextId"] == first["contextId"]
    assert second["status"]["state"] == d.state("completed")
    assert second["history"][-1]["contextId"] == first["contextId"]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_client_context_is_carried_across_turns(lab_server, d: Dialect):
    ctx = uid("ctx-")
    first = _ask(lab_server, d, context_id=ctx)
    assert first["contextId"] == ctx
    second = d.send(lab_server.agent("interviewer"), "why not", task_id=first["id"], context_id=ctx)
    assert second["contextId"] == ctx and second["status"]["state"] == d.state("completed")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_second_turn_can_be_streamed(lab_server, d: Dialect):
    url = lab_server.agent("interviewer")
    first = _ask(lab_server, d)
    params = d.send_params("curiosity", task_id=first["id"], context_id=first["contextId"])
    with stream(url, d.method("stream"), params, version=d.version) as sse:
        frames = sse.rest()
    assert d.event_kind(frames[0].result) == "task"
    snap = d.event_body(frames[0].result)
    assert snap["id"] == first["id"] and snap["status"]["state"] == d.state("working")
    ids = [f.id for f in frames]
    assert increasing(ids)
    assert is_status(d, frames[-1], state="completed")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_message_to_a_completed_task_is_unsupported(lab_server, d: Dialect):
    done = d.send(lab_server.url, "finished")
    err = d.error(lab_server.url, "send", d.send_params("more", task_id=done["id"], context_id=done["contextId"]))
    assert err["code"] == -32004
    assert d.get(lab_server.url, done["id"]) == done


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_message_with_unknown_task_id_is_task_not_found(lab_server, d: Dialect):
    err = d.error(lab_server.agent("interviewer"), "send", d.send_params("hello", task_id=uid("nope-")))
    assert err["code"] == -32001


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_message_with_mismatched_context_is_invalid_params(lab_server, d: Dialect):
    url = lab_server.agent("interviewer")
    first = _ask(lab_server, d)
    err = d.error(url, "send", d.send_params("answer", task_id=first["id"], context_id=uid("other-")))
    assert err["code"] == -32602
    # the task is untouched and can still be answered properly
    assert d.get(url, first["id"]) == first
    second = d.send(url, "answer", task_id=first["id"], context_id=first["contextId"])
    assert second["status"]["state"] == d.state("completed")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_message_to_a_running_task_is_unsupported(lab_server, d: Dialect):
    url, key = lab_server.agent("slow"), uid("busy-")
    task = d.send(url, key, wait=False)
    lab_server.lab.wait_reached(key)
    err = d.error(url, "send", d.send_params("interrupt", task_id=task["id"], context_id=task["contextId"]))
    assert err["code"] == -32004
    lab_server.lab.open(key)
    done = d.wait_state(url, task["id"], {"completed"})
    assert [text_of(m) for m in done["history"]] == [key, f"started {key}"]
    assert lab_server.lab.calls_of(key) == 1
