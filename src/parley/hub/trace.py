"""Delegation traces: a task, who called it, and everything it called, as a JSON tree.

    GET /a2a/{agent}/tasks/{id}/trace?depth=5      (and /tasks/{id}/trace for the default agent)
    parley trace http://127.0.0.1:8000/a2a/front-desk TASK_ID

Each node says what the task is and how it went:

    {"taskId", "contextId", "agent", "url", "state", "message", "created", "updated",
     "durationSeconds", "principal", "parent", "source", "children": [...], "truncated"}

The data comes from the store: a task's `parent_task_id` (the `referenceTaskIds[0]` of
the message that created it) and its links (the `internal:delegation` events its
agent emitted). Children in this server's store are read directly (`source: "local"`);
other children are asked for their own trace when they are Parley servers
(`"remote"`), else read with GetTask (`"get"`: state and timestamp only); a child that
cannot be reached is shown with its error (`"unreachable"`). The tree stops at `depth`
levels below the task (`truncated: true` marks a node whose children were cut).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from parley.client import A2AClient
from parley.protocol import models as m
from parley.tasks.store import TaskLink, TaskRecord, TaskStore

DEFAULT_DEPTH = 5
MAX_DEPTH = 10
FETCH_TIMEOUT = 5.0


def parse_depth(value: str | None) -> int:
    """The `depth` query parameter: 0..MAX_DEPTH, default DEFAULT_DEPTH; ValueError otherwise."""
    if value is None or value == "":
        return DEFAULT_DEPTH
    try:
        depth = int(value)
    except ValueError:
        raise ValueError(f"depth must be an integer, got {value!r}") from None
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be between 0 and {MAX_DEPTH}, got {depth}")
    return depth


def state_name(state: m.TaskState) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required`."""
    return state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _iso(ts: float | None) -> str | None:
    if not ts:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _status_text(task: m.Task) -> str | None:
    msg = task.status.message
    return msg.text() or None if msg is not None else None


async def task_trace(store: TaskStore, agent_id: str, principal: str, task_id: str, url: str | None = None,
                     depth: int = DEFAULT_DEPTH, *, headers: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The trace of a task of `agent_id` owned by `principal`; None if there is no such task."""
    rec = await store.get(task_id)
    if rec is None or rec.agent_id != agent_id or rec.owner != principal:
        return None
    return await build_trace(store, rec, url=url, depth=depth, headers=headers, viewer=principal)


async def build_trace(store: TaskStore, rec: TaskRecord, *, url: str | None = None, depth: int = DEFAULT_DEPTH,
                      headers: dict[str, str] | None = None, viewer: str | None = None) -> dict[str, Any]:
    """The tree below a stored task, `depth` levels deep.

    `viewer`: the principal asking (None: an admin, who sees every task). Every node is checked: a
    child task in this store that belongs to another principal shows only its id and agent
    (`source: "hidden"`), never its state, messages or children.
    """
    async with httpx.AsyncClient(timeout=FETCH_TIMEOUT, headers=headers) as http:
        return await _local(store, rec, url, depth, http, {rec.task.id}, viewer)


async def _local(store: TaskStore, rec: TaskRecord, url: str | None, depth: int, http: httpx.AsyncClient,
                 seen: set[str], viewer: str | None) -> dict[str, Any]:
    t = rec.task
    node: dict[str, Any] = {
        "taskId": t.id,
        "contextId": t.context_id,
        "agent": rec.agent_id,
        "url": url,
        "state": state_name(t.status.state),
        "message": _status_text(t),
        "created": _iso(rec.created_at),
        "updated": _iso(rec.updated_at),
        "durationSeconds": round(max(0.0, rec.updated_at - rec.created_at), 3) if rec.created_at else None,
        "principal": rec.owner,
        "parent": rec.parent_task_id,
        "source": "local",
        "children": [],
    }
    links = await store.links(t.id)
    if depth <= 0:
        node["truncated"] = bool(links)
        return node
    fresh = [link for link in links if link.child_task_id not in seen]
    seen.update(link.child_task_id for link in fresh)
    node["children"] = list(await asyncio.gather(*(_child(store, link, depth - 1, http, seen, viewer)
                                                   for link in fresh)))
    return node


async def _child(store: TaskStore, link: TaskLink, depth: int, http: httpx.AsyncClient,
                 seen: set[str], viewer: str | None) -> dict[str, Any]:
    rec = await store.get(link.child_task_id)
    if rec is not None:
        if viewer is not None and rec.owner != viewer:
            return {"taskId": link.child_task_id, "agent": link.agent, "url": link.child_url, "source": "hidden",
                    "children": []}
        return await _local(store, rec, link.child_url, depth, http, seen, viewer)
    return await _remote(link, depth, http)


async def _remote(link: TaskLink, depth: int, http: httpx.AsyncClient) -> dict[str, Any]:
    """A child on another server: its own trace (Parley), else GetTask, else the error."""
    base = link.child_url.rstrip("/")
    try:
        resp = await http.get(f"{base}/tasks/{quote(link.child_task_id, safe='')}/trace", params={"depth": depth})
        if resp.status_code == 200:
            data = resp.json()
            if isinstance(data, dict) and data.get("taskId") == link.child_task_id:
                data["url"] = data.get("url") or link.child_url
                data["source"] = "remote"
                return data
    except (httpx.HTTPError, ValueError):
        pass
    node: dict[str, Any] = {"taskId": link.child_task_id, "agent": link.agent, "url": link.child_url,
                            "children": []}
    try:
        client = await A2AClient.connect(link.child_url, bindings=["JSONRPC", "HTTP+JSON"], timeout=FETCH_TIMEOUT)
        async with client:
            task = await client.get(link.child_task_id, history_length=0)
    except Exception as exc:  # noqa: BLE001 - an unreachable child is a node of the trace, not an error
        node.update(state="unknown", source="unreachable", error=str(exc) or type(exc).__name__)
        return node
    node.update(contextId=task.context_id, state=state_name(task.status.state), message=_status_text(task),
                updated=task.status.timestamp, source="get")
    return node


__all__ = ["DEFAULT_DEPTH", "MAX_DEPTH", "build_trace", "parse_depth", "state_name", "task_trace"]
