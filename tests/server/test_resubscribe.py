"""tasks/resubscribe and SubscribeToTask: snapshots, Last-Event-ID replay, finished tasks."""

from __future__ import annotations

import pytest
from srvkit import D03, D10, DIALECTS, Dialect, increasing, is_status, post, stream, uid


def _sub(d: Dialect):
    return d.method("subscribe")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_last_event_id_replays_missed_events_then_follows_live(lab_server, d: Dialect):
    url, lab, key = lab_server.agent("stepper"), lab_server.lab, uid("rs-")
    with stream(url, d.method("stream"), d.send_params(key), version=d.version) as sse:
        seen = sse.until(lambda f: is_status(d, f, "step 1"))
    task_id = d.event_body(seen[0].result)["id"]
    by_id = {f.id: f.result for f in seen}
    last_seen = seen[-2].id  # pretend the client only got up to the event before "step 1"

    lab.open(f"{key}/1")
    lab.wait_reached(f"{key}/2")  # "step 2" now exists, and nobody is listening
    with stream(url, _sub(d), {"id": task_id}, version=d.version, headers={"Last-Event-ID": str(last_seen)}) as sse:
        replay = sse.until(lambda f: is_status(d, f, "step 2"))
        # exactly the events after last_seen: "step 1" (seen before) then "step 2"; no Task snapshot first
        assert [f.id for f in replay] == sorted(f.id for f in replay)
        assert replay[0].id == seen[-1].id
        assert replay[0].result == by_id[seen[-1].id]
        assert [d.event_kind(f.result) for f in replay] == ["status", "status"]
        assert all(f.id > last_seen for f in replay)
        lab.open(f"{key}/2")
        live = sse.rest()
    ids = [f.id for f in replay + live]
    assert increasing(ids), ids
    assert is_status(d, live[-1], state="completed")
    assert any(d.event_kind(f.result) == "artifact" for f in live)
    # the replayed + live events are the whole log after last_seen: nothing lost, nothing repeated
    with stream(url, _sub(d), {"id": task_id}, version=d.version, headers={"Last-Event-ID": str(last_seen)}) as sse:
        again = sse.rest()
    assert [(f.id, f.result) for f in again] == [(f.id, f.result) for f in replay + live]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_resubscribe_without_header_starts_with_snapshot_then_live(lab_server, d: Dialect):
    url, lab, key = lab_server.agent("stepper"), lab_server.lab, uid("rs-")
    task = d.send(url, key, wait=False)
    lab.wait_reached(f"{key}/1")
    with stream(url, _sub(d), {"id": task["id"]}, version=d.version) as sse:
        first = sse.next()
        assert d.event_kind(first.result) == "task"
        snap = d.event_body(first.result)
        assert snap["id"] == task["id"]
        assert snap["status"]["state"] == d.state("working")
        lab.open(f"{key}/1")
        step2 = sse.until(lambda f: is_status(d, f, "step 2"))
        lab.open(f"{key}/2")
        rest = sse.rest()
    frames = [first, *step2, *rest]
    ids = [f.id for f in frames]
    assert increasing(ids), ids
    # nothing from before the snapshot is repeated: "step 1" is already in the snapshot
    assert not any(is_status(d, f, "step 1") for f in frames[1:])
    assert is_status(d, frames[-1], state="completed")


def _finished_task(lab_server, d: Dialect) -> tuple[str, list]:
    with stream(lab_server.url, d.method("stream"), d.send_params("a b c d e f g"), version=d.version) as sse:
        frames = sse.rest()
    return d.event_body(frames[0].result)["id"], frames


def test_v03_resubscribe_to_finished_task_sends_snapshot_and_closes(lab_server):
    task_id, _ = _finished_task(lab_server, D03)
    with stream(lab_server.url, "tasks/resubscribe", {"id": task_id}) as sse:
        frames = sse.rest()
    assert len(frames) == 1
    assert frames[0].result["kind"] == "task"
    assert frames[0].result["status"]["state"] == "completed"
    assert frames[0].result == D03.get(lab_server.url, task_id)


def test_v10_subscribe_to_finished_task_is_unsupported(lab_server):
    task_id, _ = _finished_task(lab_server, D10)
    r = post(lab_server.url, {"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": task_id}},
             version="1.0")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["id"] == 7 and body["error"]["code"] == -32004
    assert "result" not in body


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_subscribe_to_finished_task_with_last_event_id_replays(lab_server, d: Dialect):
    task_id, original = _finished_task(lab_server, d)
    after = original[1].id
    with stream(lab_server.url, _sub(d), {"id": task_id}, version=d.version,
                headers={"Last-Event-ID": str(after)}) as sse:
        replay = sse.rest()
    assert [f.id for f in replay] == [f.id for f in original[2:]]
    assert [f.result for f in replay] == [f.result for f in original[2:]]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_subscribe_with_last_event_id_at_the_end_closes_empty(lab_server, d: Dialect):
    task_id, original = _finished_task(lab_server, d)
    with stream(lab_server.url, _sub(d), {"id": task_id}, version=d.version,
                headers={"Last-Event-ID": str(original[-1].id)}) as sse:
        assert sse.rest() == []


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_subscribe_with_non_numeric_last_event_id_is_invalid_request(lab_server, d: Dialect):
    task_id, _ = _finished_task(lab_server, d)
    err = d.error(lab_server.url, "subscribe", {"id": task_id}, headers={"Last-Event-ID": "abc"})
    assert err["code"] == -32600


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_two_subscribers_get_the_same_events_in_the_same_order(lab_server, d: Dialect):
    url, lab, key = lab_server.agent("stepper"), lab_server.lab, uid("rs-")
    task = d.send(url, key, wait=False)
    lab.wait_reached(f"{key}/1")
    with stream(url, _sub(d), {"id": task["id"]}, version=d.version) as a, \
            stream(url, _sub(d), {"id": task["id"]}, version=d.version) as b:
        fa, fb = a.next(), b.next()
        lab.open(f"{key}/1")
        lab.open(f"{key}/2")
        ra, rb = a.rest(), b.rest()
    assert fa.id == fb.id
    assert [(f.id, f.result) for f in ra] == [(f.id, f.result) for f in rb]
    assert is_status(d, ra[-1], state="completed")
