"""`--memory` is bounded: the in-memory store keeps the `keep_finished` most recently finished tasks and forgets
older ones with everything that belongs to them; running and waiting tasks are always kept; the change feed's
positions keep growing while its old rows are dropped."""

from __future__ import annotations

import pytest
from test_store_contract import advance, key, new_task, put, status

from parley.protocol import models as m
from parley.tasks.memory_store import DEFAULT_KEEP_FINISHED, MemoryTaskStore
from parley.tasks.store import Lease, TaskLink

S = m.TaskState


async def finish(store: MemoryTaskStore, task_id: str) -> None:
    await put(store, new_task(task_id, state=S.WORKING), message=key(f"m-{task_id}"), lease=Lease("me", 9e9))
    await advance(store, task_id, status(S.COMPLETED, "done", task_id=task_id), release_lease=True,
                  checkpoint={"n": 1}, links=[TaskLink(task_id, "http://x", f"child-{task_id}")])


async def test_the_oldest_finished_tasks_are_forgotten_with_what_belongs_to_them() -> None:
    store = MemoryTaskStore(keep_finished=3)
    await put(store, new_task("running", state=S.WORKING), message=key("m-running"))
    await put(store, new_task("waiting", state=S.INPUT_REQUIRED), message=key("m-waiting"))
    for i in range(5):
        await finish(store, f"t{i}")
    for gone in ("t0", "t1"):
        assert await store.get(gone) is None
        assert await store.events_after(gone, 0) == []
        assert await store.find_message(key(f"m-{gone}")) is None  # a resend is a new message now
        assert await store.get_checkpoint(gone) is None
        assert await store.links(gone) == []
    for kept in ("t2", "t3", "t4"):
        assert (await store.get(kept)).task.status.state is S.COMPLETED
        assert [e.seq for e in await store.events_after(kept, 0)] == [1, 2]
        assert await store.find_message(key(f"m-{kept}")) == kept
    for alive in ("running", "waiting"):  # never forgotten, however old
        assert await store.get(alive) is not None
        assert await store.find_message(key(f"m-{alive}")) == alive


async def test_the_change_feed_is_trimmed_and_its_positions_keep_growing() -> None:
    store = MemoryTaskStore(keep_finished=1)
    for i in range(20):
        await finish(store, f"t{i}")  # two commits each: 40 feed rows, at most 8 kept
    kept = await store.changes_after(0)
    assert 0 < len(kept) <= 8
    assert [c.position for c in kept] == list(range(41 - len(kept), 41))
    assert kept[-1].task_id == "t19"
    assert await store.changes_after(40) == []
    await finish(store, "t20")
    assert [c.position for c in await store.changes_after(40)] == [41, 42]


async def test_unbounded_on_request_and_a_sane_default() -> None:
    store = MemoryTaskStore(keep_finished=None)
    for i in range(30):
        await finish(store, f"t{i}")
    assert await store.get("t0") is not None
    assert MemoryTaskStore().keep_finished == DEFAULT_KEEP_FINISHED == 10_000
    with pytest.raises(ValueError, match="keep_finished must be at least 1"):
        MemoryTaskStore(keep_finished=0)
