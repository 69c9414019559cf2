"""What one request may load and return (issue 28, item 6), on a live server over a SQLite file:

- a new task in a context with many large earlier tasks is handed at most `max_context_messages` messages and
  `max_context_bytes` of them (the newest), however much the context holds;
- a ListTasks page holds at most `max_page_bytes` of stored tasks (plus one task: a page always makes progress),
  ends early with a nextPageToken, and paging still reaches every task; includeArtifacts and historyLength are
  honoured.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import msgspec
import pytest

from parley.app import Parley
from parley.settings import LimitSettings, Settings
from support import LiveServer

V1 = {"A2A-Version": "1.0"}
CONTEXT_BYTES = 64 * 1024
CONTEXT_MESSAGES = 20
PAGE_BYTES = 256 * 1024
TEXT = 40_000  # characters of each earlier message: 30 tasks hold about 2.4 MB (the message and its echo)
TASKS = 30


@pytest.fixture
def bounded(tmp_path: Path) -> tuple[LiveServer, list[tuple[int, int]]]:
    """A server whose `keeper` agent echoes and records what context it was handed: (messages, encoded bytes)."""
    limits = LimitSettings(max_context_bytes=CONTEXT_BYTES, max_context_messages=CONTEXT_MESSAGES,
                           max_page_bytes=PAGE_BYTES)
    app = Parley(settings=Settings(db=str(tmp_path / "parley.db"), limits=limits))
    seen: list[tuple[int, int]] = []

    @app.agent(id="keeper", description="Echoes; records the context it was handed")
    async def keeper(ctx):
        history = ctx.context_history
        seen.append((len(history), sum(len(msgspec.json.encode(msg)) for msg in history)))
        yield ctx.message.text()

    srv = LiveServer(app).start()
    yield srv, seen
    srv.stop()


def send(srv: LiveServer, text: str, context_id: str) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], "contextId": context_id}}}
    resp = httpx.post(f"{srv.url}/a2a/keeper", json=body, headers=V1, timeout=30)
    return resp.json()["result"]["task"]


def test_a_new_task_in_a_large_context_is_handed_a_bounded_history(bounded) -> None:
    srv, seen = bounded
    context = str(uuid.uuid4())
    for i in range(TASKS):
        assert send(srv, f"{i:03d}" + "x" * TEXT, context)["status"]["state"] == "TASK_STATE_COMPLETED"
    seen.clear()
    send(srv, "and now?", context)
    (messages, size), = seen
    assert 0 < messages <= CONTEXT_MESSAGES and size <= CONTEXT_BYTES, (messages, size)
    # The newest tasks are the ones kept (the conversation carries on from where it was).
    small = str(uuid.uuid4())
    for text in ("first", "second"):
        send(srv, text, small)
    seen.clear()
    send(srv, "third", small)
    assert seen == [(4, seen[0][1])]  # both earlier messages and both answers: under the bounds, nothing cut


def test_a_list_page_is_bounded_in_bytes_and_paging_reaches_every_task(bounded) -> None:
    srv, _ = bounded
    context = str(uuid.uuid4())
    ids = {send(srv, f"{i:03d}" + "y" * TEXT, context)["id"] for i in range(TASKS)}
    listed: set[str] = set()
    token = ""
    pages = 0
    while True:
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {
            "contextId": context, "pageSize": 100, "pageToken": token, "includeArtifacts": True}}
        resp = httpx.post(f"{srv.url}/a2a/keeper", json=body, headers=V1, timeout=30)
        assert len(resp.content) <= PAGE_BYTES + 3 * TEXT, len(resp.content)  # the bound, plus at most one task
        result = resp.json()["result"]
        listed |= {t["id"] for t in result["tasks"]}
        pages += 1
        token = result.get("nextPageToken") or ""
        if not token:
            break
    assert listed == ids and pages > 1
    # historyLength and includeArtifacts are honoured: a page of the same tasks without them is small.
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": context, "historyLength": 0}}
    lean = httpx.post(f"{srv.url}/a2a/keeper", json=body, headers=V1, timeout=30)
    tasks = lean.json()["result"]["tasks"]
    assert tasks and all(not t.get("history") and not t.get("artifacts") for t in tasks)
    assert len(lean.content) < 1000 * len(tasks)
