"""The task store contract: tasks, their event logs, and what changes with them, transactionally.

Every write is one :class:`Commit`: log entries appended after an expected sequence
number (compare-and-set: a conflict raises :class:`SequenceConflict`, never a
silent overwrite), the new snapshot, and the commit's side effects in the same
transaction: the idempotency key of the message that caused it (insert-if-absent:
:class:`DuplicateMessage`), the agent's checkpoint, delegation links and the run
lease. Each commit also adds one row to a global, ordered change feed
(:meth:`TaskStore.changes_after`) that push delivery and the dashboard read.

Implementations: :mod:`parley.tasks.memory_store` (tests, `--memory`) and
:mod:`parley.tasks.sqlite_store` (the default of `parley serve`). The contract
tests in `tests/unit/test_store_contract.py` run against every store.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from parley.protocol import models as m
from parley.protocol.errors import InvalidParamsError
from parley.protocol.states import TERMINAL
from parley.tasks.log import Entry

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
_fingerprint_encoder = msgspec.json.Encoder()


class StoreError(Exception):
    """The store cannot be opened or used (a locked or unreadable database); one readable line."""


# OperatorInterventionError: SQLSTATE class 57, e.g. 57P01 "terminating connection due to administrator command"
# (pg_terminate_backend, a failover, a proxy restart) and 57P03 "the database system is starting up".
# InternalClientError: asyncpg's "cannot switch to state ...; another operation is in progress", met on a
# pooled connection whose previous operation was cut by such a termination.
_UNAVAILABLE = {"PostgresConnectionError", "InterfaceError", "CannotConnectNowError", "OperatorInterventionError",
                "InternalClientError", "ConnectionError", "TimeoutError", "BusyLoadingError"}


def unavailable(exc: BaseException) -> bool:
    """Whether `exc` says a backend (database, bus, counters) cannot be reached now, rather than a bug: a
    StoreError, an OS-level connection error, or asyncpg's / redis-py's connection errors (by class name:
    neither driver is imported for this)."""
    if isinstance(exc, (StoreError, ConnectionError, TimeoutError)):
        return True
    return any(cls.__name__ in _UNAVAILABLE and cls.__module__.split(".")[0] in ("asyncpg", "redis")
               for cls in type(exc).__mro__)


class SequenceConflict(Exception):
    """A commit expected the log to end at `expected`, but it ends at `actual` (someone else appended)."""

    def __init__(self, task_id: str, expected: int, actual: int | None) -> None:
        self.task_id, self.expected, self.actual = task_id, expected, actual
        where = "does not exist" if actual is None else f"ends at {actual}"
        super().__init__(f"task {task_id}: expected its log to end at {expected}, but it {where}")


class DuplicateMessage(Exception):
    """The commit's idempotency key is taken: the same message already went to task `task_id`."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"this message was already handled by task {task_id}")


class MessageKey(msgspec.Struct, frozen=True, gc=False):
    """The idempotency key of a message: who sent which message (and what it said) to which agent.

    The fingerprint makes the key content-aware: resending the same message is a retry,
    while a different message that reuses a messageId is not (see :func:`fingerprint`).
    (A struct the cyclic collector does not track: only strings; hashed in C.)
    """

    agent_id: str
    owner: str
    message_id: str
    fingerprint: str


def fingerprint(message: m.Message) -> str:
    """A digest of a message as the client sent it (parts, ids it names, metadata)."""
    return hashlib.blake2b(_fingerprint_encoder.encode(message), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Lease:
    """Who runs a task's agent right now, until when (renewed by a heartbeat)."""

    holder: str
    expires_at: float


class TaskRecord(msgspec.Struct, gc=False):
    """A stored task: its snapshot plus who owns it and where its log ends.

    Not tracked by the cyclic collector (it holds an untracked snapshot, strings and numbers): the memory
    store keeps thousands, and every full collection would walk them."""

    task: m.Task
    agent_id: str
    owner: str
    seq: int
    updated_at: float
    created_at: float = 0.0
    parent_task_id: str | None = None
    # When the first event after the Task itself (seq 2) was committed: set once, by the commit that writes it
    # (first_event_at); time to first event = first_event_at - created_at. None until then (and for tasks
    # stored before the column existed).
    first_event_at: float | None = None


@dataclass(slots=True)
class TaskLink:
    """A task this task delegated to (over A2A): where it lives and its id there."""

    parent_task_id: str
    child_url: str
    child_task_id: str
    agent: str | None = None
    created_at: float = 0.0


@dataclass(slots=True)
class StoredPushConfig:
    """A push-notification config as stored: the config (its secrets as the store keeps them, possibly
    encrypted), the protocol version its client spoke (the notifications' format) and delivery options."""

    config: m.TaskPushNotificationConfig
    version: str = "1.0"
    artifacts: bool = False  # also notify artifact updates
    created_at: float = 0.0
    disabled_at: float | None = None  # the webhook answered 410 Gone: nothing more is sent
    # (task id, config id) -> the config with its secrets, as sent, sealed for that row (task, config, owner):
    # called when the config is bound to its task (parley.tasks.engine.bind_push), which a config sent with a
    # message is only then. Not stored.
    seal: Callable[[str, str], m.TaskPushNotificationConfig] | None = field(default=None, repr=False, compare=False)


@dataclass(slots=True)
class Notification:
    """One row of the push outbox: a log entry of a task to deliver to one of its webhooks.

    Written in the same transaction as the entry (a status update, or an artifact update when the
    config asks for them), so a committed change is never without its notifications.
    `state`: pending, delivered, dead (attempts or age exhausted, or refused), disabled (410 Gone),
    dropped (the config was deleted first).
    """

    id: int
    task_id: str
    config_id: str
    seq: int
    kind: str
    created_at: float
    attempts: int = 0
    next_at: float = 0.0
    state: str = "pending"
    last_status: int | None = None
    last_error: str | None = None
    done_at: float | None = None


@dataclass(slots=True)
class DeliveryAttempt:
    """One POST of a notification to a webhook, for the delivery log."""

    notification_id: int
    attempt: int
    at: float
    status: int | None  # the HTTP status, None when no answer came (connection error, timeout, refused URL)
    error: str | None
    duration: float
    outcome: str  # delivered | retry | dead | disabled
    next_at: float | None = None  # when the next attempt is due (outcome retry)


class Commit(msgspec.Struct):
    """One atomic write: entries after `expected_seq`, the snapshot they fold into, and their side effects.

    `record` is set when the commit creates the task (then `expected_seq` is 0 and the
    first entry is the task itself). `checkpoint` replaces the task's checkpoint;
    `drop_checkpoint` deletes it. `lease` takes or renews the run lease; `release_lease`
    clears it (the task settled, nobody runs it). Stores must serialise `snapshot`
    before their first await: the engine goes on folding into a new copy meanwhile.
    `snapshot` is the stored task with `entries` folded in; when `stores_snapshot` says so
    (artifact updates only), a store may keep the snapshot it has and fold on read instead.
    `snapshot_at`: where the stored snapshot stands, when the committer knows it (the run that wrote it):
    then it may lag in proportion to its size (:func:`snapshot_interval`).

    A msgspec struct rather than a dataclass: made once per streamed token, and a struct is made in C (a
    dataclass's `__init__` is a Python call).
    """

    task_id: str
    expected_seq: int
    entries: list[Entry]
    snapshot: m.Task
    updated_at: float
    record: TaskRecord | None = None
    message: MessageKey | None = None
    checkpoint: dict[str, Any] | None = None
    drop_checkpoint: bool = False
    links: list[TaskLink] = msgspec.field(default_factory=list)
    lease: Lease | None = None
    release_lease: bool = False
    push_configs: list[StoredPushConfig] = msgspec.field(default_factory=list)  # registered before the entries: they notify
    snapshot_at: int | None = None

    @property
    def last_seq(self) -> int:
        """The sequence number the log ends at after this commit."""
        return self.entries[-1].seq if self.entries else self.expected_seq


class Change(msgspec.Struct, frozen=True, gc=False):
    """One row of the change feed: a commit to a task, in global order (untracked by the collector)."""

    position: int
    task_id: str
    agent_id: str
    owner: str
    seq: int
    state: m.TaskState
    at: float


@dataclass(slots=True)
class TaskQuery:
    """A ListTasks query, already checked (see :func:`make_query`); agent_id / owner None: any (the dashboard's
    view across agents and principals)."""

    agent_id: str | None
    owner: str | None
    context_id: str | None = None
    state: m.TaskState | None = None
    status_after: str | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    cursor: tuple[float, str] | None = None
    count: bool = True  # False: `total` is not computed (-1), a COUNT over every matching task saved
    # "updated": newest update first (ListTasks); "created": newest task first, by id (ids are UUIDv7, time
    # ordered: the primary key serves it, no index of its own on the write path; the dashboard's table)
    order: str = "updated"
    # Stored bytes the page's snapshots may add up to (None: no bound): the page ends before the task that would
    # go over (its next_cursor continues there), so that a page never loads more than this plus one task.
    # `at_least_one`: the first task is taken whatever its size (ListTasks: a page always makes progress); else a
    # first task over the bound ends the page empty (a new task's context: nothing rather than too much).
    max_bytes: int | None = None
    at_least_one: bool = True


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


def make_query(agent_id: str, owner: str, req: m.ListTasksRequest, *, max_bytes: int | None = None) -> TaskQuery:
    """Check ListTasks params and build the store query; `max_bytes` bounds the stored bytes of the page
    (limits.max_page_bytes: a page ends early, with a next page token, rather than load more)."""
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
        max_bytes=max_bytes,
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
    """Where tasks, logs, idempotency keys, checkpoints, links, leases and push configs live.

    `exclusive` says that no other process writes this store (an in-memory store, or a
    SQLite file this process holds the lock of): every lease not held by this process
    then belongs to a dead one.
    """

    exclusive: bool = False
    # commit() may run outside an asyncio task up to its first suspension (no asyncio.timeout, no driver that
    # enters one): the engine then runs a group commit's first step at once instead of making a task for it.
    eager_commits: bool = False

    @abstractmethod
    async def commit(self, commit: Commit) -> None:
        """Apply `commit` atomically, with its row of the change feed.

        Raises SequenceConflict (the log does not end at `expected_seq`, or the task
        exists already / does not exist) or DuplicateMessage (the message key is
        taken); either way nothing is written.
        """

    @abstractmethod
    async def get(self, task_id: str, *, agent_id: str | None = None, owner: str | None = None) -> TaskRecord | None:
        """The stored task, or None; with `agent_id`/`owner`, None unless it belongs to them."""

    @abstractmethod
    async def events_after(self, task_id: str, seq: int, limit: int | None = None) -> list[Entry]:
        """Log entries with a sequence number greater than `seq`, in order; at most `limit` of them."""

    @abstractmethod
    async def list(self, query: TaskQuery) -> TaskPage:
        """Tasks matching the query (scoped to its agent and owner), most recently updated first."""

    @abstractmethod
    async def find_message(self, key: MessageKey) -> str | None:
        """The task this exact message was already handled by, if any."""

    @abstractmethod
    async def get_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        """The latest checkpoint of a task, or None."""

    @abstractmethod
    async def links(self, task_id: str) -> list[TaskLink]:
        """The tasks `task_id` delegated to, oldest first."""

    @abstractmethod
    async def lease(self, task_id: str) -> Lease | None:
        """The task's run lease, if someone holds one (expired or not)."""

    @abstractmethod
    async def renew_leases(self, holder: str, task_ids: list[str], expires_at: float) -> set[str]:
        """Extend `holder`'s leases on these tasks; return the ids it still holds (the others were taken)."""

    @abstractmethod
    async def release_leases(self, holder: str, task_ids: list[str]) -> None:
        """Give up `holder`'s leases on these tasks (a graceful stop: others may take over at once)."""

    @abstractmethod
    async def claim_orphans(self, holder: str, now: float, expires_at: float, *,
                            any_other_holder: bool = False) -> list[TaskRecord]:
        """Lease to `holder` every unfinished (submitted or working) task whose lease is missing or expired
        at `now` (with `any_other_holder`, also those leased by any other holder), and return them."""

    @abstractmethod
    async def changes_after(self, position: int, limit: int = 1000) -> list[Change]:
        """The change feed after `position`, oldest first, at most `limit` rows."""

    @abstractmethod
    async def put_push_config(self, config: m.TaskPushNotificationConfig | StoredPushConfig) -> None:
        """Create or replace a push config (keyed by task id and config id)."""

    @abstractmethod
    async def push_target(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        """A push config with its version and options (the dispatcher's view), or None."""

    @abstractmethod
    async def disable_push_config(self, task_id: str, config_id: str, at: float) -> None:
        """Stop notifying a config (its webhook answered 410 Gone): its pending notifications become
        `disabled`, and later entries enqueue nothing for it."""

    @abstractmethod
    async def due_notifications(self, now: float, limit: int, busy: set[tuple[str, str]],
                                skip_owners: Collection[str] = ()) -> list[Notification]:
        """Pending notifications due at `now`, at most `limit`: for each (task, config) only the oldest
        pending one (per-webhook order), none of the (task, config) lanes in `busy`, and none of the tasks
        whose owner is in `skip_owners` (the push dispatcher's fair share per owner)."""

    @abstractmethod
    async def next_notification_at(self, busy: set[tuple[str, str]],
                                   skip_owners: Collection[str] = ()) -> float | None:
        """When the next notification that could be sent is due: the earliest `next_at` of the oldest
        pending notification of each (task, config) lane not in `busy`, of a task whose owner is not in
        `skip_owners`; None when there is none."""

    @abstractmethod
    async def record_attempt(self, attempt: DeliveryAttempt, notification: Notification) -> None:
        """Store one attempt in the delivery log and the notification's new state (`notification`, as
        updated by the dispatcher), in one transaction."""

    @abstractmethod
    async def push_log(self, task_id: str) -> tuple[list[Notification], list[DeliveryAttempt]]:
        """A task's notifications (oldest first) and their attempts: its delivery log."""

    @abstractmethod
    async def recent_attempts(self, agent_id: str, since: float, limit: int) -> list[DeliveryAttempt]:
        """The delivery attempts of `agent_id`'s tasks' notifications made at or after `since`, newest first,
        at most `limit` (the dashboard's push chart: every replica's attempts on a shared store)."""

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
    async def prune(self, retention: Retention, *, now: float, limit: int = 200) -> int:
        """Remove up to `limit` finished tasks that `retention` lets go, each with everything kept for it (log,
        idempotency keys, checkpoint, links, push configs, notifications and their attempts), in one transaction;
        and change-feed rows older than `retention.changes_cutoff(now)`. Returns how many tasks were removed (call again
        while it returns `limit`)."""

    def may_notify(self, task_id: str) -> bool:
        """Whether a commit to `task_id` can queue push notifications (the task has a config), as far as this
        process can tell: the push dispatcher is only woken for those. True when unsure (a store other
        processes write: their configs are found by the dispatcher's polling)."""
        return True

    async def ping(self) -> None:
        """Raise if the store cannot be used now (for /readyz): one read."""
        await self.get("")

    async def open(self) -> None:
        """Connect (a server store opens its pool and brings the schema up to date here); the runtime calls it
        before anything else. Stores that are ready when constructed need not override it."""

    async def close(self) -> None:
        """Release resources."""

    # --- conveniences over commit() --------------------------------------------------------------

    async def create(self, record: TaskRecord, first: Entry, message: MessageKey | None = None,
                     lease: Lease | None = None, push_configs: list[StoredPushConfig] | None = None) -> None:
        """Store a new task with its first log entry (the task itself), its idempotency key and webhooks."""
        await self.commit(Commit(task_id=record.task.id, expected_seq=0, entries=[first],
                                        snapshot=record.task, updated_at=record.updated_at, record=record,
                                        message=message, lease=lease, push_configs=push_configs or []))

    async def append(self, task_id: str, expected_seq: int, entries: list[Entry], snapshot: m.Task,
                     updated_at: float) -> None:
        """Append entries after `expected_seq` and replace the snapshot (compare-and-set; see Commit)."""
        await self.commit(Commit(task_id=task_id, expected_seq=expected_seq, entries=entries,
                                        snapshot=snapshot, updated_at=updated_at))


@dataclass(frozen=True)
class Retention:
    """Which finished (terminal) tasks a prune removes: those that finished before `finished_before` (epoch
    seconds), and those past the newest `keep_finished`. None turns that limit off. Tasks that are running or
    waiting for input are never removed."""

    finished_before: float | None = None
    keep_finished: int | None = None
    changes_before: float | None = None  # change-feed rows older than this go (None: older than CHANGES_KEPT_SECONDS)

    def changes_cutoff(self, now: float) -> float:
        """The time before which a prune at `now` drops change-feed rows (the newest row always stays)."""
        return self.changes_before if self.changes_before is not None else now - CHANGES_KEPT_SECONDS


TERMINAL_SQL = "(" + ", ".join(f"'{s.value}'" for s in sorted(TERMINAL, key=lambda s: s.value)) + ")"
CHANGES_KEPT_SECONDS = 3600.0  # the change feed serves live followers: a prune drops older rows (never the newest)
# The change-feed rows before the first one written after `?` (the newest row always stays: positions keep
# growing). Positions follow time, so this reads only the rows it deletes, by the primary key.
TRIM_CHANGES = ("DELETE FROM changes WHERE pos < coalesce((SELECT pos FROM changes WHERE at >= ? ORDER BY pos LIMIT 1), "
                "(SELECT max(pos) FROM changes))")


# A stored snapshot may lag its task's log by artifact updates: a commit of only artifact updates (an agent
# streaming text: a commit per loop turn) leaves it as it was. Rewriting the whole snapshot on every commit made
# a streamed answer's writes grow with the square of its length (bench/RESULTS.md: SQLite wrote 592 MB for an
# answer of 80,000 characters); rewriting it every SNAPSHOT_EVERY entries still did, 64 times more slowly. So
# the lag allowed grows with the snapshot: SNAPSHOT_EVERY entries for each SNAPSHOT_BYTES of content. Each
# rewrite then finds the snapshot a fixed fraction larger than the last one, and the bytes of all rewrites stay
# proportional to the answer's length. A reader folds the entries after the stored snapshot into it (log.fold
# joins a run of text chunks once, so that costs about what returning the text does).
SNAPSHOT_EVERY = 64
SNAPSHOT_BYTES = 16 * 1024


def content_size(task: m.Task) -> int:
    """About how many bytes a task's snapshot holds: the text and raw bytes of its artifacts and history."""
    size = 0
    for holder in (*(task.artifacts or ()), *(task.history or ())):
        for part in holder.parts:
            size += len(part.text) if part.text is not None else len(part.raw) if part.raw is not None else 64
    return size


def snapshot_interval(task: m.Task) -> int:
    """How many entries the stored snapshot of `task` may lag behind its log."""
    return SNAPSHOT_EVERY * max(1, content_size(task) // SNAPSHOT_BYTES)


@functools.lru_cache(maxsize=1024)  # asked twice per streamed token: a CRC of the id costs ~1,200 instructions
def snapshot_phase(task_id: str) -> int:
    """Where in each stretch of SNAPSHOT_EVERY entries a task's stored snapshot is rewritten (0 to
    SNAPSHOT_EVERY - 1, fixed per task). Tasks that start together stream in step: with one phase for all, every
    one of them rewrote its snapshot (and the SQLite store moved its tail into the log) at the same entry, 1,000
    streams' rewrites in 200 ms, which held their tokens back up to half a second (bench/RESULTS.md, 2026-11-28
    evening). Spread by the task's id, the rewrites spread over the whole stretch."""
    return zlib.crc32(task_id.encode()) % SNAPSHOT_EVERY


def stores_snapshot(commit: Commit) -> bool:
    """Whether `commit` must store its snapshot: it creates the task, appends something other than an
    artifact update (a status, a message: the task's state and history are always stored as they are), or
    its entries reach the task's next rewrite point: once every SNAPSHOT_EVERY entries, at the task's own
    :func:`snapshot_phase`, while the snapshot is small; once it has grown (:func:`snapshot_interval`), when the
    stored one lags by that many entries (when the commit says where it stands: `snapshot_at`). Otherwise the
    stored snapshot may stay behind the log."""
    if commit.record is not None:
        return True
    entries = commit.entries
    if not entries:
        return False
    if len(entries) == 1:  # a streamed token's commit: no generator for one entry
        if type(entries[0].event) is not m.TaskArtifactUpdateEvent:
            return True
    elif any(type(e.event) is not m.TaskArtifactUpdateEvent for e in entries):
        return True
    last = entries[-1].seq
    phase = snapshot_phase(commit.task_id)
    crossed = (commit.expected_seq + phase) // SNAPSHOT_EVERY != (last + phase) // SNAPSHOT_EVERY
    if commit.snapshot_at is None:
        return crossed
    lag = last - commit.snapshot_at
    if not crossed and lag < SNAPSHOT_EVERY:  # the usual streamed token: no need to measure the snapshot
        return False
    interval = snapshot_interval(commit.snapshot)  # a small snapshot at its rewrite point; a grown one by its lag
    return interval == SNAPSHOT_EVERY or lag >= interval


def first_event_at(commit: Commit) -> float | None:
    """When this commit writes its task's first event after the Task (seq 2), its time (stored once as the
    task's `first_event_at`); None for every other commit (no work for the log's later commits)."""
    return commit.updated_at if commit.expected_seq <= 1 < commit.last_seq else None


def check_commit(commit: Commit) -> None:
    """Refuse malformed commits (a caller's bug, not a conflict): entries must continue the log without gaps."""
    seq = commit.expected_seq
    for entry in commit.entries:
        seq += 1
        if entry.seq != seq:
            raise ValueError(f"task {commit.task_id}: entry seq {entry.seq} does not follow {seq - 1}")
    if commit.record is not None and (commit.expected_seq != 0 or not commit.entries):
        raise ValueError(f"task {commit.task_id}: a creating commit starts the log at seq 1")


def visible(record: TaskRecord | None, agent_id: str | None, owner: str | None) -> TaskRecord | None:
    """`record` if it belongs to `agent_id` and `owner` (when given), else None."""
    if record is None:
        return None
    if agent_id is not None and record.agent_id != agent_id:
        return None
    if owner is not None and record.owner != owner:
        return None
    return record


def matches(record: TaskRecord, query: TaskQuery) -> bool:
    """Whether a record passes the query's filters (not its cursor)."""
    t = record.task
    if query.agent_id is not None and record.agent_id != query.agent_id:
        return False
    if query.owner is not None and record.owner != query.owner:
        return False
    if query.context_id is not None and t.context_id != query.context_id:
        return False
    if query.state is not None and t.status.state != query.state:
        return False
    return not (query.status_after is not None and (t.status.timestamp or "") < query.status_after)


def _position_of(query: TaskQuery) -> Callable[[TaskRecord], tuple[float, str]]:
    """A record's place in the query's order, as its page cursor holds it."""
    if query.order == "created":
        return lambda r: (0.0, r.task.id)
    return lambda r: (r.updated_at, r.task.id)


def within_bytes(sizes: list[int], query: TaskQuery) -> int:
    """How many of the candidate rows (their stored sizes, in page order) a page takes under `query.max_bytes`."""
    if query.max_bytes is None:
        return min(len(sizes), query.page_size)
    taken = used = 0
    for size in sizes[: query.page_size]:
        if used + size > query.max_bytes and (taken or not query.at_least_one):
            break
        used += size
        taken += 1
    return taken


def page_of(records: list[TaskRecord], query: TaskQuery) -> TaskPage:
    """Sort, filter and cut a page from an in-memory list of records."""
    rows = [r for r in records if matches(r, query)]
    position = _position_of(query)
    rows.sort(key=position, reverse=True)
    total = len(rows) if query.count else -1
    if query.cursor is not None:
        rows = [r for r in rows if position(r) < query.cursor]
    if query.max_bytes is not None:  # the records are in memory already: the bound keeps the answer's size
        candidates = rows[: query.page_size + 1]
        page = candidates[: within_bytes([len(msgspec.json.encode(r.task)) for r in candidates], query)]
    else:
        page = rows[: query.page_size]
    more = len(rows) > len(page)
    nxt = position(page[-1]) if more and page else None
    return TaskPage(records=page, next_cursor=nxt, total=total)
