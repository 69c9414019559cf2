"""tasks/list and ListTasks: filters, cursor pagination, trimming and validation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from srvkit import DIALECTS, Dialect, Lab, Live, lab_app, text_of, uid

from parley.protocol import models as m
from parley.tasks.log import Entry
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import TaskRecord


def _pages(d: Dialect, url: str, **params) -> list[dict]:
    pages, token = [], None
    for _ in range(50):
        q = dict(params)
        if token:
            q["pageToken"] = token
        page = d.list(url, **q)
        pages.append(page)
        token = page["nextPageToken"]
        if token == "":
            return pages
    raise AssertionError("pagination never ended")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_pagination_sees_every_task_once_newest_first(fresh_server, d: Dialect):
    url = fresh_server.url
    created = [d.send(url, f"task {i}")["id"] for i in range(7)]
    pages = _pages(d, url, pageSize=3)
    assert [len(p["tasks"]) for p in pages] == [3, 3, 1]
    for p in pages:
        assert set(p) >= {"tasks", "nextPageToken", "pageSize", "totalSize"}
        assert p["pageSize"] == 3 and p["totalSize"] == 7
    assert all(p["nextPageToken"] for p in pages[:-1])
    assert pages[-1]["nextPageToken"] == ""
    seen = [t["id"] for p in pages for t in p["tasks"]]
    assert len(seen) == len(set(seen))
    assert seen == created[::-1]  # most recently updated first
    for t in (t for p in pages for t in p["tasks"]):
        if not d.v1:
            assert t["kind"] == "task"
        assert t["status"]["state"] == d.state("completed")


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_single_page_has_empty_next_token_and_default_size(fresh_server, d: Dialect):
    d.send(fresh_server.url, "only one")
    page = d.list(fresh_server.url)
    assert len(page["tasks"]) == 1 and page["nextPageToken"] == ""
    assert page["totalSize"] == 1 and page["pageSize"] == 50


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_empty_list(fresh_server, d: Dialect):
    page = d.list(fresh_server.agent("interviewer"))
    assert page["tasks"] == [] and page["nextPageToken"] == "" and page["totalSize"] == 0


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_filter_by_context_id(lab_server, d: Dialect):
    url = lab_server.url
    ca, cb = uid("ctx-a-"), uid("ctx-b-")
    a = [d.send(url, "a", context_id=ca)["id"] for _ in range(3)]
    b = [d.send(url, "b", context_id=cb)["id"] for _ in range(2)]
    page_a = d.list(url, contextId=ca)
    assert [t["id"] for t in page_a["tasks"]] == a[::-1] and page_a["totalSize"] == 3
    page_b = d.list(url, contextId=cb)
    assert [t["id"] for t in page_b["tasks"]] == b[::-1]
    assert all(t["contextId"] == cb for t in page_b["tasks"])
    paged = _pages(d, url, contextId=ca, pageSize=2)
    assert [t["id"] for p in paged for t in p["tasks"]] == a[::-1]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_filter_by_state(lab_server, d: Dialect):
    url, ctx = lab_server.agent("interviewer"), uid("ctx-")
    waiting = d.send(url, "question please", context_id=ctx)
    done = d.send(url, "another", context_id=ctx)
    done = d.send(url, "answer", task_id=done["id"], context_id=ctx)
    assert waiting["status"]["state"] == d.state("input-required")
    assert done["status"]["state"] == d.state("completed")
    only_waiting = d.list(url, contextId=ctx, status=d.state("input-required"))
    assert [t["id"] for t in only_waiting["tasks"]] == [waiting["id"]]
    only_done = d.list(url, contextId=ctx, status=d.state("completed"))
    assert [t["id"] for t in only_done["tasks"]] == [done["id"]]
    assert d.list(url, contextId=ctx, status=d.state("failed"))["tasks"] == []


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_history_length_trims_each_task(lab_server, d: Dialect):
    url, ctx = lab_server.agent("interviewer"), uid("ctx-")
    t = d.send(url, "first words", context_id=ctx)
    d.send(url, "second words", task_id=t["id"], context_id=ctx)
    full = d.list(url, contextId=ctx)["tasks"][0]
    assert [text_of(m) for m in full["history"]][0::2] == ["first words", "second words"]
    assert len(full["history"]) == 3
    one = d.list(url, contextId=ctx, historyLength=1)["tasks"][0]
    assert [text_of(m) for m in one["history"]] == ["second words"]
    none = d.list(url, contextId=ctx, historyLength=0)["tasks"][0]
    assert "history" not in none or none["history"] == []
    assert none["status"] == full["status"] and none["id"] == full["id"]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_artifacts_only_with_include_artifacts(lab_server, d: Dialect):
    url, ctx = lab_server.url, uid("ctx-")
    sent = d.send(url, "artful", context_id=ctx)
    plain = d.list(url, contextId=ctx)["tasks"][0]
    assert "artifacts" not in plain
    also = d.list(url, contextId=ctx, includeArtifacts=False)["tasks"][0]
    assert "artifacts" not in also
    withart = d.list(url, contextId=ctx, includeArtifacts=True)["tasks"][0]
    assert withart["artifacts"] == sent["artifacts"]
    assert withart == sent


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
@pytest.mark.parametrize(
    "params",
    [
        {"pageToken": "this is not a token"},
        {"pageToken": "!!!"},
        {"pageSize": 0},
        {"pageSize": 101},
        {"pageSize": -1},
        {"pageSize": "ten"},
        {"historyLength": -1},
        {"contextId": 5},
        {"includeArtifacts": "yes"},
    ],
    ids=["token-words", "token-punct", "size-0", "size-101", "size-neg", "size-str", "hist-neg", "ctx-int",
         "incl-str"],
)
def test_invalid_list_params(lab_server, d: Dialect, params):
    err = d.error(lab_server.url, "list", params)
    assert err["code"] == -32602, err


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_unknown_state_filter_is_invalid(lab_server, d: Dialect):
    assert d.error(lab_server.url, "list", {"status": "sleeping"})["code"] == -32602


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_page_size_bounds_are_accepted(lab_server, d: Dialect):
    assert d.list(lab_server.url, pageSize=1)["pageSize"] == 1
    assert d.list(lab_server.url, pageSize=100)["pageSize"] == 100


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_get_task_history_length(lab_server, d: Dialect):
    url = lab_server.agent("interviewer")
    t = d.send(url, "one")
    t = d.send(url, "two", task_id=t["id"])
    assert len(d.get(url, t["id"])["history"]) == 3
    assert [text_of(m) for m in d.get(url, t["id"], historyLength=1)["history"]] == ["two"]
    assert "history" not in d.get(url, t["id"], historyLength=0)
    assert d.error(url, "get", {"id": t["id"], "historyLength": -1})["code"] == -32602


OLD_TIMESTAMP = "2001-02-03T04:05:06.789Z"  # long before any task a test creates


@dataclass
class Seeded:
    """A live server whose store already holds one completed echo task of `context_id`, settled at OLD_TIMESTAMP."""

    live: Live
    context_id: str
    old_task_id: str


@pytest.fixture
def seeded_server() -> Iterator[Seeded]:
    store = MemoryTaskStore()
    ctx, task_id = uid("ctx-"), uid("old-")
    question = m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text="from long ago")],
                         task_id=task_id, context_id=ctx)
    task = m.Task(id=task_id, context_id=ctx, history=[question],
                  status=m.TaskStatus(state=m.TaskState.COMPLETED, timestamp=OLD_TIMESTAMP))
    settled = 981173106.789  # OLD_TIMESTAMP as a Unix time
    record = TaskRecord(task=task, agent_id="echo", owner="anonymous", seq=1, created_at=settled, updated_at=settled)
    asyncio.run(store.create(record, Entry(1, task)))  # what an earlier run of the server left behind
    srv = Live(lab_app(Lab(), store=store)).start()
    yield Seeded(srv, ctx, task_id)
    srv.stop()


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_status_timestamp_after(seeded_server, d: Dialect):
    """Only tasks whose status changed at or after the cut are listed: the old task is left out of every cut
    later than its timestamp (the filter always has something to drop) and is in from its own timestamp on."""
    url, ctx, old = seeded_server.live.url, seeded_server.context_id, seeded_server.old_task_id
    first = d.send(url, "early", context_id=ctx)
    second = d.send(url, "late", context_id=ctx)
    assert OLD_TIMESTAMP < first["status"]["timestamp"] <= second["status"]["timestamp"]

    def listed(cut: str) -> set[str]:
        page = d.list(url, contextId=ctx, statusTimestampAfter=cut)
        assert page["totalSize"] == len(page["tasks"])
        return {t["id"] for t in page["tasks"]}

    assert {t["id"] for t in d.list(url, contextId=ctx)["tasks"]} == {old, first["id"], second["id"]}
    assert listed(OLD_TIMESTAMP) == {old, first["id"], second["id"]}  # inclusive
    assert listed("2001-02-03T04:05:06.790Z") == {first["id"], second["id"]}  # one millisecond later
    assert listed("2001-02-03T05:05:06.790+01:00") == {first["id"], second["id"]}  # the same instant, in +01:00
    assert listed("2001-02-03T05:05:06.788+01:00") == {old, first["id"], second["id"]}
    assert listed(first["status"]["timestamp"]) == {first["id"], second["id"]}
    assert second["id"] in listed(second["status"]["timestamp"])
    assert listed("2999-01-01T00:00:00Z") == set()
    assert d.error(url, "list", {"statusTimestampAfter": "last tuesday"})["code"] == -32602


@pytest.fixture
def sqlite_server(tmp_path):
    srv = Live(lab_app(Lab(), store=SqliteTaskStore(tmp_path / "list.db"))).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_sqlite_store_lists_like_the_memory_store(sqlite_server, fresh_server, d: Dialect):
    """The same operations give the same pages on both stores (ids aside)."""
    pages = {}
    for name, url in (("sqlite", sqlite_server.url), ("memory", fresh_server.url)):
        ctx = "shared-ctx"
        ids = [d.send(url, f"task {i}", context_id=ctx if i % 2 else None)["id"] for i in range(5)]
        got = _pages(d, url, pageSize=2, includeArtifacts=True)
        assert [len(p["tasks"]) for p in got] == [2, 2, 1]
        assert [t["id"] for p in got for t in p["tasks"]] == ids[::-1]
        assert [t["id"] for t in d.list(url, contextId=ctx)["tasks"]] == [ids[3], ids[1]]
        pages[name] = [[text_of(t["history"][0]) for t in p["tasks"]] for p in got]
    assert pages["sqlite"] == pages["memory"]


@pytest.mark.parametrize("d", DIALECTS, ids=["v0.3", "v1.0"])
def test_a_task_that_moves_comes_first_again(lab_server, d: Dialect):
    url, ctx = lab_server.agent("interviewer"), uid("ctx-")
    a = d.send(url, "topic a", context_id=ctx)
    b = d.send(url, "topic b", context_id=ctx)
    assert [t["id"] for t in d.list(url, contextId=ctx)["tasks"]] == [b["id"], a["id"]]
    d.send(url, "answer a", task_id=a["id"], context_id=ctx)
    assert [t["id"] for t in d.list(url, contextId=ctx)["tasks"]] == [a["id"], b["id"]]
