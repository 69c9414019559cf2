"""The PostgreSQL task store: several `parley serve` replicas share one database (parley-a2a[postgres]).

The same contract as SQLite (tests/unit/test_store_contract.py runs against both), over
asyncpg's pool. A commit is one transaction of few round trips: the compare-and-set on the
task row and the insert of its entries are one statement (a data-modifying CTE), and two
triggers write what follows from them in the same transaction: the change-feed row (on the
task row) and the push outbox rows (on the events), as in SQLite.

What differs from one process on one file:

* Not exclusive: another replica's lease is only taken once it expired (`claim_orphans`
  locks the rows it takes with `FOR UPDATE SKIP LOCKED`, so two replicas never take the
  same task).
* The change feed's positions come from a sequence, allocated as the task row is written;
  a transaction that commits later may hold a smaller position. `changes_after` therefore
  stops at a gap until it is filled or has stood for `gap_seconds` (a rolled-back commit).
* Push notifications are claimed when they are handed out (`due_notifications` marks them with
  this store's holder id for `claim_seconds`), so two replicas' dispatchers never send the same
  one; if a replica dies mid-delivery, another sends it once the claim lapses.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any

import msgspec

from parley.postgres import Postgres, PostgresTables
from parley.protocol import models as m
from parley.tasks.entry_codec import decode_entry, encode_event
from parley.tasks.log import Entry, fold
from parley.tasks.store import (
    TERMINAL_SQL,
    TRIM_CHANGES,
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
    stores_snapshot,
    visible,
    within_bytes,
)

_TRIM_CHANGES = TRIM_CHANGES.replace("?", "$1")
_UNFINISHED = f"('{m.TaskState.SUBMITTED.value}', '{m.TaskState.WORKING.value}')"
_NOW = "extract(epoch from clock_timestamp())"

# Schema 1 of the "tasks" component. Later changes are new steps appended to MIGRATIONS, never edits.
_SCHEMA_1 = f"""
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    context_id TEXT NOT NULL,
    state TEXT NOT NULL,
    status_ts TEXT,
    snapshot BYTEA NOT NULL,
    seq INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    parent_task_id TEXT,
    lease_holder TEXT,
    lease_expires DOUBLE PRECISION
);
CREATE INDEX tasks_by_owner ON tasks (agent_id, owner, updated_at DESC, id DESC);
CREATE INDEX tasks_unfinished ON tasks (lease_expires) WHERE state IN {_UNFINISHED};
CREATE TABLE events (
    task_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload BYTEA NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE message_ids (
    agent_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    message_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (agent_id, owner, message_id, fingerprint)
);
CREATE TABLE checkpoints (
    task_id TEXT PRIMARY KEY,
    state BYTEA NOT NULL
);
CREATE TABLE task_links (
    parent_task_id TEXT NOT NULL,
    child_url TEXT NOT NULL,
    child_task_id TEXT NOT NULL,
    agent TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (parent_task_id, child_url, child_task_id)
);
CREATE TABLE push_configs (
    task_id TEXT NOT NULL,
    id TEXT NOT NULL,
    config BYTEA NOT NULL,
    version TEXT NOT NULL DEFAULT '1.0',
    artifacts BOOLEAN NOT NULL DEFAULT false,
    created_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    disabled_at DOUBLE PRECISION,
    PRIMARY KEY (task_id, id)
);
CREATE TABLE changes (
    pos BIGSERIAL PRIMARY KEY,
    task_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    written DOUBLE PRECISION NOT NULL DEFAULT {_NOW}
);
CREATE TABLE push_outbox (
    id BIGSERIAL PRIMARY KEY,
    task_id TEXT NOT NULL,
    config_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at DOUBLE PRECISION NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    last_status INTEGER,
    last_error TEXT,
    done_at DOUBLE PRECISION,
    claimed_by TEXT,
    claimed_until DOUBLE PRECISION
);
CREATE INDEX push_pending ON push_outbox (task_id, config_id, id) WHERE state = 'pending';
CREATE INDEX push_by_task ON push_outbox (task_id, id);
CREATE TABLE push_attempts (
    notification_id BIGINT NOT NULL,
    attempt INTEGER NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    status INTEGER,
    error TEXT,
    duration DOUBLE PRECISION NOT NULL,
    outcome TEXT NOT NULL,
    next_at DOUBLE PRECISION,
    PRIMARY KEY (notification_id, attempt)
);
CREATE FUNCTION parley_task_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO changes (task_id, agent_id, owner, seq, state, at)
    VALUES (NEW.id, NEW.agent_id, NEW.owner, NEW.seq, NEW.state, NEW.updated_at);
    RETURN NULL;
END $$;
CREATE TRIGGER task_created AFTER INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION parley_task_changed();
CREATE TRIGGER task_changed AFTER UPDATE OF seq ON tasks FOR EACH ROW EXECUTE FUNCTION parley_task_changed();
CREATE FUNCTION parley_push_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO push_outbox (task_id, config_id, seq, kind, created_at, next_at)
    SELECT NEW.task_id, c.id, NEW.seq, NEW.kind, {_NOW}, {_NOW} FROM push_configs c
    WHERE c.task_id = NEW.task_id AND c.disabled_at IS NULL AND (NEW.kind = 'status' OR c.artifacts);
    RETURN NULL;
END $$;
CREATE TRIGGER push_enqueue AFTER INSERT ON events FOR EACH ROW
    WHEN (NEW.kind IN ('status', 'artifact')) EXECUTE FUNCTION parley_push_enqueue();
"""
# Schema 2: what retention reads (finished tasks by age; a task enters the index once, when it finishes).
_SCHEMA_2 = f"""
CREATE INDEX tasks_finished ON tasks (updated_at) WHERE state IN {TERMINAL_SQL};
CREATE INDEX message_ids_by_task ON message_ids (task_id);
"""
# Schema 3: tasks_by_owner in ascending order, read backwards by ListTasks (newest update first). A new or
# updated task goes to the right edge of its (agent, owner) range, where nbtree fills a page before it splits
# it; in descending order it went to the left edge and split pages in half (for 50,000 tasks: 4.3 MB of index
# against 7.7 MB, measured on PostgreSQL 15). SQLite's store made the same change in its schema 5. The new
# index is built before the old one is dropped: the build holds writes to `tasks` (a SHARE lock); the drop takes
# the table's ACCESS EXCLUSIVE lock, which also holds reads, but only from the drop to the migration's commit.
_SCHEMA_3 = """
CREATE INDEX tasks_by_owner_ascending ON tasks (agent_id, owner, updated_at, id);
DROP INDEX tasks_by_owner;
ALTER INDEX tasks_by_owner_ascending RENAME TO tasks_by_owner;
"""
# Schema 4: `snapshot_seq` (NULL: the snapshot is the task at `seq`; else at `snapshot_seq`, and the entries
# after it are artifact updates that readers fold in). Every reader of this release folds; writers leave the
# snapshot behind (store.stores_snapshot) only with `lagging_snapshots`, off by default: a replica of an older
# release, still running beside migrated ones, would read a lagging snapshot as whole (and write on from it).
# The column has no default, so adding it rewrites nothing.
_SCHEMA_4 = """
ALTER TABLE tasks ADD COLUMN snapshot_seq INTEGER;
"""
# Schema 5: `first_event_at`, when the first event after the Task was committed (time to first event, set once
# by that commit: store.first_event_at; replicas of an older release leave it NULL), and push attempts by time
# (the dashboard's push chart reads the last hour's). No default: adding the column rewrites nothing.
_SCHEMA_5 = """
ALTER TABLE tasks ADD COLUMN first_event_at DOUBLE PRECISION;
CREATE INDEX push_attempts_by_at ON push_attempts (at);
"""
MIGRATIONS = [_SCHEMA_1, _SCHEMA_2, _SCHEMA_3, _SCHEMA_4, _SCHEMA_5]

_RECORD = "agent_id, owner, snapshot, seq, created_at, updated_at, parent_task_id, snapshot_seq, first_event_at"
_NOTIFICATION = ("o.id, o.task_id, o.config_id, o.seq, o.kind, o.created_at, o.attempts, o.next_at, o.state, "
                 "o.last_status, o.last_error, o.done_at")
# The oldest pending notification of each (task, webhook) lane that is not busy here, and when it may be sent:
# its next_at, or later while another replica's dispatcher has claimed it ($3: this store's claim holder).
def _lane_heads(owners: str) -> str:
    """The head (oldest pending row) of each lane not in $1/$2 and of no task whose owner is in `owners` (the
    statement's parameter of the owners skipped), with when it is due for the claimant $3."""
    return f"""SELECT DISTINCT ON (task_id, config_id) id,
    CASE WHEN claimed_by IS NULL OR claimed_by = $3 THEN next_at ELSE greatest(next_at, claimed_until) END AS due_at
    FROM push_outbox
    WHERE state = 'pending' AND (task_id, config_id) NOT IN (SELECT * FROM unnest($1::text[], $2::text[]))
    AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = push_outbox.task_id AND t.owner = ANY({owners}::text[]))
    ORDER BY task_id, config_id, id"""
_enc = msgspec.json.Encoder()
_task_dec = msgspec.json.Decoder(m.Task)
_push_dec = msgspec.json.Decoder(m.TaskPushNotificationConfig)


def _record(row: Any, task: m.Task, later: list[Entry] | None) -> TaskRecord:
    """A tasks row as a record (`task`: its snapshot, decoded); `later`: the log's entries after a lagging
    snapshot, folded in."""
    agent_id, owner, _, seq, created, updated, parent, _, first_event = row
    if later:
        task = fold(task, [e.event for e in later])
    return TaskRecord(task=task, agent_id=agent_id, owner=owner, seq=seq,
                      created_at=created, updated_at=updated, parent_task_id=parent, first_event_at=first_event)


async def _records(conn: Any, rows: list[Any]) -> list[TaskRecord]:
    """Rows of `tasks` (`_RECORD`) as records, the artifact updates after each lagging snapshot folded in (read
    in one query)."""
    tasks = [_task_dec.decode(r[2]) for r in rows]
    lagging = [(t.id, r[7], r[3]) for t, r in zip(tasks, rows, strict=True) if r[7] is not None and r[7] < r[3]]
    later: dict[str, list[Entry]] = {}
    if lagging:
        found = await conn.fetch(
            "SELECT e.task_id, e.seq, e.kind, e.payload FROM events e "
            "JOIN unnest($1::text[], $2::int[], $3::int[]) AS l(id, since, upto) "
            "ON e.task_id = l.id AND e.seq > l.since AND e.seq <= l.upto ORDER BY e.task_id, e.seq",
            [i for i, _, _ in lagging], [since for _, since, _ in lagging], [upto for _, _, upto in lagging])
        for task_id, seq, kind, payload in found:
            later.setdefault(task_id, []).append(decode_entry(seq, kind, payload))
    return [_record(r, t, later.get(t.id)) for t, r in zip(tasks, rows, strict=True)]


def _push_args(p: StoredPushConfig) -> tuple:
    c = p.config
    return (c.task_id, c.id, _enc.encode(c), p.version, p.artifacts, p.created_at, p.disabled_at)


def _busy(busy: set[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return [t for t, _ in busy], [c for _, c in busy]


NOTIFYING_KEPT = 10_000  # tasks remembered as having a webhook (PostgresTaskStore.may_notify)


class PostgresTaskStore(PostgresTables, TaskStore):
    """Tasks, logs, idempotency keys, checkpoints, links, leases and push state in PostgreSQL.

    Args:
        postgres: the server's shared pool (:class:`parley.postgres.Postgres`).
        claim_seconds: how long a notification handed to a dispatcher is reserved for it.
        gap_seconds: how long the change feed waits for a position a running transaction holds.
        lagging_snapshots: let a commit of artifact updates only leave the stored snapshot behind (readers
            fold the rest in), once no replica older than tasks schema 4 can be running (docs/operations.md).
    """

    exclusive = False

    def __init__(self, postgres: Postgres, *, claim_seconds: float = 60.0, gap_seconds: float = 5.0,
                 lagging_snapshots: bool = False) -> None:
        self.attach(postgres)
        self.claim_seconds = claim_seconds
        self.gap_seconds = gap_seconds
        # Leave the snapshot behind on commits of artifact updates only (store.stores_snapshot). Off: a
        # replica of a release before tasks schema 4 reads snapshots as whole; see _SCHEMA_4.
        self.lagging_snapshots = lagging_snapshots
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"  # claims push notifications
        # Set by Backends.link when the bus is PostgreSQL's: (channel, payload) of a commit's notification, sent
        # with pg_notify inside the commit's own transaction (delivered at COMMIT, lost with a rollback).
        self.notice: Callable[[str, list[Entry]], tuple[str, str]] | None = None
        self._notifying: OrderedDict[str, None] = OrderedDict()  # tasks this process saw a push config for

    component, steps = "tasks", MIGRATIONS

    # --- writing ---------------------------------------------------------------------------------

    async def commit(self, commit: Commit) -> None:
        check_commit(commit)
        c = commit
        t = c.snapshot
        whole = not self.lagging_snapshots or stores_snapshot(c)
        snapshot = _enc.encode(t) if whole else None  # before the first await: the caller goes on with its copy
        seqs = [e.seq for e in c.entries]
        kinds = [e.kind for e in c.entries]
        payloads = [encode_event(e) for e in c.entries]
        checkpoint = _enc.encode(c.checkpoint) if c.checkpoint is not None else None
        state, status_ts = t.status.state.value, t.status.timestamp
        notice = self.notice(c.task_id, c.entries) if self.notice is not None and c.entries else None
        async with self.pool.acquire() as conn, conn.transaction():
            if c.message is not None:
                k = c.message
                taken = await conn.fetchval(
                    "INSERT INTO message_ids VALUES ($1,$2,$3,$4,$5) ON CONFLICT DO NOTHING RETURNING 1",
                    k.agent_id, k.owner, k.message_id, k.fingerprint, c.task_id)
                if taken is None:
                    raise DuplicateMessage(await self._message(conn, k) or "?")
            if c.push_configs:  # before the entries: the outbox trigger reads them
                await self._put_push(conn, c.push_configs)
            if c.record is not None:
                r = c.record
                lease = (c.lease.holder, c.lease.expires_at) if c.lease is not None else (None, None)
                notify = ", pg_notify($17, $18)" if notice is not None else ""
                written = await conn.fetchval(
                    "WITH t AS (INSERT INTO tasks VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,NULL) "
                    "ON CONFLICT DO NOTHING RETURNING id), "
                    "e AS (INSERT INTO events SELECT t.id, e.seq, e.kind, e.payload FROM t, "
                    "unnest($14::int[], $15::text[], $16::bytea[]) AS e(seq, kind, payload) RETURNING 1) "
                    f"SELECT (SELECT count(*) FROM e){notify}",
                    t.id, r.agent_id, r.owner, t.context_id, state, status_ts, snapshot, c.last_seq, r.created_at,
                    c.updated_at, r.parent_task_id, *lease, seqs, kinds, payloads, *(notice or ()))
                if not written:
                    raise SequenceConflict(c.task_id, 0, await self._seq(conn, c.task_id))
                if (first := first_event_at(c)) is not None:  # created with its first events (not the engine's way)
                    await conn.execute("UPDATE tasks SET first_event_at=$2 WHERE id=$1", c.task_id, first)
                has_push = bool(c.push_configs)
            else:
                args: list[Any] = [c.task_id, c.expected_seq, c.last_seq, c.updated_at]
                if snapshot is None:  # artifact updates only: state and snapshot stay, readers fold the log since
                    sets = ["snapshot_seq=coalesce(snapshot_seq, $2)"]
                else:
                    args += [state, status_ts, snapshot]
                    sets = ["state=$5, status_ts=$6, snapshot=$7, snapshot_seq=NULL"]
                if c.lease is not None:
                    args += [c.lease.holder, c.lease.expires_at]
                    sets.append(f"lease_holder=${len(args) - 1}, lease_expires=${len(args)}")
                elif c.release_lease:
                    sets.append("lease_holder=NULL, lease_expires=NULL")
                if c.expected_seq == 1:  # the task's first event after the Task (store.first_event_at)
                    sets.append("first_event_at=$4")
                args += [seqs, kinds, payloads]
                k = len(args)
                notify = ""
                if notice is not None:  # in the same statement: no round trip of its own
                    args += notice
                    notify = f", pg_notify(${k + 1}, ${k + 2})"
                # One statement: the compare-and-set, the entries, whether the task has a webhook (then the push
                # dispatcher is woken: may_notify) and the bus's notification.
                row = await conn.fetchrow(
                    f"WITH t AS (UPDATE tasks SET seq=$3, updated_at=$4, {', '.join(sets)} "
                    "WHERE id=$1 AND seq=$2 RETURNING id), "
                    "e AS (INSERT INTO events SELECT t.id, e.seq, e.kind, e.payload FROM t, "
                    f"unnest(${k - 2}::int[], ${k - 1}::text[], ${k}::bytea[]) AS e(seq, kind, payload)) "
                    f"SELECT (SELECT count(*) FROM t), EXISTS (SELECT 1 FROM push_configs WHERE task_id=$1){notify}",
                    *args)
                updated, has_push = row[0], row[1]
                if updated != 1:
                    raise SequenceConflict(c.task_id, c.expected_seq, await self._seq(conn, c.task_id))
            if checkpoint is not None:
                await conn.execute("INSERT INTO checkpoints VALUES ($1,$2) ON CONFLICT (task_id) "
                                   "DO UPDATE SET state = EXCLUDED.state", c.task_id, checkpoint)
            elif c.drop_checkpoint:
                await conn.execute("DELETE FROM checkpoints WHERE task_id=$1", c.task_id)
            if c.links:
                await conn.executemany(
                    "INSERT INTO task_links VALUES ($1,$2,$3,$4,$5) ON CONFLICT DO NOTHING",
                    [(k.parent_task_id, k.child_url, k.child_task_id, k.agent, k.created_at) for k in c.links])
        self._saw_push(c.task_id, has_push)

    def _saw_push(self, task_id: str, has_push: bool) -> None:
        """Remember (a bounded number of) the tasks with a webhook, as the last commit to each found them."""
        if has_push:
            self._notifying[task_id] = None
            self._notifying.move_to_end(task_id)
            while len(self._notifying) > NOTIFYING_KEPT:
                self._notifying.popitem(last=False)
        else:
            self._notifying.pop(task_id, None)

    def may_notify(self, task_id: str) -> bool:
        """Whether the last commit to `task_id` here found a push config for it (read in the commit's own
        statement): the push dispatcher is woken only for those. A config another replica adds is seen by the
        next commit, or by the dispatcher's polling."""
        return task_id in self._notifying

    @staticmethod
    async def _seq(conn: Any, task_id: str) -> int | None:
        return await conn.fetchval("SELECT seq FROM tasks WHERE id=$1", task_id)

    @staticmethod
    async def _message(conn: Any, key: MessageKey) -> str | None:
        return await conn.fetchval(
            "SELECT task_id FROM message_ids WHERE agent_id=$1 AND owner=$2 AND message_id=$3 AND fingerprint=$4",
            key.agent_id, key.owner, key.message_id, key.fingerprint)

    @staticmethod
    async def _put_push(conn: Any, configs: list[StoredPushConfig]) -> None:
        await conn.executemany(
            "INSERT INTO push_configs VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (task_id, id) DO UPDATE SET "
            "config=EXCLUDED.config, version=EXCLUDED.version, artifacts=EXCLUDED.artifacts, "
            "created_at=EXCLUDED.created_at, disabled_at=EXCLUDED.disabled_at",
            [_push_args(p) for p in configs])

    # --- retention -------------------------------------------------------------------------------

    async def prune(self, retention: Retention, *, now: float, limit: int = 200) -> int:
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock(hashtext('parley.prune'))"):
                return 0  # another replica is pruning
            ids: dict[str, None] = {}
            if retention.finished_before is not None:
                rows = await conn.fetch(f"SELECT id FROM tasks WHERE state IN {TERMINAL_SQL} AND updated_at < $1 "
                                        "ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED",
                                        retention.finished_before, limit)
                ids.update((r[0], None) for r in rows)
            if retention.keep_finished is not None and len(ids) < limit:
                finished = await conn.fetchval(f"SELECT count(*) FROM tasks WHERE state IN {TERMINAL_SQL}")
                excess = finished - retention.keep_finished
                if excess > 0:
                    rows = await conn.fetch(f"SELECT id FROM tasks WHERE state IN {TERMINAL_SQL} "
                                            "ORDER BY updated_at LIMIT $1 FOR UPDATE SKIP LOCKED", min(limit, excess))
                    ids.update((r[0], None) for r in rows)
            batch = list(ids)[:limit]
            if batch:
                await conn.execute("DELETE FROM push_attempts WHERE notification_id IN "
                                   "(SELECT id FROM push_outbox WHERE task_id = ANY($1::text[]))", batch)
                for table, column in (("events", "task_id"), ("message_ids", "task_id"),
                                      ("checkpoints", "task_id"), ("task_links", "parent_task_id"),
                                      ("push_outbox", "task_id"), ("push_configs", "task_id"), ("tasks", "id")):
                    await conn.execute(f"DELETE FROM {table} WHERE {column} = ANY($1::text[])", batch)
            await conn.execute(_TRIM_CHANGES, retention.changes_cutoff(now))
        return len(batch)

    # --- reading ---------------------------------------------------------------------------------

    async def get(self, task_id: str, *, agent_id: str | None = None, owner: str | None = None) -> TaskRecord | None:
        # By the primary key alone, then checked here: with `agent_id AND owner` in the query the planner may
        # pick the per-owner index on stale statistics and scan every task of that owner.
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(f"SELECT {_RECORD} FROM tasks WHERE id=$1", task_id)
            if row is None:
                return None
            rec = (await _records(conn, [row]))[0]
        return visible(rec, agent_id, owner)

    async def events_after(self, task_id: str, seq: int, limit: int | None = None) -> list[Entry]:
        rows = await self.pool.fetch(
            "SELECT seq, kind, payload FROM events WHERE task_id=$1 AND seq>$2 ORDER BY seq LIMIT $3", task_id, seq,
            limit)
        return [decode_entry(s, k, p) for s, k, p in rows]

    async def list(self, query: TaskQuery) -> TaskPage:
        where = ["TRUE"]
        args: list[Any] = []
        for column, value in (("agent_id", query.agent_id), ("owner", query.owner), ("context_id", query.context_id),
                              ("state", query.state.value if query.state is not None else None)):
            if value is not None:
                args.append(value)
                where.append(f"{column}=${len(args)}")
        if query.status_after is not None:
            args.append(query.status_after)
            where.append(f"status_ts>=${len(args)}")
        cond = " AND ".join(where)
        page_args = list(args)
        page_cond = cond
        created = query.order == "created"
        if query.cursor is not None and created:
            page_args.append(query.cursor[1])
            page_cond += f" AND id < ${len(page_args)}"
        elif query.cursor is not None:
            page_args += [query.cursor[0], query.cursor[1]]
            a, b = len(page_args) - 1, len(page_args)
            page_cond += f" AND (updated_at, id) < (${a}, ${b})"
        page_args.append(query.page_size + 1)
        order = "id DESC" if created else "updated_at DESC, id DESC"
        async with self.pool.acquire() as conn:
            total = await conn.fetchval(f"SELECT count(*) FROM tasks WHERE {cond}", *args) if query.count else -1
            if query.max_bytes is not None:  # sizes first, then only the rows that fit (query.max_bytes)
                sized = await conn.fetch(f"SELECT id, octet_length(snapshot) FROM tasks WHERE {page_cond} "
                                         f"ORDER BY {order} LIMIT ${len(page_args)}", *page_args)
                taken = [r[0] for r in sized[: within_bytes([r[1] for r in sized], query)]]
                found = {r[0]: tuple(r)[1:] for r in await conn.fetch(
                    f"SELECT id, {_RECORD} FROM tasks WHERE id = ANY($1::text[])", taken)}
                records = await _records(conn, [found[task_id] for task_id in taken if task_id in found])
                more = len(sized) > len(taken)
            else:
                rows = await conn.fetch(
                    f"SELECT {_RECORD} FROM tasks WHERE {page_cond} ORDER BY {order} "
                    f"LIMIT ${len(page_args)}", *page_args)
                records = await _records(conn, rows[: query.page_size])
                more = len(rows) > query.page_size
        nxt = None
        if more and records:
            last = records[-1]
            nxt = (0.0, last.task.id) if created else (last.updated_at, last.task.id)
        return TaskPage(records=records, next_cursor=nxt, total=total)

    async def find_message(self, key: MessageKey) -> str | None:
        async with self.pool.acquire() as conn:
            return await self._message(conn, key)

    async def get_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        state = await self.pool.fetchval("SELECT state FROM checkpoints WHERE task_id=$1", task_id)
        return msgspec.json.decode(state) if state is not None else None

    async def links(self, task_id: str) -> list[TaskLink]:
        rows = await self.pool.fetch(
            "SELECT parent_task_id, child_url, child_task_id, agent, created_at FROM task_links "
            "WHERE parent_task_id=$1 ORDER BY created_at, child_task_id", task_id)
        return [TaskLink(*row) for row in rows]

    async def changes_after(self, position: int, limit: int = 1000) -> list[Change]:
        # Positions are handed out when a task row is written and become visible at commit, so a smaller
        # one may still appear: stop before a gap unless the row after it was written gap_seconds ago.
        rows = await self.pool.fetch(
            f"SELECT pos, task_id, agent_id, owner, seq, state, at, {_NOW} - written FROM changes "
            "WHERE pos>$1 ORDER BY pos LIMIT $2", position, limit)
        out: list[Change] = []
        expected = position + 1
        for pos, task_id, agent_id, owner, seq, state, at, age in rows:
            if pos != expected and position > 0 and age < self.gap_seconds:
                break
            out.append(Change(pos, task_id, agent_id, owner, seq, m.TaskState(state), at))
            expected = pos + 1
        return out

    # --- leases ----------------------------------------------------------------------------------

    async def lease(self, task_id: str) -> Lease | None:
        row = await self.pool.fetchrow("SELECT lease_holder, lease_expires FROM tasks WHERE id=$1", task_id)
        return Lease(row[0], row[1]) if row and row[0] is not None else None

    async def renew_leases(self, holder: str, task_ids: list[str], expires_at: float) -> set[str]:
        rows = await self.pool.fetch(
            "UPDATE tasks SET lease_expires=$1 WHERE lease_holder=$2 AND id = ANY($3::text[]) RETURNING id",
            expires_at, holder, task_ids)
        return {r[0] for r in rows}

    async def release_leases(self, holder: str, task_ids: list[str]) -> None:
        await self.pool.execute("UPDATE tasks SET lease_holder=NULL, lease_expires=NULL "
                                "WHERE lease_holder=$1 AND id = ANY($2::text[])", holder, task_ids)

    async def claim_orphans(self, holder: str, now: float, expires_at: float, *,
                            any_other_holder: bool = False) -> list[TaskRecord]:
        other = " OR lease_holder != $3" if any_other_holder else ""
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                f"UPDATE tasks SET lease_holder=$3, lease_expires=$2 WHERE id IN ("
                f"  SELECT id FROM tasks WHERE state IN {_UNFINISHED} "
                f"  AND (lease_holder IS NULL OR lease_expires <= $1{other}) FOR UPDATE SKIP LOCKED) "
                f"RETURNING {_RECORD}", now, expires_at, holder)
            return await _records(conn, rows)

    # --- push configs and the outbox --------------------------------------------------------------

    async def put_push_config(self, config: m.TaskPushNotificationConfig | StoredPushConfig) -> None:
        stored = config if isinstance(config, StoredPushConfig) else StoredPushConfig(config)
        async with self.pool.acquire() as conn:
            await self._put_push(conn, [stored])
        self._saw_push(stored.config.task_id, True)

    async def get_push_config(self, task_id: str, config_id: str) -> m.TaskPushNotificationConfig | None:
        raw = await self.pool.fetchval("SELECT config FROM push_configs WHERE task_id=$1 AND id=$2", task_id, config_id)
        return _push_dec.decode(raw) if raw is not None else None

    async def list_push_configs(self, task_id: str) -> list[m.TaskPushNotificationConfig]:
        rows = await self.pool.fetch("SELECT config FROM push_configs WHERE task_id=$1 ORDER BY id", task_id)
        return [_push_dec.decode(r[0]) for r in rows]

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        async with self.pool.acquire() as conn, conn.transaction():
            deleted = await conn.fetchval("DELETE FROM push_configs WHERE task_id=$1 AND id=$2 RETURNING 1",
                                          task_id, config_id)
            await conn.execute(f"UPDATE push_outbox SET state='dropped', done_at={_NOW} "
                               "WHERE task_id=$1 AND config_id=$2 AND state='pending'", task_id, config_id)
        return deleted is not None

    async def push_target(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        row = await self.pool.fetchrow(
            "SELECT config, version, artifacts, created_at, disabled_at FROM push_configs WHERE task_id=$1 AND id=$2",
            task_id, config_id)
        if row is None:
            return None
        return StoredPushConfig(_push_dec.decode(row[0]), row[1], row[2], row[3], row[4])

    async def disable_push_config(self, task_id: str, config_id: str, at: float) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("UPDATE push_configs SET disabled_at=$1 WHERE task_id=$2 AND id=$3",
                               at, task_id, config_id)
            await conn.execute("UPDATE push_outbox SET state='disabled', done_at=$1 "
                               "WHERE task_id=$2 AND config_id=$3 AND state='pending'", at, task_id, config_id)

    async def due_notifications(self, now: float, limit: int, busy: set[tuple[str, str]],
                                skip_owners: Collection[str] = ()) -> list[Notification]:
        # Lane heads that are due, locked and pushed `claim_seconds` into the future in one statement: another
        # replica's dispatcher skips them until record_attempt sets their real next time (or the claim lapses).
        tasks, configs = _busy(busy)
        rows = await self.pool.fetch(
            f"WITH heads AS ({_lane_heads('$7')}), due AS ("
            "  SELECT o.id FROM push_outbox o JOIN heads h ON o.id = h.id WHERE h.due_at <= $4 AND o.state='pending'"
            # Checked again on the locked row: `heads` is the statement's snapshot, and another replica's claim
            # may have committed since (PostgreSQL re-evaluates only conditions on the locked row itself).
            "  AND o.next_at <= $4 AND (o.claimed_by IS NULL OR o.claimed_by = $3 OR o.claimed_until <= $4)"
            "  ORDER BY h.due_at, h.id LIMIT $5 FOR UPDATE OF o SKIP LOCKED) "
            "UPDATE push_outbox o SET claimed_by = $3, claimed_until = $4 + $6 FROM due WHERE o.id = due.id "
            f"RETURNING {_NOTIFICATION}",
            tasks, configs, self.holder, now, limit, self.claim_seconds, list(skip_owners))
        out = [Notification(*r) for r in rows]
        out.sort(key=lambda n: (n.next_at, n.id))
        return out

    async def next_notification_at(self, busy: set[tuple[str, str]],
                                   skip_owners: Collection[str] = ()) -> float | None:
        tasks, configs = _busy(busy)
        return await self.pool.fetchval(f"SELECT min(due_at) FROM ({_lane_heads('$4')}) h", tasks, configs, self.holder,
                                        list(skip_owners))

    async def record_attempt(self, attempt: DeliveryAttempt, notification: Notification) -> None:
        a, n = attempt, notification
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO push_attempts VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (notification_id, attempt) "
                "DO UPDATE SET at=EXCLUDED.at, status=EXCLUDED.status, error=EXCLUDED.error, "
                "duration=EXCLUDED.duration, outcome=EXCLUDED.outcome, next_at=EXCLUDED.next_at",
                a.notification_id, a.attempt, a.at, a.status, a.error, a.duration, a.outcome, a.next_at)
            await conn.execute(
                "UPDATE push_outbox SET attempts=$1, next_at=$2, state=$3, last_status=$4, last_error=$5, done_at=$6, "
                "claimed_by=NULL, claimed_until=NULL WHERE id=$7 AND state='pending'",
                n.attempts, n.next_at, n.state, n.last_status, n.last_error, n.done_at, n.id)

    async def recent_attempts(self, agent_id: str, since: float, limit: int) -> list[DeliveryAttempt]:
        rows = await self.pool.fetch(
            "SELECT a.notification_id, a.attempt, a.at, a.status, a.error, a.duration, a.outcome, a.next_at "
            "FROM push_attempts a JOIN push_outbox o ON o.id = a.notification_id JOIN tasks t ON t.id = o.task_id "
            "WHERE a.at >= $1 AND t.agent_id = $2 "
            "ORDER BY a.at DESC, a.notification_id DESC, a.attempt DESC LIMIT $3", since, agent_id, limit)
        return [DeliveryAttempt(*r) for r in rows]

    async def push_log(self, task_id: str) -> tuple[list[Notification], list[DeliveryAttempt]]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(f"SELECT {_NOTIFICATION} FROM push_outbox o WHERE o.task_id=$1 ORDER BY o.id",
                                    task_id)
            attempts = await conn.fetch(
                "SELECT a.notification_id, a.attempt, a.at, a.status, a.error, a.duration, a.outcome, a.next_at "
                "FROM push_attempts a JOIN push_outbox o ON o.id = a.notification_id "
                "WHERE o.task_id=$1 ORDER BY a.notification_id, a.attempt", task_id)
        return [Notification(*r) for r in rows], [DeliveryAttempt(*r) for r in attempts]

    # --- health ----------------------------------------------------------------------------------

    async def ping(self) -> None:
        """One round trip, which also checks that the tables are at this Parley's schema (for /readyz)."""
        version = await self.pool.fetchval("SELECT version FROM parley_schema WHERE component='tasks'")
        if version != len(MIGRATIONS):
            raise RuntimeError(f"the tasks tables are at schema {version}, this Parley needs {len(MIGRATIONS)}")


__all__ = ["MIGRATIONS", "PostgresTaskStore"]
