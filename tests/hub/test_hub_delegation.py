"""Delegation over A2A across the fleet: routing, relaying, input-required, cancel, cycles, depth, outages."""

from __future__ import annotations

from pathlib import Path

import pytest
from hubkit import (
    QUESTION,
    Fleet,
    collect,
    fleet_app,
    get_task,
    last_state,
    path_of,
    status_texts,
    trace,
    until,
)

from parley.client import A2AClient, user_message
from parley.protocol import models as m
from parley.tasks.sqlite_store import SqliteTaskStore
from support import LiveServer, free_port

S = m.TaskState


async def test_a_message_crosses_all_three_agents(fleet: Fleet) -> None:
    front = fleet.agent("front-desk")
    async with await A2AClient.connect(front) as client:
        events = await collect(client, "Please refund invoice INV-7")
    task = events[0]
    assert isinstance(task, m.Task)
    assert last_state(events) is S.COMPLETED

    # progress: the parent's own, then what billing relayed from the specialist
    texts = status_texts(events)
    assert "asked billing" in texts
    assert "billing: checking the account" in texts
    assert "asked specialist" in texts
    assert "specialist: reviewing INV-7" in texts
    assert texts.index("asked billing") < texts.index("asked specialist")

    # artifacts relayed under the parent's own ids: the data report and the streamed text
    updates = [ev for ev in events if isinstance(ev, m.TaskArtifactUpdateEvent)]
    assert {u.task_id for u in updates} == {task.id}
    assert "report" not in {u.artifact.artifact_id for u in updates}
    final = await get_task(front, task.id)
    by_name = {a.name: a for a in final.artifacts or []}
    assert by_name["report"].parts[0].data == {"invoice": "INV-7", "refund": "approved"}
    assert "".join(p.text or "" for p in by_name["response"].parts) == "Refund approved for INV-7."
    assert final.status.state is S.COMPLETED

    # the child tasks point at their parents, and carry the chain
    tree = await trace(front, task.id)
    assert path_of(tree) == [("front-desk", "completed"), ("billing", "completed"), ("specialist", "completed")]
    child_id = tree["children"][0]["taskId"]
    grandchild_id = tree["children"][0]["children"][0]["taskId"]
    child = await get_task(fleet.agent("billing"), child_id)
    grandchild = await get_task(fleet.agent("specialist"), grandchild_id)
    assert child.history[0].reference_task_ids == [task.id]
    assert grandchild.history[0].reference_task_ids == [child_id]
    assert child.history[0].metadata["parley"] == {"chain": [front], "depth": 1}
    assert grandchild.history[0].metadata["parley"] == {"chain": [front, fleet.agent("billing")], "depth": 2}
    assert grandchild.history[0].text() == "billing asks: Please refund invoice INV-7"


async def test_input_required_reaches_the_client_and_the_answer_flows_down(fleet: Fleet) -> None:
    front = fleet.agent("front-desk")
    async with await A2AClient.connect(front) as client:
        first = await collect(client, "I want a refund")
        task = first[0]
        assert isinstance(task, m.Task)
        assert last_state(first) is S.INPUT_REQUIRED
        assert status_texts(first)[-1] == QUESTION

        tree = await trace(front, task.id)
        assert path_of(tree) == [("front-desk", "input-required"), ("billing", "input-required"),
                                 ("specialist", "input-required")]

        second = await collect(client, user_message("It is INV-42"), task_id=task.id, context_id=task.context_id)
    assert last_state(second) is S.COMPLETED
    assert "passed the answer to billing" in status_texts(second)
    final = await get_task(front, task.id)
    assert final.status.state is S.COMPLETED
    texts = ["".join(p.text or "" for p in a.parts) for a in final.artifacts or []]
    assert "Refund approved for INV-42." in texts

    # the same child tasks were continued (one link each), and they completed
    tree = await trace(front, task.id)
    assert path_of(tree) == [("front-desk", "completed"), ("billing", "completed"), ("specialist", "completed")]
    assert len(tree["children"]) == 1 and len(tree["children"][0]["children"]) == 1
    specialist_task = await get_task(fleet.agent("specialist"), tree["children"][0]["children"][0]["taskId"])
    assert [msg.text() for msg in specialist_task.history if msg.role is m.Role.USER] == [
        "billing asks: I want a refund", "It is INV-42"]


async def test_cancel_of_the_parent_cancels_its_children(fleet: Fleet) -> None:
    front = fleet.agent("front-desk")
    async with await A2AClient.connect(front) as client:
        task = await client.send("refund slowly, please", blocking=False)
        assert isinstance(task, m.Task)

        async def waiting() -> dict | None:
            tree = await trace(front, task.id)
            return tree if path_of(tree)[-1] == ("waiter", "working") else None

        tree = await until(waiting, "the grandchild to be working")
        canceled = await client.cancel(task.id)
    assert canceled.status.state is S.CANCELED
    child_id = tree["children"][0]["taskId"]
    grandchild_id = tree["children"][0]["children"][0]["taskId"]

    async def state_of(agent: str, task_id: str) -> S | None:
        t = await get_task(fleet.agent(agent), task_id)
        return t.status.state if t.status.state is S.CANCELED else None

    assert await until(lambda: state_of("billing", child_id), "billing's task to be canceled") is S.CANCELED
    assert await until(lambda: state_of("waiter", grandchild_id), "waiter's task to be canceled") is S.CANCELED


async def test_a_cycle_fails_with_a_clear_message(fleet: Fleet) -> None:
    async with await A2AClient.connect(fleet.agent("front-desk")) as client:
        task = await client.send("invoice loop")
    assert isinstance(task, m.Task)
    assert task.status.state is S.FAILED
    reason = task.status.message.text()
    assert "delegation cycle: front-desk -> billing -> front-desk" in reason
    assert reason.startswith("billing failed:")


async def test_the_depth_limit_stops_a_long_chain(fleet: Fleet) -> None:
    async with await A2AClient.connect(fleet.agent("hop1")) as client:
        task = await client.send("go deep")
    assert isinstance(task, m.Task)
    assert task.status.state is S.FAILED
    reason = task.status.message.text()
    assert "delegation depth limit reached: hop1 -> hop2 -> hop3 -> hop4 -> hop5 -> hop6 -> hop7 would be 6 hops, " \
           "more than the limit of 5" in reason
    tree = await trace(fleet.agent("hop1"), task.id, depth=10)
    assert [agent for agent, _ in path_of(tree)] == ["hop1", "hop2", "hop3", "hop4", "hop5", "hop6"]
    assert {state for _, state in path_of(tree)} == {"failed"}


async def test_an_agent_that_is_down_fails_the_parent_after_bounded_retries(fleet: Fleet) -> None:
    async with await A2AClient.connect(fleet.agent("offline")) as client:
        task = await client.send("hello?")
    assert isinstance(task, m.Task)
    assert task.status.state is S.FAILED
    reason = task.status.message.text()
    url = f"http://127.0.0.1:{fleet.closed_port}/a2a/nobody"
    assert reason.startswith(f"could not reach offline at {url} after 3 attempt(s):"), reason
    assert (await trace(fleet.agent("offline"), task.id))["children"] == []


@pytest.mark.parametrize(("text", "agent"), [
    ("my warranty claim", "specialist"),  # a tag on specialist's card
    ("refund my repairs", "billing"),  # both rules match: the higher priority wins
    ("where is the lift?", None),  # no rule: front-desk answers itself
])
async def test_routing_on_the_live_fleet(fleet: Fleet, text: str, agent: str | None) -> None:
    front = fleet.agent("front-desk")
    async with await A2AClient.connect(front) as client:
        task = await client.send(text)
        assert isinstance(task, m.Task)
        tree = await trace(front, task.id)
        if agent is None:
            assert tree["children"] == []
            assert task.status.state is S.COMPLETED
            assert "Front desk here" in "".join(p.text or "" for a in task.artifacts or [] for p in a.parts)
        else:
            assert tree["children"][0]["agent"] == agent
        if task.status.state is S.INPUT_REQUIRED:
            await client.cancel(task.id)  # leave nothing waiting


async def test_a_delegated_question_survives_a_restart(tmp_path: Path) -> None:
    """The parent's checkpoint (which child asked) is in SQLite: the answer after a restart still flows down."""
    port, db = free_port(), tmp_path / "hub.db"
    live = LiveServer(fleet_app(free_port(), SqliteTaskStore(db)), port, self_url=True).start()
    front = f"{live.url}/a2a/front-desk"
    try:
        async with await A2AClient.connect(front) as client:
            task = await client.send("refund, please")
        assert isinstance(task, m.Task) and task.status.state is S.INPUT_REQUIRED
    finally:
        live.stop()
    live = LiveServer(fleet_app(free_port(), SqliteTaskStore(db)), port, self_url=True).start()
    try:
        async with await A2AClient.connect(front) as client:
            done = await client.send(user_message("INV-8"), task_id=task.id)
        assert isinstance(done, m.Task) and done.status.state is S.COMPLETED
        tree = await trace(front, task.id)
        assert path_of(tree) == [("front-desk", "completed"), ("billing", "completed"), ("specialist", "completed")]
    finally:
        live.stop()


async def test_cancel_while_waiting_for_input_cancels_the_waiting_children(fleet: Fleet) -> None:
    """No agent code runs for a task waiting for input: the engine cancels what it delegated to."""
    front = fleet.agent("front-desk")
    async with await A2AClient.connect(front) as client:
        first = await collect(client, "I want a refund")
        task = first[0]
        assert isinstance(task, m.Task) and last_state(first) is S.INPUT_REQUIRED
        tree = await trace(front, task.id)
        assert path_of(tree)[-1] == ("specialist", "input-required")
        canceled = await client.cancel(task.id)
    assert canceled.status.state is S.CANCELED
    child_id = tree["children"][0]["taskId"]
    child = await get_task(fleet.agent("billing"), child_id)
    assert child.status.state is S.CANCELED
    # billing, canceled the same way while it waited, passed the cancel on to the specialist
    grandchild_id = tree["children"][0]["children"][0]["taskId"]
    grandchild = await get_task(fleet.agent("specialist"), grandchild_id)
    assert grandchild.status.state is S.CANCELED
