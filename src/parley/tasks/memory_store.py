"""An in-memory task store: fast, and gone when the process exits."""

from __future__ import annotations

import time
from typing import Any

from parley.protocol import models as m
from parley.tasks.log import Entry
from parley.tasks.store import TaskLink, TaskPage, TaskQuery, TaskRecord, TaskStore, page_of


class MemoryTaskStore(TaskStore):
    """Keeps everything in dictionaries; for tests and throwaway servers."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._logs: dict[str, list[Entry]] = {}
        self._messages: dict[tuple[str, str, str], str] = {}
        self._push: dict[str, dict[str, m.TaskPushNotificationConfig]] = {}
        self._checkpoints: dict[str, dict[str, Any]] = {}
        self._links: dict[str, list[TaskLink]] = {}

    async def create(self, record: TaskRecord, first: Entry, message_id: str) -> None:
        self._tasks[record.task.id] = record
        self._logs[record.task.id] = [first]
        self._messages[(record.agent_id, record.owner, message_id)] = record.task.id

    async def append(self, task_id: str, entries: list[Entry], snapshot: m.Task, updated_at: float) -> None:
        rec = self._tasks[task_id]
        self._logs[task_id].extend(entries)
        rec.task = snapshot
        rec.seq = entries[-1].seq
        rec.updated_at = updated_at

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    async def events_after(self, task_id: str, seq: int) -> list[Entry]:
        return [e for e in self._logs.get(task_id, []) if e.seq > seq]

    async def list(self, query: TaskQuery) -> TaskPage:
        return page_of(list(self._tasks.values()), query)

    async def remember_message(self, agent_id: str, owner: str, message_id: str, task_id: str) -> None:
        self._messages[(agent_id, owner, message_id)] = task_id

    async def find_message(self, agent_id: str, owner: str, message_id: str) -> str | None:
        return self._messages.get((agent_id, owner, message_id))

    async def unfinished(self) -> list[TaskRecord]:
        active = (m.TaskState.SUBMITTED, m.TaskState.WORKING)
        return [r for r in self._tasks.values() if r.task.status.state in active]

    async def put_push_config(self, config: m.TaskPushNotificationConfig) -> None:
        self._push.setdefault(config.task_id, {})[config.id] = config

    async def get_push_config(self, task_id: str, config_id: str) -> m.TaskPushNotificationConfig | None:
        return self._push.get(task_id, {}).get(config_id)

    async def list_push_configs(self, task_id: str) -> list[m.TaskPushNotificationConfig]:
        return list(self._push.get(task_id, {}).values())

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        return self._push.get(task_id, {}).pop(config_id, None) is not None

    async def put_checkpoint(self, task_id: str, state: dict[str, Any]) -> None:
        self._checkpoints[task_id] = state

    async def get_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        return self._checkpoints.get(task_id)

    async def delete_checkpoint(self, task_id: str) -> None:
        self._checkpoints.pop(task_id, None)

    async def add_link(self, parent_task_id: str, child_url: str, child_task_id: str, agent: str | None) -> None:
        links = self._links.setdefault(parent_task_id, [])
        if not any(k.child_url == child_url and k.child_task_id == child_task_id for k in links):
            links.append(TaskLink(parent_task_id, child_url, child_task_id, agent, time.time()))

    async def links(self, task_id: str) -> list[TaskLink]:
        return list(self._links.get(task_id, []))
