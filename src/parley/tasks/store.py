"""The task store interface: tasks, their event logs, idempotency keys and push configs.

Implementations: :mod:`parley.tasks.memory_store` (tests, ephemeral servers) and
:mod:`parley.tasks.sqlite_store` (the default of `parley serve`).
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from parley.protocol import models as m
from parley.protocol.errors import InvalidParamsError
from parley.tasks.log import Entry

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


@dataclass(slots=True)
class TaskRecord:
    """A stored task: its snapshot plus who owns it and where its log ends."""

    task: m.Task
    agent_id: str
    owner: str
    seq: int
    updated_at: float
    created_at: float = 0.0
    parent_task_id: str | None = None


@dataclass(slots=True)
class TaskLink:
    """A task this task delegated to (over A2A): where it lives and its id there."""

    parent_task_id: str
    child_url: str
    child_task_id: str
    agent: str | None = None
    created_at: float = 0.0


@dataclass(slots=True)
class TaskQuery:
    """A ListTasks query, already checked (see :func:`make_query`)."""

    agent_id: str
    owner: str
    context_id: str | None = None
    state: m.TaskState | None = None
    status_after: str | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    cursor: tuple[float, str] | None = None


@dataclass(slots=True)
class TaskPage:
    """One page of tasks, newest update first."""

    records: list[TaskRecord] = field(default_factory=list)
    next_cursor: tuple[float, str] | None = None
    total: int = 0


def encode_cursor(cursor: tuple[float, str] | None) -> str:
    """An opaque page token for (updated_at, task id); "" for the last page."""
    if cursor is None:
        return ""
    raw = f"{cursor[0]!r}|{cursor[1]}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> tuple[float, str]:
    """Parse a page token; InvalidParamsError if it was not made by us."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        ts, task_id = raw.split("|", 1)
        return float(ts), task_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidParamsError(f"Invalid params: `pageToken` {token!r} is not a valid page token") from None


def make_query(agent_id: str, owner: str, req: m.ListTasksRequest) -> TaskQuery:
    """Check ListTasks params and build the store query."""
    size = DEFAULT_PAGE_SIZE if req.page_size is None else req.page_size
    if size < 1 or size > MAX_PAGE_SIZE:
        raise InvalidParamsError(f"Invalid params: `pageSize` must be between 1 and {MAX_PAGE_SIZE}, got {size}")
    if req.history_length is not None and req.history_length < 0:
        raise InvalidParamsError("Invalid params: `historyLength` must not be negative")
    cursor = decode_cursor(req.page_token) if req.page_token else None
    after = _normalise_timestamp(req.status_timestamp_after) if req.status_timestamp_after else None
    return TaskQuery(
        agent_id=agent_id,
        owner=owner,
        context_id=req.context_id or None,
        state=req.status,
        status_after=after,
        page_size=size,
        cursor=cursor,
    )


def _normalise_timestamp(value: str) -> str:
    """An ISO 8601 timestamp in the store's format (UTC, milliseconds, Z)."""
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidParamsError(
            f"Invalid params: `statusTimestampAfter` {value!r} is not an ISO 8601 timestamp"
        ) from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskStore(ABC):
    """Where tasks, logs, idempotency keys and push configs live."""

    @abstractmethod
    async def create(self, record: TaskRecord, first: Entry, message_id: str) -> None:
        """Store a new task with its first log entry and its idempotency key."""

    @abstractmethod
    async def append(self, task_id: str, entries: list[Entry], snapshot: m.Task, updated_at: float) -> None:
        """Append entries to a task's log and replace its snapshot, atomically."""

    @abstractmethod
    async def get(self, task_id: str) -> TaskRecord | None:
        """The stored task, or None."""

    @abstractmethod
    async def events_after(self, task_id: str, seq: int) -> list[Entry]:
        """Log entries with a sequence number greater than `seq`, in order."""

    @abstractmethod
    async def list(self, query: TaskQuery) -> TaskPage:
        """Tasks matching the query, most recently updated first."""

    @abstractmethod
    async def remember_message(self, agent_id: str, owner: str, message_id: str, task_id: str) -> None:
        """Record that this message (by this owner) went to this task."""

    @abstractmethod
    async def find_message(self, agent_id: str, owner: str, message_id: str) -> str | None:
        """The task a message id was already sent to, if any."""

    @abstractmethod
    async def unfinished(self) -> list[TaskRecord]:
        """Tasks left submitted or working (used at start-up to recover them)."""

    @abstractmethod
    async def put_push_config(self, config: m.TaskPushNotificationConfig) -> None:
        """Create or replace a push config (keyed by task id and config id)."""

    @abstractmethod
    async def get_push_config(self, task_id: str, config_id: str) -> m.TaskPushNotificationConfig | None:
        """One push config, or None."""

    @abstractmethod
    async def list_push_configs(self, task_id: str) -> list[m.TaskPushNotificationConfig]:
        """All push configs of a task."""

    @abstractmethod
    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        """Delete a push config; False if there was none."""

    @abstractmethod
    async def put_checkpoint(self, task_id: str, state: dict[str, Any]) -> None:
        """Keep an agent's latest checkpoint for a task (replaces the previous one)."""

    @abstractmethod
    async def get_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        """The latest checkpoint of a task, or None."""

    @abstractmethod
    async def delete_checkpoint(self, task_id: str) -> None:
        """Forget a task's checkpoint (once the task is finished)."""

    @abstractmethod
    async def add_link(self, parent_task_id: str, child_url: str, child_task_id: str, agent: str | None) -> None:
        """Record that a task delegated to `child_task_id` at `child_url` (idempotent)."""

    @abstractmethod
    async def links(self, task_id: str) -> list[TaskLink]:
        """The tasks `task_id` delegated to, oldest first."""

    async def close(self) -> None:
        """Release resources."""


def matches(record: TaskRecord, query: TaskQuery) -> bool:
    """Whether a record passes the query's filters (not its cursor)."""
    t = record.task
    if record.agent_id != query.agent_id or record.owner != query.owner:
        return False
    if query.context_id is not None and t.context_id != query.context_id:
        return False
    if query.state is not None and t.status.state != query.state:
        return False
    if query.status_after is not None and (t.status.timestamp or "") < query.status_after:
        return False
    return True


def page_of(records: list[TaskRecord], query: TaskQuery) -> TaskPage:
    """Sort, filter and cut a page from an in-memory list of records."""
    rows = [r for r in records if matches(r, query)]
    rows.sort(key=lambda r: (r.updated_at, r.task.id), reverse=True)
    total = len(rows)
    if query.cursor is not None:
        rows = [r for r in rows if (r.updated_at, r.task.id) < query.cursor]
    page = rows[: query.page_size]
    more = len(rows) > query.page_size
    nxt = (page[-1].updated_at, page[-1].task.id) if more and page else None
    return TaskPage(records=page, next_cursor=nxt, total=total)
