"""The numbers behind the dashboard's pictures (docs/dashboard.md): push attempts by outcome per minute from the
store, time to first event from the stores' stamp, the delegation tree's layout and the status timeline's
positions, on known inputs."""

from __future__ import annotations

from parley.protocol import models as m
from parley.tasks.log import Entry
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.store import Commit, DeliveryAttempt, StoredPushConfig, TaskRecord
from parley.web.charts import HEIGHT, agent_stats, latency_bars
from parley.web.push_chart import MAX_ATTEMPTS, push_stats
from parley.web.render import duration
from parley.web.state_timeline import state_timeline
from parley.web.tree_graph import GAP_X, MAX_LABEL, NODE_HEIGHT, NODE_WIDTH, tree_graph

S = m.TaskState
NOW = 1_000_000.0


def status(state: m.TaskState, task_id: str) -> m.TaskStatusUpdateEvent:
    return m.TaskStatusUpdateEvent(task_id=task_id, context_id="c", status=m.TaskStatus(state=state))


async def task_with_hook(store: MemoryTaskStore, task_id: str, agent: str, *, created: float,
                         first: float) -> int:
    """A task created at `created` whose first event (working) is committed at `first`, with a webhook; the id
    of its first notification."""
    task = m.Task(id=task_id, context_id="c", status=m.TaskStatus(state=S.SUBMITTED))
    await store.create(TaskRecord(task=task, agent_id=agent, owner="o", seq=1, updated_at=created,
                                  created_at=created), Entry(1, task))
    hook = StoredPushConfig(m.TaskPushNotificationConfig(url="https://h.example/x", task_id=task_id, id="h"))
    await store.commit(Commit(task_id=task_id, expected_seq=1, entries=[Entry(2, status(S.WORKING, task_id))],
                              snapshot=task, updated_at=first, push_configs=[hook]))
    return (await store.push_log(task_id))[0][0].id


async def test_push_attempts_are_counted_per_minute_by_outcome() -> None:
    """Attempts 30 s, 90 s and 90 s ago and one two hours ago: the last is outside the hour; the others fall
    in the last minute and the one before, by outcome; another agent's attempts are not counted."""
    store = MemoryTaskStore()
    mine = await task_with_hook(store, "t1", "a", created=NOW - 100, first=NOW - 99)
    theirs = await task_with_hook(store, "t2", "b", created=NOW - 100, first=NOW - 99)
    note = (await store.push_log("t1"))[0][0]
    for i, (ago, outcome) in enumerate([(7200, "retry"), (90, "retry"), (90, "dead"), (30, "delivered")], 1):
        await store.record_attempt(DeliveryAttempt(mine, i, NOW - ago, 500, None, 0.01, outcome), note)
    other = (await store.push_log("t2"))[0][0]
    await store.record_attempt(DeliveryAttempt(theirs, 1, NOW - 10, 410, None, 0.01, "disabled"), other)
    stats = await push_stats(store, "a", NOW)
    assert stats.outcomes == {"retry": 1, "dead": 1, "delivered": 1} and stats.attempts == 3
    assert stats.minutes[-1] == {"delivered": 1} and stats.minutes[-2] == {"retry": 1, "dead": 1}
    assert sum(map(len, stats.minutes[:-2])) == 0 and not stats.truncated
    assert (await push_stats(store, "b", NOW)).outcomes == {"disabled": 1}


async def test_push_stats_say_when_they_stopped_counting() -> None:
    store = MemoryTaskStore()
    nid = await task_with_hook(store, "t1", "a", created=NOW - 100, first=NOW - 99)
    note = (await store.push_log("t1"))[0][0]
    for i in range(MAX_ATTEMPTS + 1):
        await store.record_attempt(DeliveryAttempt(nid, i + 1, NOW - 5, 500, None, 0.01, "retry"), note)
    stats = await push_stats(store, "a", NOW)
    assert stats.truncated and stats.attempts == MAX_ATTEMPTS


async def test_time_to_first_event_comes_from_the_stamp() -> None:
    """Tasks created 61 s ago whose first event came 0.5 s, 1 s and 2 s later: p50 1 s, p95 2 s (nearest rank),
    the first in the minute before the last, the others in the last; a task with only the Task has none yet."""
    store = MemoryTaskStore()
    for i, wait in enumerate([0.5, 2.0, 1.0]):
        await task_with_hook(store, f"t{i}", "a", created=NOW - 61, first=NOW - 61 + wait)
    lone = m.Task(id="t9", context_id="c", status=m.TaskStatus(state=S.SUBMITTED))
    await store.create(TaskRecord(task=lone, agent_id="a", owner="o", seq=1, updated_at=NOW - 1,
                                  created_at=NOW - 1), Entry(1, lone))
    stats = await agent_stats(store, "a", NOW)
    assert sorted(stats.first_events) == [0.5, 1.0, 2.0]
    assert stats.first_event_percentile(50) == 1.0 and stats.first_event_percentile(95) == 2.0
    assert sorted(stats.first_by_minute[-2]) == [0.5] and sorted(stats.first_by_minute[-1]) == [1.0, 2.0]


def test_durations_under_a_second_read_in_milliseconds() -> None:
    assert [duration(x) for x in (0.0, 0.0004, 0.0123, 0.4567, 1.25)] == ["0 ms", "0.4 ms", "12 ms", "457 ms", "1.2 s"]


def test_the_tree_is_laid_out_parents_left_of_their_children() -> None:
    """lead -> (middle -> leaf, far): leaves take rows in order, a parent sits level with the middle of its
    children, one column per depth, one edge per delegation; long names are cut (the title has them whole)."""
    long_name = "x" * (MAX_LABEL + 5)
    tree = {"taskId": "r", "agent": "lead", "state": "completed", "source": "local", "children": [
        {"taskId": "m", "agent": "middle", "state": "working", "source": "local", "children": [
            {"taskId": "l", "agent": "leaf", "state": "completed", "source": "local", "children": []}]},
        {"taskId": "f", "agent": long_name, "state": "unknown", "source": "unreachable", "error": "refused",
         "children": []}]}
    graph = tree_graph(tree)
    at = {n["taskId"]: (n["x"], n["y"], n["depth"]) for n in graph["nodes"]}
    row = NODE_HEIGHT + 14
    column = NODE_WIDTH + GAP_X
    assert at == {"l": (2 * column, 0, 2), "m": (column, 0, 1), "f": (column, row, 1), "r": (0, row / 2, 0)}
    assert len(graph["edges"]) == 3
    assert graph["width"] == 3 * column - GAP_X + 2 and graph["height"] == 2 * row - 14 + 2
    far = next(n for n in graph["nodes"] if n["taskId"] == "f")
    assert far["agent"] == "x" * (MAX_LABEL - 1) + "…" and far["title"] == f"{long_name}: unknown · task f · refused"


def test_the_timeline_places_each_change_at_its_time() -> None:
    """Changes at 0, 1 and 4 s of a settled task: marks at 0, 1/4 and the whole width; each band reaches the
    next change; a running task's last band reaches now; rows without a readable time are left out."""
    rows = [{"seq": 1, "state": "submitted", "at": "2026-01-01T00:00:00.000Z"},
            {"seq": 2, "state": "working", "at": "2026-01-01T00:00:01.000Z"},
            {"seq": 3, "state": "odd", "at": "not a time"},
            {"seq": 4, "state": "completed", "at": "2026-01-01T00:00:04.000Z"}]
    picture = state_timeline(rows, settled=True, now=0.0)
    assert picture is not None and picture["span"] == 4.0
    marks = [(mk["seq"], mk["x"], mk["offset"]) for mk in picture["marks"]]
    inner = picture["width"] - 16
    assert marks == [(1, 8.0, 0.0), (2, 8 + inner / 4, 1.0), (4, 8.0 + inner, 4.0)]
    assert [b["width"] for b in picture["bands"]] == [inner / 4, inner * 3 / 4, 0.0]
    start = marks[0][2]
    running = state_timeline(rows[:2], settled=False, now=1767225600.0 + 3)  # 2026-01-01T00:00:03Z
    assert running is not None and running["span"] == 3.0 and running["bands"][-1]["width"] == round(inner * 2 / 3, 2)
    assert start == 0.0 and state_timeline([{"seq": 1, "state": "x", "at": None}], settled=True, now=0) is None


def test_latency_bars_per_minute_scale_to_the_hours_highest_p95() -> None:
    """Minute 58 with 1 s, 2 s and 4 s (p50 2 s, p95 4 s) and minute 59 with 1 s: the p95 of minute 58 fills
    the chart, every other bar is in proportion; minutes without tasks have no bar."""
    by_minute: list[list[float]] = [[] for _ in range(60)]
    by_minute[58] = [4.0, 1.0, 2.0]
    by_minute[59] = [1.0]
    drawn = latency_bars(by_minute)
    assert [(r["minute"], r["p50"], r["p95"], r["count"], r["height50"], r["height95"]) for r in drawn] == [
        (58, 2.0, 4.0, 3, HEIGHT / 2, HEIGHT), (59, 1.0, 1.0, 1, HEIGHT / 4, HEIGHT / 4)]
    assert latency_bars([[] for _ in range(60)]) == []
    assert latency_bars([[0.0]])[0]["height95"] == 0.0  # all zero: flat, no division by zero
