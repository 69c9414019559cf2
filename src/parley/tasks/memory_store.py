"""An in-memory task store: fast, and gone when the process exits.

It keeps references to the snapshots and entries it is given: the engine never
mutates a snapshot once committed (it folds into a fresh copy, see
:func:`parley.tasks.log.fold`), so readers always see committed state.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import msgspec

from parley.protocol import models as m
from parley.protocol.states import is_terminal
from parley.tasks.log import Entry
from parley.tasks.store import (
    Change,
    Commit,
    DeliveryAttempt,
    DuplicateMessage,
    Lease,
    MessageKey,
    Notification,
    Retention,
    SequenceConflict,
    StoredPushConfig,
    TaskLink,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    check_commit,
    first_event_at,
    page_of,
    visible,
)

_UNFINISHED = (m.TaskState.SUBMITTED, m.TaskState.WORKING)


DEFAULT_KEEP_FINISHED = 10_000
CHANGES_TRIM_BATCH = 1024


class MemoryTaskStore(TaskStore):
    """Keeps everything in dictionaries; for tests and throwaway servers (`--memory`).

    Bounded: it keeps the `keep_finished` most recently finished (terminal) tasks; an older one is
    forgotten with its log, idempotency keys, checkpoint, links and push configs (None: keep all).
    Tasks that are running or waiting for input are always kept. The change feed keeps about as many
    rows as that many tasks make.
    """

    eager_commits = True  # its commit awaits nothing but its own futures (TaskStore.eager_commits)

    exclusive = True

    def __init__(self, keep_finished: int | None = DEFAULT_KEEP_FINISHED) -> None:
        if keep_finished is not None and keep_finished < 1:
            raise ValueError("keep_finished must be at least 1 (or None: keep every task)")
        self.keep_finished = keep_finished
        # Terminal task ids, oldest first. An OrderedDict: a plain dict finds its first key by skipping every
        # slot deleted since its last resize (about 11 us a task at 10,000 kept, measured), this one at once.
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._keys_of: dict[str, list[MessageKey]] = {}  # task id -> its idempotency keys
        self._changes_base = 0  # the position before the first row kept in _changes
        self._tasks: dict[str, TaskRecord] = {}
        self._logs: dict[str, list[Entry]] = {}
        self._messages: dict[MessageKey, str] = {}
        self._push: dict[str, dict[str, StoredPushConfig]] = {}
        self._outbox: dict[int, Notification] = {}  # by id, ascending
        self._outbox_of: dict[str, list[int]] = {}  # task id -> its notifications' ids
        self._notifications = 0  # the last notification id given
        self._attempts: dict[int, list[DeliveryAttempt]] = {}
        self._checkpoints: dict[str, dict[str, Any]] = {}
        self._links: dict[str, list[TaskLink]] = {}
        self._leases: dict[str, Lease] = {}
        self._changes: list[Change] = []

    async def commit(self, commit: Commit) -> None:
        check_commit(commit)
        c = commit
        current = self._tasks.get(c.task_id)
        if c.record is not None:
            if current is not None:
                raise SequenceConflict(c.task_id, 0, current.seq)
        elif current is None or current.seq != c.expected_seq:
            raise SequenceConflict(c.task_id, c.expected_seq, None if current is None else current.seq)
        if c.message is not None and c.message in self._messages:
            raise DuplicateMessage(self._messages[c.message])
        # Nothing can fail from here on: apply every part of the commit.
        if c.record is not None:
            rec = msgspec.structs.replace(c.record, task=c.snapshot, seq=c.last_seq, updated_at=c.updated_at,
                                          first_event_at=first_event_at(c))
            self._tasks[c.task_id] = rec
            self._logs[c.task_id] = list(c.entries)
        else:
            assert current is not None
            rec = msgspec.structs.replace(current, task=c.snapshot, seq=c.last_seq, updated_at=c.updated_at)
            if (first := first_event_at(c)) is not None:
                rec.first_event_at = first
            self._tasks[c.task_id] = rec
            self._logs[c.task_id].extend(c.entries)
        if c.message is not None:
            self._messages[c.message] = c.task_id
            self._keys_of.setdefault(c.task_id, []).append(c.message)
        if c.checkpoint is not None:
            self._checkpoints[c.task_id] = c.checkpoint
        elif c.drop_checkpoint:
            self._checkpoints.pop(c.task_id, None)
        for link in c.links:
            links = self._links.setdefault(link.parent_task_id, [])
            if not any(k.child_url == link.child_url and k.child_task_id == link.child_task_id for k in links):
                links.append(link)
        for stored in c.push_configs:  # before the entries notify
            self._push.setdefault(c.task_id, {})[stored.config.id] = stored
        if self._push.get(c.task_id):
            self._enqueue(c.task_id, c.entries)
        if c.lease is not None:
            self._leases[c.task_id] = c.lease
        elif c.release_lease:
            self._leases.pop(c.task_id, None)
        position = self._changes_base + len(self._changes) + 1
        self._changes.append(Change(position, c.task_id, rec.agent_id, rec.owner, rec.seq,
                                    c.snapshot.status.state, c.updated_at))
        if is_terminal(c.snapshot.status.state):
            self._finished[c.task_id] = None
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        """Past `keep_finished` finished tasks, forget the oldest ones and trim the change feed to match."""
        if self.keep_finished is None:
            return
        while len(self._finished) > self.keep_finished:
            self._forget(next(iter(self._finished)))
        excess = len(self._changes) - 8 * self.keep_finished  # a task makes a few commits
        if excess >= min(CHANGES_TRIM_BATCH, self.keep_finished):  # in batches: each trim moves the whole list
            self._trim_changes(excess)

    def _forget(self, task_id: str) -> None:
        """Drop a finished task and everything kept for it."""
        del self._finished[task_id]
        self._tasks.pop(task_id, None)
        self._logs.pop(task_id, None)
        self._checkpoints.pop(task_id, None)
        self._links.pop(task_id, None)
        self._leases.pop(task_id, None)
        self._push.pop(task_id, None)
        for key in self._keys_of.pop(task_id, []):
            if self._messages.get(key) == task_id:
                del self._messages[key]
        for notification_id in self._outbox_of.pop(task_id, []):
            self._outbox.pop(notification_id, None)
            self._attempts.pop(notification_id, None)

    def _trim_changes(self, excess: int) -> None:
        """Drop the oldest `excess` change-feed rows (never the newest: positions keep growing)."""
        excess = min(excess, len(self._changes) - 1)
        if excess > 0:
            del self._changes[:excess]
            self._changes_base += excess

    async def prune(self, retention: Retention, *, now: float, limit: int = 200) -> int:
        removed = 0
        while self._finished and removed < limit:
            oldest = self._tasks[next(iter(self._finished))]
            too_old = retention.finished_before is not None and oldest.updated_at < retention.finished_before
            too_many = retention.keep_finished is not None and len(self._finished) > retention.keep_finished
            if not (too_old or too_many):
                break
            self._forget(oldest.task.id)
            removed += 1
        cutoff = retention.changes_cutoff(now)
        self._trim_changes(next((i for i, c in enumerate(self._changes) if c.at >= cutoff), len(self._changes)))
        return removed

    async def get(self, task_id: str, *, agent_id: str | None = None, owner: str | None = None) -> TaskRecord | None:
        rec = visible(self._tasks.get(task_id), agent_id, owner)
        return msgspec.structs.replace(rec) if rec is not None else None

    async def events_after(self, task_id: str, seq: int, limit: int | None = None) -> list[Entry]:
        log = self._logs.get(task_id, [])
        start = max(seq, 0)  # the log is 1..n without gaps: entry i sits at index i-1
        return log[start: start + limit] if limit is not None else log[start:]

    async def list(self, query: TaskQuery) -> TaskPage:
        page = page_of(list(self._tasks.values()), query)
        page.records = [msgspec.structs.replace(r) for r in page.records]
        return page

    async def find_message(self, key: MessageKey) -> str | None:
        return self._messages.get(key)

    async def get_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        return self._checkpoints.get(task_id)

    async def links(self, task_id: str) -> list[TaskLink]:
        return list(self._links.get(task_id, []))

    async def lease(self, task_id: str) -> Lease | None:
        return self._leases.get(task_id)

    async def renew_leases(self, holder: str, task_ids: list[str], expires_at: float) -> set[str]:
        held = set()
        for task_id in task_ids:
            lease = self._leases.get(task_id)
            if lease is not None and lease.holder == holder:
                self._leases[task_id] = Lease(holder, expires_at)
                held.add(task_id)
        return held

    async def release_leases(self, holder: str, task_ids: list[str]) -> None:
        for task_id in task_ids:
            lease = self._leases.get(task_id)
            if lease is not None and lease.holder == holder:
                del self._leases[task_id]

    async def claim_orphans(self, holder: str, now: float, expires_at: float, *,
                            any_other_holder: bool = False) -> list[TaskRecord]:
        claimed = []
        for task_id, rec in self._tasks.items():
            if rec.task.status.state not in _UNFINISHED:
                continue
            lease = self._leases.get(task_id)
            if lease is None or lease.expires_at <= now or (any_other_holder and lease.holder != holder):
                self._leases[task_id] = Lease(holder, expires_at)
                claimed.append(msgspec.structs.replace(rec))
        return claimed

    async def changes_after(self, position: int, limit: int = 1000) -> list[Change]:
        start = max(position - self._changes_base, 0)
        return self._changes[start: start + limit]

    def may_notify(self, task_id: str) -> bool:
        return bool(self._push.get(task_id))

    async def put_push_config(self, config: m.TaskPushNotificationConfig | StoredPushConfig) -> None:
        stored = config if isinstance(config, StoredPushConfig) else StoredPushConfig(config)
        self._push.setdefault(stored.config.task_id, {})[stored.config.id] = stored

    async def get_push_config(self, task_id: str, config_id: str) -> m.TaskPushNotificationConfig | None:
        stored = self._push.get(task_id, {}).get(config_id)
        return stored.config if stored is not None else None

    async def list_push_configs(self, task_id: str) -> list[m.TaskPushNotificationConfig]:
        return [s.config for _, s in sorted(self._push.get(task_id, {}).items())]

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        found = self._push.get(task_id, {}).pop(config_id, None) is not None
        self._settle_lane(task_id, config_id, "dropped", time.time())
        return found

    async def push_target(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        stored = self._push.get(task_id, {}).get(config_id)
        return dataclasses.replace(stored) if stored is not None else None

    async def disable_push_config(self, task_id: str, config_id: str, at: float) -> None:
        stored = self._push.get(task_id, {}).get(config_id)
        if stored is not None:
            stored.disabled_at = at
        self._settle_lane(task_id, config_id, "disabled", at)

    async def due_notifications(self, now: float, limit: int, busy: set[tuple[str, str]],
                                skip_owners: Collection[str] = ()) -> list[Notification]:
        heads = self._lane_heads(busy, skip_owners)
        due = [n for n in heads if n.next_at <= now]
        due.sort(key=lambda n: (n.next_at, n.id))
        return [dataclasses.replace(n) for n in due[:limit]]

    async def next_notification_at(self, busy: set[tuple[str, str]],
                                   skip_owners: Collection[str] = ()) -> float | None:
        return min((n.next_at for n in self._lane_heads(busy, skip_owners)), default=None)

    def _lane_heads(self, busy: set[tuple[str, str]], skip_owners: Collection[str]) -> list[Notification]:
        """The oldest pending notification of each lane not in `busy`, of a task whose owner is not skipped."""
        heads: dict[tuple[str, str], Notification] = {}
        for n in self._outbox.values():
            if n.state == "pending":
                heads.setdefault((n.task_id, n.config_id), n)
        skip = set(skip_owners)
        return [n for lane, n in heads.items() if lane not in busy
                and not (skip and (rec := self._tasks.get(n.task_id)) is not None and rec.owner in skip)]

    async def record_attempt(self, attempt: DeliveryAttempt, notification: Notification) -> None:
        current = self._outbox.get(notification.id)
        if current is None:  # its task was pruned meanwhile
            return
        self._attempts.setdefault(notification.id, []).append(attempt)
        if current.state == "pending":
            self._outbox[notification.id] = dataclasses.replace(notification)

    async def recent_attempts(self, agent_id: str, since: float, limit: int) -> list[DeliveryAttempt]:
        found = [a for nid, attempts in self._attempts.items()
                 if (n := self._outbox.get(nid)) is not None and (t := self._tasks.get(n.task_id)) is not None
                 and t.agent_id == agent_id for a in attempts if a.at >= since]
        found.sort(key=lambda a: (a.at, a.notification_id, a.attempt), reverse=True)
        return found[:limit]

    async def push_log(self, task_id: str) -> tuple[list[Notification], list[DeliveryAttempt]]:
        notifications = [dataclasses.replace(self._outbox[i]) for i in self._outbox_of.get(task_id, [])]
        attempts = [a for n in notifications for a in self._attempts.get(n.id, [])]
        return notifications, attempts

    def _enqueue(self, task_id: str, entries: list[Entry]) -> None:
        """The outbox rows of committed entries (what the SQLite store's trigger does)."""
        now = time.time()
        for entry in entries:
            kind = entry.kind
            if kind not in ("status", "artifact"):
                continue
            for config_id, stored in sorted(self._push.get(task_id, {}).items()):
                if stored.disabled_at is None and (kind == "status" or stored.artifacts):
                    self._notifications += 1
                    self._outbox[self._notifications] = Notification(self._notifications, task_id, config_id,
                                                                     entry.seq, kind, now, next_at=now)
                    self._outbox_of.setdefault(task_id, []).append(self._notifications)

    def _settle_lane(self, task_id: str, config_id: str, state: str, at: float) -> None:
        for n in (self._outbox[i] for i in self._outbox_of.get(task_id, [])):
            if n.config_id == config_id and n.state == "pending":
                n.state, n.done_at = state, at

