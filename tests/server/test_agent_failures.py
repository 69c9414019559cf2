"""Agents that fail: the task fails with a clear message, and the server carries on."""

from __future__ import annotations

import logging
import re

import pytest
from srvkit import DIALECTS, Dialect, is_status, stream, text_of, uid


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text
    assert 'File "' not in text and ".py" not in text


ERROR_ID = re.compile(r"^Agent (\S+) failed \(error ([0-9a-f]{12}); the server's log has the details\)$")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_agent_exception_fails_the_task_without_showing_its_text(lab_server, d: Dialect, caplog):
    """An exception's text may hold paths, queries or secrets: the client gets a generic reason and an
    error id, the server's log has the exception with the same id."""
    url, key = lab_server.agent("boom"), uid("k-")
    with caplog.at_level(logging.ERROR, logger="parley.engine"):
        task = d.send(url, key)
    assert task["status"]["state"] == d.state("failed")
    reason = text_of(task["status"]["message"])
    found = ERROR_ID.match(reason)
    assert found is not None and found[1] == "boom", reason
    assert key not in reason and "kaboom" not in reason and "RuntimeError" not in reason
    assert task["status"]["message"]["role"] == d.role("agent")
    _no_traceback(reason)
    logged = [r for r in caplog.records if found[2] in r.getMessage()]
    assert logged and logged[0].exc_info is not None and f"kaboom {key}" in str(logged[0].exc_info[1])
    # what the agent produced before failing is kept, and closed
    assert text_of(task["artifacts"][0]) == "partial output"
    assert d.get(url, task["id"]) == task


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_agent_exception_before_any_output(lab_server, d: Dialect):
    url, key = lab_server.agent("boom-early"), uid("k-")
    task = d.send(url, key)
    assert task["status"]["state"] == d.state("failed")
    reason = text_of(task["status"]["message"])
    assert ERROR_ID.match(reason) and key not in reason
    _no_traceback(reason)
    assert "artifacts" not in task


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_an_agent_error_is_shown_in_its_own_words(lab_server, d: Dialect):
    """`raise AgentError("...")`: the agent chose to show this reason to its client."""
    url, key = lab_server.agent("refuse"), uid("k-")
    task = d.send(url, key)
    assert task["status"]["state"] == d.state("failed")
    assert text_of(task["status"]["message"]) == f"invoice {key} is unknown"
    assert text_of(task["artifacts"][0]) == "looked at it"


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_failure_is_streamed_as_the_final_event(lab_server, d: Dialect):
    url, key = lab_server.agent("boom"), uid("k-")
    with stream(url, d.method("stream"), d.send_params(key), version=d.version) as sse:
        frames = sse.rest()
    assert all(f.event is None and "error" not in f.data for f in frames)
    last = frames[-1]
    assert is_status(d, last, state="failed")
    assert ERROR_ID.match(text_of(d.event_body(last.result)["status"]["message"]))
    if not d.v1:
        assert last.result["final"] is True
    chunks = [d.event_body(f.result) for f in frames if d.event_kind(f.result) == "artifact"]
    assert chunks and chunks[-1].get("lastChunk") is True


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_agent_yielding_garbage_fails_the_task(lab_server, d: Dialect):
    task = d.send(lab_server.agent("garbage"), "anything")
    assert task["status"]["state"] == d.state("failed")
    reason = text_of(task["status"]["message"])
    assert "Invalid agent response" in reason
    _no_traceback(reason)


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_failed_task_is_final(lab_server, d: Dialect):
    url = lab_server.agent("boom")
    task = d.send(url, "x")
    assert d.error(url, "cancel", {"id": task["id"]})["code"] == -32002
    err = d.error(url, "send", d.send_params("retry", task_id=task["id"], context_id=task["contextId"]))
    assert err["code"] == -32004
    failed = d.list(url, status=d.state("failed"), pageSize=100)["tasks"]
    assert task["id"] in {t["id"] for t in failed}


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_server_keeps_serving_after_failures(lab_server, d: Dialect):
    for _ in range(3):
        assert d.send(lab_server.agent("boom"), "fail")["status"]["state"] == d.state("failed")
    task = d.send(lab_server.url, "alive and well")
    assert task["status"]["state"] == d.state("completed")
    assert text_of(task["artifacts"][0]) == "alive and well"


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_cancelled_error_escaping_the_agent_fails_the_task(lab_server, d: Dialect):
    """A CancelledError the agent did not ask for (nobody canceled the task) is an agent failure.

    The task must end (failed) so that blocking sends return and streams end with a final state,
    instead of the task staying `working` forever.
    """
    url = lab_server.agent("stray-cancel")
    with stream(url, d.method("stream"), d.send_params("x"), version=d.version) as sse:
        frames = sse.rest()
    task_id = d.event_body(frames[0].result)["id"]
    assert is_status(d, frames[-1], state="failed"), [d.event_body(f.result) for f in frames[1:]]
    task = d.get(url, task_id)
    assert task["status"]["state"] == d.state("failed")
    reason = text_of(task["status"].get("message"))
    assert reason.strip()
    _no_traceback(reason)
