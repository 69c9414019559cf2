"""message/stream and SendStreamingMessage: SSE framing, chunking and stream end."""

from __future__ import annotations

import pytest
from srvkit import D03, D10, DIALECTS, Dialect, Frame, Lab, increasing, is_status, lab_app, live, stream, text_of, uid

from parley.app import Settings

TEXT = "one two three four five six seven eight"


def _stream_all(url: str, d: Dialect, text: str) -> list[Frame]:
    with stream(url, d.method("stream"), d.send_params(text), version=d.version) as sse:
        return sse.rest()


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_stream_frames_have_increasing_ids_and_start_with_the_task(lab_server, d: Dialect):
    frames = _stream_all(lab_server.url, d, TEXT)
    ids = [f.id for f in frames]
    assert all(isinstance(i, int) for i in ids), ids
    assert increasing(ids), ids
    assert all(f.event is None for f in frames)
    for f in frames:
        assert f.data["jsonrpc"] == "2.0" and f.data["id"] == 1 and "error" not in f.data
    first = frames[0]
    assert d.event_kind(first.result) == "task"
    task = d.event_body(first.result)
    assert task["status"]["state"] == d.state("submitted")
    for f in frames[1:]:
        body = d.event_body(f.result)
        assert body["taskId"] == task["id"] and body["contextId"] == task["contextId"]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_echo_chunks_append_and_last_chunk_and_snapshot_matches(lab_server, d: Dialect):
    frames = _stream_all(lab_server.url, d, TEXT)
    chunks = [d.event_body(f.result) for f in frames if d.event_kind(f.result) == "artifact"]
    assert len(chunks) >= 2
    assert len({c["artifact"]["artifactId"] for c in chunks}) == 1
    assert [bool(c.get("append")) for c in chunks] == [False] + [True] * (len(chunks) - 1)
    assert [bool(c.get("lastChunk")) for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert "".join(text_of(c["artifact"]) for c in chunks) == TEXT
    task_id = d.event_body(frames[0].result)["id"]
    snap = d.get(lab_server.url, task_id)
    assert snap["status"]["state"] == d.state("completed")
    assert len(snap["artifacts"]) == 1
    assert snap["artifacts"][0]["parts"][0]["text"] == TEXT
    assert text_of(snap["artifacts"][0]) == TEXT


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_stream_ends_with_the_terminal_status_then_closes(lab_server, d: Dialect):
    frames = _stream_all(lab_server.url, d, TEXT)  # returns only because the server closed it
    last = frames[-1]
    assert is_status(d, last, state="completed")
    states = [d.event_body(f.result)["status"]["state"] for f in frames if d.event_kind(f.result) == "status"]
    assert states == [d.state("working"), d.state("completed")]


def test_v03_status_updates_have_kind_and_final_only_on_the_last(lab_server):
    frames = _stream_all(lab_server.url, D03, TEXT)
    kinds = [f.result["kind"] for f in frames]
    assert kinds[0] == "task"
    assert set(kinds[1:]) <= {"status-update", "artifact-update"}
    statuses = [f.result for f in frames if f.result["kind"] == "status-update"]
    assert [s["final"] for s in statuses] == [False] * (len(statuses) - 1) + [True]
    assert frames[-1].result["kind"] == "status-update"
    for f in frames:
        if f.result["kind"] == "artifact-update":
            assert all(p["kind"] == "text" for p in f.result["artifact"]["parts"])


def test_v10_events_have_no_kind_and_no_final(lab_server):
    frames = _stream_all(lab_server.url, D10, TEXT)
    for f in frames:
        (key, body), = f.result.items()
        assert key in {"task", "statusUpdate", "artifactUpdate"}
        assert "kind" not in body and "final" not in body
        if key == "artifactUpdate":
            assert all("kind" not in p for p in body["artifact"]["parts"])


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_stream_of_an_agent_that_asks_for_input_closes_on_input_required(lab_server, d: Dialect):
    frames = _stream_all(lab_server.agent("interviewer"), d, "I want to learn Rust")
    last = frames[-1]
    assert is_status(d, last, state="input-required")
    assert "Why does that matter" in text_of(d.event_body(last.result)["status"]["message"])
    if not d.v1:
        assert last.result["final"] is True


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_two_streams_in_a_row_have_independent_tasks(lab_server, d: Dialect):
    a = _stream_all(lab_server.url, d, "first")
    b = _stream_all(lab_server.url, d, "second")
    assert d.event_body(a[0].result)["id"] != d.event_body(b[0].result)["id"]
    assert [f.id for f in a] == [f.id for f in b]  # per-task sequence numbers


@pytest.fixture(scope="module")
def chatty_server():
    """A server that sends SSE keep-alives after a very short idle time."""
    lab = Lab()
    with live(lab_app(lab, settings=Settings(keepalive_seconds=0.02))) as srv:
        yield srv, lab
        lab.open_all()


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_idle_stream_gets_keepalive_comments_and_then_the_events(chatty_server, d: Dialect):
    srv, lab = chatty_server
    key = uid("ka-")
    with stream(srv.agent_url("slow"), d.method("stream"), d.send_params(key), version=d.version) as sse:
        head = sse.until(lambda f: is_status(d, f, f"started {key}"))
        assert sse.keepalive().startswith(":")
        assert sse.keepalive().startswith(":")
        lab.open(key)
        rest = sse.rest()
    frames = head + rest
    ids = [f.id for f in frames]
    assert increasing(ids)
    assert is_status(d, frames[-1], state="completed")
    assert "".join(text_of(d.event_body(f.result)["artifact"]) for f in rest
                   if d.event_kind(f.result) == "artifact") == f"done {key}"
