"""A task whose agent left a checkpoint is resumed from it after a server restart."""

import asyncio
import time

from parley.app import Parley
from parley.tasks.engine import RESUME_MESSAGE
from parley.tasks.sqlite_store import SqliteTaskStore
from support import LiveServer, rpc


def resumable_app(db, seen: list) -> Parley:
    app = Parley(store=SqliteTaskStore(db))

    @app.agent(id="resumable")
    async def resumable(ctx):
        seen.append(ctx.checkpoint)
        if ctx.checkpoint is None:
            yield ctx.internal("checkpoint", state={"step": 1, "notes": ["gathered"]})
            yield ctx.say("step 1 done")
            await asyncio.Event().wait()  # the process "dies" here: this never returns
        yield f"finished after step {ctx.checkpoint['step'] if ctx.checkpoint else 0}"

    return app


def wait_for_state(url, task_id, states, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = rpc(url, "GetTask", {"id": task_id}, version="1.0").json()["result"]
        if task["status"]["state"] in states:
            return task
        time.sleep(0.02)
    raise AssertionError(f"task {task_id} never reached {states}")


def test_restart_resumes_from_the_last_checkpoint(tmp_path):
    db = tmp_path / "tasks.db"
    first_seen: list = []
    a = LiveServer(resumable_app(db, first_seen)).start()
    try:
        out = rpc(f"{a.url}/a2a/resumable", "SendMessage", {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go"}]},
            "configuration": {"returnImmediately": True}}, version="1.0").json()
        task_id = out["result"]["task"]["id"]
        # wait until the agent reported step 1 (its checkpoint is stored before that status)
        deadline = time.monotonic() + 20
        while True:
            task = rpc(a.url + "/a2a/resumable", "GetTask", {"id": task_id}, version="1.0").json()["result"]
            msg = task["status"].get("message")
            if msg and msg["parts"][0]["text"] == "step 1 done":
                break
            assert time.monotonic() < deadline, "the agent never reported step 1"
            time.sleep(0.02)
    finally:
        a.stop()  # the run is cut off mid-task
    assert first_seen == [None]

    second_seen: list = []
    b = LiveServer(resumable_app(db, second_seen)).start()
    try:
        task = wait_for_state(f"{b.url}/a2a/resumable", task_id, {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED"})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert second_seen == [{"step": 1, "notes": ["gathered"]}]
        assert task["artifacts"][0]["parts"][0]["text"] == "finished after step 1"
        texts = [p["text"] for msg in task["history"] for p in msg["parts"] if "text" in p]
        assert RESUME_MESSAGE in texts and "step 1 done" in texts
    finally:
        b.stop()
    # the checkpoint is gone once the task finished (read once the server let go of the file)
    store = SqliteTaskStore(db)
    try:
        assert asyncio.run(store.get_checkpoint(task_id)) is None
    finally:
        asyncio.run(store.close())
