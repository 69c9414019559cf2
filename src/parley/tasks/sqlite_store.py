"""The SQLite task store, the default of `parley serve` (a file under ./.parley/).

Uses the standard library's sqlite3 in WAL mode with `synchronous=NORMAL`. Commits
are group-written: every commit queued in one event-loop turn goes into one
transaction (each in a savepoint, so a refused one is undone alone; a streamed token's is refused before it
writes, and needs none), run directly on
the event loop because a local WAL write costs tens of microseconds, less than a
thread hop; concurrent tasks then share the pages they touch (index leaves, the change
feed) instead of writing them once each. A busy store writes at most once per
`group_commit_seconds` when that is set (off by default; PostgreSQL's `commit_delay`), so that the tokens of concurrent streams,
arriving in different loop turns, share a transaction too; an idle one writes at once. A commit of artifact updates only (a streamed token)
is one change-feed row carrying its entries, the task's tail, moved into the log at the task's next other commit
(`_append_tail`): one B-tree per token instead of five. WAL checkpoints run on a thread of their own
and keep the WAL bounded (:class:`WalCheckpointer`); while one holds the writer lock the
writer waits for it off the event loop.

One process at a time: the store takes an exclusive lock on `<db>.lock` when it
opens, and a second process opening the same file is refused with a message naming
the file and the process that holds it (the in-process event bus cannot carry
events between processes; several replicas need a shared store and bus).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import socket
import sqlite3
import threading
import time
from array import array
from collections.abc import AsyncIterator, Callable, Collection
from pathlib import Path
from typing import Any, Self

import msgspec

from parley.private_files import prepare_private_file
from parley.protocol import models as m
from parley.protocol.states import TERMINAL
from parley.tasks.entry_codec import decode_entries, encode_entries, encode_stored
from parley.tasks.log import Entry, fold
from parley.tasks.log_packing import elide, pack_log_row, restore, restore_rows, unpack_log_row
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
    StoreError,
    TaskLink,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    check_commit,
    first_event_at,
    stores_snapshot,
    within_bytes,
)
from parley.tasks.tail_file import TailFile, TailRecord, segment_of

# 4: the indexes retention reads (finished tasks by age, idempotency keys by task); 5: tasks_by_owner in ascending
# order (read backwards for ListTasks), so that a commit adds to its right edge; 6: the push outbox is filled by
# the commit itself (_ENQUEUE), only for tasks with webhooks, not by a trigger on every event row; 7: a commit's
# entries are one row of `entry_batches` (a rowid table: a new row goes to its end), not one `events` row each;
# 8: `tasks.snapshot_seq`, a commit of artifact updates only does not rewrite the snapshot (store.SNAPSHOT_EVERY);
# 9: `tasks.first_event_at` (time to first event, set once: store.first_event_at) and push attempts by time;
# a commit of artifact updates only is one `changes` row carrying its entries (`changes.entries`), moved to the
# log at the task's next other commit (`tasks.tail_after`; the change-feed row of other commits is written by
# the commit, no longer by a trigger on UPDATE); 10: a tail row's entries are deflated against the tail's first row
# (log_packing.elide: `=...`); nothing to migrate, but a Parley that knows schema 9 would misread such rows left by
# a crash, so it is told the file is newer; 11: tails are records in files beside the database (tail_file), not
# change-feed rows, and every feed row is written with its position (the store hands out positions, tails' too:
# the `task_created` trigger is gone); a Parley that knows schema 10 would not look for those files
SCHEMA_VERSION = 11
_UNFINISHED_SQL = f"('{m.TaskState.SUBMITTED.value}', '{m.TaskState.WORKING.value}')"  # what recovery takes over
_MESSAGE_IDS = """(
    agent_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    message_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (agent_id, owner, message_id, fingerprint)
) WITHOUT ROWID"""
# `pos` is the rowid: max + 1 on every insert, so positions only grow as long as the newest row is kept
# (whatever prunes the feed keeps its last row; AUTOINCREMENT would cost a second write per commit).
# `entries`: the log entries of a commit of artifact updates only (encode_entries, or relative to the first row
# of its tail: log_packing.elide), not in `entry_batches` yet while `seq` is past the task row's (see
# SqliteTaskStore._append_tail); NULL for the other commits' rows.
_CHANGES = """(
    pos INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    at REAL NOT NULL,
    entries BLOB
)"""
# Schema 3: push notifications. The outbox is filled in the transaction of the commit that appends the
# entry (_ENQUEUE); the dispatcher (parley.push.dispatcher) drains it.
_PUSH_OUTBOX = """
CREATE TABLE IF NOT EXISTS push_outbox (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    config_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    last_status INTEGER,
    last_error TEXT,
    done_at REAL
);
CREATE INDEX IF NOT EXISTS push_pending ON push_outbox (task_id, config_id, id) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS push_by_task ON push_outbox (task_id, id);
CREATE TABLE IF NOT EXISTS push_attempts (
    notification_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    at REAL NOT NULL,
    status INTEGER,
    error TEXT,
    duration REAL NOT NULL,
    outcome TEXT NOT NULL,
    next_at REAL,
    PRIMARY KEY (notification_id, attempt)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS push_attempts_by_at ON push_attempts (at)
"""
_NOW = "((julianday('now') - 2440587.5) * 86400.0)"  # seconds since the epoch, in SQL
SCHEMA = f"""
-- `snapshot_seq` NULL: `snapshot` is the task at `seq`. Else it is the task at `snapshot_seq`, and the entries
-- after it are artifact updates that readers fold in (store.stores_snapshot: a commit of artifact updates only
-- leaves the snapshot be). `tail_after`: the change feed's last position when `seq` was last written, the rows
-- after it that carry entries past `seq` are the task's tail (SqliteTaskStore._append_tail), found again at open.
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    context_id TEXT NOT NULL,
    state TEXT NOT NULL,
    status_ts TEXT,
    snapshot BLOB NOT NULL,
    seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    parent_task_id TEXT,
    lease_holder TEXT,
    lease_expires REAL,
    snapshot_seq INTEGER,
    first_event_at REAL,
    tail_after INTEGER
);
-- Ascending, read backwards by ListTasks (newest update first): a commit's new entry goes to the right edge
-- of its (agent, owner) range, one page, where descending order inserted at the left edge and split pages
-- there (4 of the 16 pages an echo task's commit wrote).
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (agent_id, owner, updated_at, id);
-- Finished tasks by age, for retention: a task enters it once, when it finishes (commits of running
-- tasks do not touch it).
CREATE INDEX IF NOT EXISTS tasks_finished ON tasks (updated_at) WHERE state IN {TERMINAL_SQL};
-- The log: each commit's entries as one row (entry_codec.encode_entries: a JSON array of [seq, kind, event]),
-- `last_seq` the seq of its last entry. Until schema 7 each entry was a row of a WITHOUT ROWID table keyed by
-- (task_id, seq): an echo task's 7 entries were 7 inserts into its right edge, where SQLite rebalances three
-- leaves at a time (5 of the 13 pages such a commit wrote). Appending to a rowid table fills its last page.
-- A row made from a moved tail is deflated (log_packing.pack_log_row).
CREATE TABLE IF NOT EXISTS entry_batches (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    entries BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS entry_batches_by_task ON entry_batches (task_id, last_seq);
CREATE TABLE IF NOT EXISTS message_ids {_MESSAGE_IDS};
CREATE INDEX IF NOT EXISTS message_ids_by_task ON message_ids (task_id);
CREATE TABLE IF NOT EXISTS checkpoints (
    task_id TEXT PRIMARY KEY,
    state BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS task_links (
    parent_task_id TEXT NOT NULL,
    child_url TEXT NOT NULL,
    child_task_id TEXT NOT NULL,
    agent TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (parent_task_id, child_url, child_task_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS push_configs (
    task_id TEXT NOT NULL,
    id TEXT NOT NULL,
    config BLOB NOT NULL,
    version TEXT NOT NULL DEFAULT '1.0',
    artifacts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL DEFAULT 0,
    disabled_at REAL,
    PRIMARY KEY (task_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes {_CHANGES};
{_PUSH_OUTBOX}
"""
# A commit's change-feed row, at the position the store gave it (SqliteTaskStore._position: a streamed token's
# commit takes one too, for the change its tail stands for, without a row). Until schema 9 a trigger on UPDATE OF
# seq wrote the other commits' rows, until schema 11 one on INSERT the creating commits'.
_CHANGED = ("INSERT INTO changes (pos, task_id, agent_id, owner, seq, state, at) "
            "SELECT ?, id, agent_id, owner, seq, state, updated_at FROM tasks WHERE id=?")
_FEED_END = "(SELECT coalesce(max(pos), 0) FROM changes)"  # what `tasks.tail_after` is set to (schema 9-10 tails)
_TERMINAL_VALUES = frozenset(s.value for s in TERMINAL)

# A notification for each webhook of the task (enabled, and asking for artifacts if the entry is one) for one
# status or artifact entry: run by the commit that appends the entry, for tasks that have webhooks (`_pushed`;
# until schema 6, a trigger ran this lookup for every event row of every task).
_ENQUEUE = (f"INSERT INTO push_outbox (task_id, config_id, seq, kind, created_at, next_at) "
            f"SELECT ?1, c.id, ?2, ?3, {_NOW}, {_NOW} FROM push_configs c "
            "WHERE c.task_id = ?1 AND c.disabled_at IS NULL AND (?3 = 'status' OR c.artifacts = 1)")
_NOTIFIED = ("status", "artifact")

# Schema 2 -> 3: push configs carry their version and options (the outbox tables are new).
MIGRATE_2_TO_3 = """
ALTER TABLE push_configs ADD COLUMN version TEXT NOT NULL DEFAULT '1.0';
ALTER TABLE push_configs ADD COLUMN artifacts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE push_configs ADD COLUMN created_at REAL NOT NULL DEFAULT 0;
ALTER TABLE push_configs ADD COLUMN disabled_at REAL;
"""

# Schema 1 (Parley 0.1 before leases) -> 2: run leases, content-aware message keys, the change feed.
MIGRATE_1_TO_2 = f"""
DROP INDEX IF EXISTS tasks_by_state;
ALTER TABLE tasks ADD COLUMN lease_holder TEXT;
ALTER TABLE tasks ADD COLUMN lease_expires REAL;
CREATE TABLE message_ids_v2 {_MESSAGE_IDS};
INSERT INTO message_ids_v2 SELECT agent_id, owner, message_id, '', task_id FROM message_ids;
DROP TABLE message_ids;
ALTER TABLE message_ids_v2 RENAME TO message_ids;
"""

_RECORD = "agent_id, owner, snapshot, seq, created_at, updated_at, parent_task_id, snapshot_seq, first_event_at"
# A group write less than this long after the previous one waits until this long after it (commits queued
# meanwhile join it); an idle store writes at once. Streamed tokens of concurrent streams, each committed in a
# loop turn of its own, then share a transaction and the change-feed page it writes (bench/RESULTS.md). 0: every
# group write at the next loop turn. Settings.group_commit_seconds.
GROUP_COMMIT_SECONDS = 0.0  # off: 1 ms did not measurably save disk writes (bench/RESULTS.md) and adds delay
GATE_POLL_SECONDS = 0.001  # how often a write outside the group writes looks whether a checkpoint let go
# Seconds between two WAL checkpoint rounds (WalCheckpointer): a round copies the pages committed since the last
# into the database file and syncs both files (and the tail file), so this is also how much a power cut may take
# of what was committed (synchronous=NORMAL; a killed process loses nothing). Each round writes every page it
# copies whole, however often it changed meanwhile: at 100 streams x 20 tokens/s rounds every 0.05 s wrote about
# 1,190 bytes per streamed token and rounds every 0.25 s about 850, with the same delivery delay and unary latency
# (bench/RESULTS.md, 2026-11-29).
WAL_CHECKPOINT_SECONDS = 0.25
WAL_LIMIT_BYTES = 16 * 1024 * 1024  # past this much content the WAL starts over at the next checkpoint round
_BATCH = 500  # ids per statement (SQLite's parameter limit is 999 on old builds)
# Entries per `entry_batches` row at most: a commit with more (an agent yielding thousands of events in one
# loop turn, a migrated log) is several rows, so that a reader paging through a log (follow.PAGE) never decodes
# much more than the page it asked for.
ROW_ENTRIES = 256
# The page size of a new database file. A commit writes every page it touches to the WAL whole (and a checkpoint
# writes it again): a streamed token's commit touches about five pages (its log row, that row's index entry, the
# task row, its ListTasks index entry, the change feed), each holding a few bytes of news. At 1 KiB those cost
# about a third of what they cost at SQLite's default 4 KiB (bench/disk_per_token.py, bench/RESULTS.md); 512 bytes
# saved less again and deepened every tree. A database made with another page size keeps it (SQLite cannot
# change it in WAL mode without a VACUUM).
PAGE_SIZE = 1024
log = logging.getLogger("parley.sqlite")
_enc = msgspec.json.Encoder()
# sqlite3 binds str, int and float as they are, but looks for an adapter for bytes and, finding none, asks the
# value's type for `__conform__`, a failed lookup that formats an AttributeError (about 1,500 instructions for every
# bytes parameter: each streamed token's feed row). An identity adapter binds the same blob without it. (Adapters are
# process-wide; this one changes nothing for any other user of sqlite3.)
sqlite3.register_adapter(bytes, bytes)
_task_dec = msgspec.json.Decoder(m.Task)
_push_dec = msgspec.json.Decoder(m.TaskPushNotificationConfig)
_NOTIFICATION = ("o.id, o.task_id, o.config_id, o.seq, o.kind, o.created_at, o.attempts, o.next_at, o.state, "
                 "o.last_status, o.last_error, o.done_at")


def _entries_to_batches(db: sqlite3.Connection) -> None:
    """Schema 6 -> 7: the `events` rows (one per entry) become `entry_batches` rows of up to ROW_ENTRIES entries
    of one task, in the migration's transaction (the bytes of each event are kept as they are)."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='events'").fetchone():
        return
    rows = db.execute("SELECT task_id, seq, kind, payload FROM events ORDER BY task_id, seq")
    batch: list[tuple[int, str, bytes]] = []
    task = None
    insert = "INSERT INTO entry_batches (task_id, last_seq, entries) VALUES (?,?,?)"
    for task_id, seq, kind, payload in rows:
        if batch and (task_id != task or len(batch) == ROW_ENTRIES):
            db.execute(insert, (task, batch[-1][0], encode_stored(batch)))
            batch = []
        task = task_id
        batch.append((seq, kind, bytes(payload)))
    if batch:
        db.execute(insert, (task, batch[-1][0], encode_stored(batch)))
    db.execute("DROP TABLE events")


def _log_rows(entries: list[Entry]) -> list[tuple[int, bytes]]:
    """A commit's entries as `entry_batches` rows: (the last one's seq, encode_entries), ROW_ENTRIES at most."""
    if len(entries) <= ROW_ENTRIES:  # the usual (a streamed token's commit: one entry): one row
        return [(entries[-1].seq, encode_entries(entries))] if entries else []
    return [(chunk[-1].seq, encode_entries(chunk))
            for chunk in (entries[i:i + ROW_ENTRIES] for i in range(0, len(entries), ROW_ENTRIES))]


def _tail_only(commit: Commit) -> bool:
    """Whether `commit` is entries and nothing else (no task to create, message key, checkpoint, link, lease or push
    config), past the task's first event (the commit writing seq 2 stamps `first_event_at` on the task row): a
    streamed token's commit, which may go to a tail (SqliteTaskStore._append_tail)."""
    c = commit
    return (bool(c.entries) and c.expected_seq > 1 and c.record is None and c.message is None and c.checkpoint is None
            and not c.drop_checkpoint and not c.links and c.lease is None and not c.release_lease
            and not c.push_configs)


def _skipping(owners: Collection[str]) -> tuple[str, tuple[str, ...]]:
    """The outbox condition (and its arguments) leaving out the tasks of `owners`."""
    if not owners:
        return "", ()
    owners = tuple(owners)
    marks = ",".join("?" * len(owners))
    return f" AND o.task_id NOT IN (SELECT id FROM tasks WHERE owner IN ({marks}))", owners


def _push_row(p: StoredPushConfig) -> tuple:
    c = p.config
    return (c.task_id, c.id, _enc.encode(c), p.version, int(p.artifacts), p.created_at, p.disabled_at)


def _page(records: list[TaskRecord], more: bool, created: bool, total: int) -> TaskPage:
    """A ListTasks page; its cursor continues after its last task when `more` follow."""
    nxt = None
    if more and records:
        last = records[-1]
        nxt = (0.0, last.task.id) if created else (last.updated_at, last.task.id)
    return TaskPage(records=records, next_cursor=nxt, total=total)


class _Tail(msgspec.Struct, frozen=True, gc=False):
    """A task's commits of artifact updates only that are records of the tail file and not in its log yet
    (replaced, never changed in place, so that undoing a refused commit puts the previous one back). A struct: one
    is made per streamed token, in C (a frozen dataclass's __init__ is a Python call setting each field through
    object)."""

    agent_id: str
    owner: str
    state: str
    base_seq: int  # the task row's seq: the tail's entries follow it
    last_seq: int
    updated_at: float
    first: bytes | None  # the first commit's entries (encode_entries): the later records are elided against it
    rows: array  # the tail-file records (references) of the later commits, in order: their bytes are read back
    # when the tail is read or moved, not held here (8 bytes a token instead of ~120: issue 25, memory per stream)
    count: int  # entries in all
    segment: int = 0  # the tail-file segment of the first commit's record: kept until the tail moves
    pos: int = 0  # the change-feed position of the newest commit (changes_after reports it; no row is written)

    def then(self, ref: int, pos: int, last_seq: int, updated_at: float, batch: bytes, entries: int) -> _Tail:
        """This tail and one more commit: `batch` (its entries whole) in tail-file record `ref`."""
        if self.first is None:
            return _Tail(self.agent_id, self.owner, self.state, self.base_seq, last_seq, updated_at, batch,
                         self.rows, self.count + entries, segment_of(ref), pos)
        return _Tail(self.agent_id, self.owner, self.state, self.base_seq, last_seq, updated_at, self.first,
                     self.rows + array("q", (ref,)), self.count + entries, self.segment, pos)

    def whole(self, tails: TailFile) -> list[bytes]:
        """Each commit's entries whole (encode_entries), in order: the first held, the others read from the tail
        file (or from the records staged for the group write under way)."""
        first = self.first
        if first is None:
            return []
        return restore_rows([tails.read(ref) for ref in self.rows.tolist()], first)


class _Found(msgspec.Struct):
    """A tail a crash left (_recover_tails): the entries of each commit whole, in order."""

    base_seq: int
    last_seq: int
    updated_at: float
    batches: list[bytes]


class _Pending(msgspec.Struct):
    """A commit waiting for the next group write, encoded when it was queued (a struct: made in C, once per
    commit)."""

    commit: Commit
    snapshot: bytes | None  # None: the stored snapshot stays (store.stores_snapshot)
    rows: list[tuple[int, bytes]]  # the commit's entries as `entry_batches` rows: (last seq, encode_entries)
    done: asyncio.Future[None]


class SqliteTaskStore(TaskStore):
    """Tasks, logs, idempotency keys, checkpoints, links, leases and push configs in one SQLite file."""

    eager_commits = True  # its commit awaits nothing but its own futures (TaskStore.eager_commits)

    exclusive = True

    def __init__(self, path: str | Path, *, wal_checkpoint_seconds: float = WAL_CHECKPOINT_SECONDS,
                 wal_limit_bytes: int = WAL_LIMIT_BYTES, group_commit_seconds: float = GROUP_COMMIT_SECONDS) -> None:
        self.path = str(path)
        self._lock: ProcessLock | None = None
        self._checkpointer: WalCheckpointer | None = None
        self._queue: list[_Pending] = []  # commits for the next group write
        self.group_commit_seconds = group_commit_seconds  # see GROUP_COMMIT_SECONDS
        self._last_write = float("-inf")  # loop.time() when the last group write began
        self._timer: asyncio.TimerHandle | None = None  # the next group write, when it waits for the interval
        self._loop: asyncio.AbstractEventLoop | None = None  # the writer's: where the checkpointer resumes it
        self._gate = WriterGate()  # the checkpointer's (WalCheckpointer.gate) once it runs
        # Each task's unmoved tail (_append_tail): authoritative with the tail file, found again when it is opened.
        self._tails: dict[str, _Tail] = {}
        self._undo: list[tuple[str, _Tail | None]] = []  # (task, its tail before) for the group write under way
        self._tail_file = TailFile(None if self.path == ":memory:" else self.path)
        self._feed_end = 0  # the change feed's last position handed out (_position)
        self._in_transaction = False  # the group write under way began its SQLite transaction (_begin)
        if self.path != ":memory:":
            prepare_private_file(self.path)  # secrets live in it: 0600, in a 0700 directory made here
            self._lock = ProcessLock.acquire(self.path)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file only: an existing one keeps its own
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._migrate()
            self._feed_end = self._db.execute(f"SELECT {_FEED_END}").fetchone()[0]
            self._recover_tails()
            # tasks with push configs (one process per file: this set is exact, or larger after a delete)
            self._pushed = {row[0] for row in self._db.execute("SELECT DISTINCT task_id FROM push_configs")}
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        if self.path != ":memory:":
            # Commits in WAL mode with synchronous=NORMAL do not fsync; checkpoints do. They run on
            # a thread of their own so that the event loop never waits for the disk.
            self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._db.execute(f"PRAGMA journal_size_limit={wal_file_limit(wal_limit_bytes)}")
            self._checkpointer = WalCheckpointer(self.path, wal_checkpoint_seconds, wal_limit_bytes,
                                                 after_hold=self._resume_writes, tails=self._tail_file)
            self._gate = self._checkpointer.gate

    def _migrate(self) -> None:
        """Create the schema, or bring an older one up to SCHEMA_VERSION."""
        db = self._db
        version = db.execute("PRAGMA user_version").fetchone()[0]
        has_tasks = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='tasks'").fetchone()
        if version > SCHEMA_VERSION:
            raise StoreError(f"the task database {self.path} has schema {version}, written by a newer Parley "
                             f"(this one knows schema {SCHEMA_VERSION})")
        if version == SCHEMA_VERSION:
            return
        with db:
            db.execute("BEGIN IMMEDIATE")
            if has_tasks and version < 2:
                for statement in MIGRATE_1_TO_2.split(";"):
                    if statement.strip():
                        db.execute(statement)
            if has_tasks and version < 3:
                for statement in MIGRATE_2_TO_3.split(";"):
                    if statement.strip():
                        db.execute(statement)
            if has_tasks and version < 5:
                db.execute("DROP INDEX IF EXISTS tasks_by_owner")  # made again below, in ascending order
            if has_tasks and version < 6:
                db.execute("DROP TRIGGER IF EXISTS push_enqueue")  # commits fill the outbox themselves now
            if has_tasks and version < 8:  # every stored snapshot so far is complete: NULL says so
                db.execute("ALTER TABLE tasks ADD COLUMN snapshot_seq INTEGER")
            if has_tasks and version < 9:  # first_event_at: tasks stored before have none (NULL); the tail
                db.execute("ALTER TABLE tasks ADD COLUMN first_event_at REAL")
                db.execute("ALTER TABLE tasks ADD COLUMN tail_after INTEGER")
                if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='changes'").fetchone():
                    db.execute("ALTER TABLE changes ADD COLUMN entries BLOB")
                db.execute("DROP TRIGGER IF EXISTS task_changed")  # commits write their change rows (_CHANGED)
            if has_tasks and version < SCHEMA_VERSION:
                log.warning("migrated the task database %s to schema %d", self.path, SCHEMA_VERSION)
            if has_tasks and version < 11:
                db.execute("DROP TRIGGER IF EXISTS task_created")  # commits write their feed rows with positions
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            if has_tasks and version < 7:
                _entries_to_batches(db)
            if has_tasks and version < 9:  # no tails yet: none before the feed's end
                db.execute(f"UPDATE tasks SET tail_after={_FEED_END} WHERE state NOT IN {TERMINAL_SQL}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _recover_tails(self) -> None:
        """Move the tails a crash left into their logs, so that the store opens with none: the records of the tail
        files (tail_file), and the change-feed rows carrying entries of schemas 9 and 10. Then the tail files
        start over."""
        found = self._feed_tails()
        from_files = self._file_tails()
        if found or from_files:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                for task_id, tail in [*found.items(), *from_files.items()]:
                    self._move(task_id, tail.base_seq, tail.last_seq, tail.updated_at, tail.batches)
                    if task_id in from_files:  # the change it stood for (schema 10's tails have their rows)
                        self._db.execute(_CHANGED, (self._position(), task_id))
            log.info("moved the unfinished tails of %d task(s) into their logs", len(found) + len(from_files))
        if from_files and self.path != ":memory:":  # synced before the files holding them go
            self._db.execute("PRAGMA wal_checkpoint(FULL)")
        self._tail_file.start()

    def _feed_tails(self) -> dict[str, _Found]:
        """The tails schemas 9 and 10 kept as change-feed rows carrying entries, left by a crash."""
        db = self._db
        start = db.execute(f"SELECT min(coalesce(tail_after, 0)) FROM tasks WHERE state NOT IN {TERMINAL_SQL}")
        start = start.fetchone()[0]
        found: dict[str, _Found] = {}
        if start is None:
            return found
        rows = db.execute(
            "SELECT c.task_id, t.seq, c.seq, c.at, c.entries FROM changes c JOIN tasks t ON t.id = c.task_id "
            "WHERE c.pos > ? AND c.entries IS NOT NULL AND c.seq > t.seq ORDER BY c.pos", (start,)).fetchall()
        for task_id, base, seq, at, stored in rows:
            tail = found.get(task_id)
            if tail is None:
                found[task_id] = _Found(base, seq, at, [bytes(stored)])
            else:
                tail.batches.append(restore(bytes(stored), tail.batches[0]))
                tail.last_seq, tail.updated_at = seq, at
        return found

    def _file_tails(self) -> dict[str, _Found]:
        """The tails in the tail files: each task's records that follow on from its row's seq, one after the other
        (a record its task's row already holds moved with its tail; one that does not follow on belonged to a group
        write whose transaction never committed)."""
        records = list(self._tail_file.recover())
        if not records:
            return {}
        ids = list({r.task_id: None for r in records})
        rows: dict[str, tuple[str, int]] = {}
        for i in range(0, len(ids), _BATCH):
            batch = ids[i:i + _BATCH]
            rows.update((task_id, (state, seq)) for task_id, state, seq in self._db.execute(
                f"SELECT id, state, seq FROM tasks WHERE id IN ({','.join('?' * len(batch))})", batch))
        found: dict[str, _Found] = {}
        for r in records:
            row = rows.get(r.task_id)
            if row is None or row[0] in _TERMINAL_VALUES:
                continue
            tail = found.get(r.task_id)
            if r.expected_seq != (row[1] if tail is None else tail.last_seq):
                continue
            if tail is None:
                found[r.task_id] = _Found(row[1], r.last_seq, r.at, [r.entries])
            else:
                tail.batches.append(restore(r.entries, tail.batches[0]))
                tail.last_seq, tail.updated_at = r.last_seq, r.at
        return found

    def _record(self, row: tuple) -> TaskRecord:
        agent_id, owner, snapshot, seq, created, updated, parent, snapshot_seq, first_event = row
        task = _task_dec.decode(snapshot)
        tail = self._tails.get(task.id) if self._tails else None
        if tail is not None:  # the artifact updates of its tail: folded in as those after a lagging snapshot
            snapshot_seq = seq if snapshot_seq is None else snapshot_seq
            seq, updated = tail.last_seq, tail.updated_at
        if snapshot_seq is not None and snapshot_seq < seq:  # the artifact updates since: folded in
            task = fold(task, [e.event for e in self._entries_after(task.id, snapshot_seq) if e.seq <= seq])
        return TaskRecord(task=task, agent_id=agent_id, owner=owner, seq=seq,
                          created_at=created, updated_at=updated, parent_task_id=parent, first_event_at=first_event)

    # --- writing ---------------------------------------------------------------------------------

    async def commit(self, commit: Commit) -> None:
        """Queue the commit for the next group write (one transaction for every commit queued until it runs, each
        in a savepoint of its own when there are several, but a streamed token's: _try_apply) and wait until it is
        written or refused. The group write runs at the next loop turn, or `group_commit_seconds` after the
        previous one began if that is later (:meth:`_schedule_write`)."""
        check_commit(commit)
        self._loop = loop = asyncio.get_running_loop()
        snapshot = _enc.encode(commit.snapshot) if stores_snapshot(commit) else None  # now: the caller goes on
        pending = _Pending(commit, snapshot, _log_rows(commit.entries), loop.create_future())
        self._queue.append(pending)
        if len(self._queue) == 1 and self._timer is None:
            self._schedule_write(loop)
        try:
            await pending.done
        except asyncio.CancelledError:
            if pending in self._queue:  # not written (the cancel cancelled its future): it never will be
                self._queue.remove(pending)
                raise
            # Written (or refused) already: report that, as a commit that had not waited would have; the caller
            # hears of its cancellation at its next await.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
                task.cancel()
        pending.done.result()

    def _schedule_write(self, loop: asyncio.AbstractEventLoop) -> None:
        """Have the queue written at the next loop turn, or, when the last group write began less than
        `group_commit_seconds` ago, that long after it (the commits queued until then join it)."""
        wait = self._last_write + self.group_commit_seconds - loop.time()
        if wait > 0:
            self._timer = loop.call_later(wait, self._timed_write)
        else:
            loop.call_soon(self._write_queue)

    def _timed_write(self) -> None:
        self._timer = None
        self._write_queue()

    def _write_queue(self) -> None:
        """Write every queued commit in one transaction (synchronously, on the event loop), unless a
        checkpoint holds SQLite's writer lock (see WalCheckpointer.gate)."""
        if not self._queue:
            return
        # A checkpoint holding the writer lock: the commits stay queued (the loop goes on), and the
        # checkpointer calls _resume_writes when it is done.
        if not self._gate.writer_enters():
            return
        try:
            self._write_batch()
        finally:
            self._gate.release()

    def _resume_writes(self) -> None:
        """Called on the checkpointer's thread after it held the writer lock: write what queued meanwhile."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing is waiting any more
                loop.call_soon_threadsafe(self._write_queue)

    @contextlib.asynccontextmanager
    async def _writing(self) -> AsyncIterator[sqlite3.Connection]:
        """The writer gate, for a write outside the group writes (leases, retention, push configs and
        deliveries): while a checkpoint holds SQLite's writer lock, wait here, the event loop going on, instead
        of in SQLite's busy handler, which sleeps on the loop. The body must not await (it holds a thread lock)."""
        while not self._gate.writer_enters():
            await asyncio.sleep(GATE_POLL_SECONDS)
        try:
            with self._db:  # commits what the body began, or rolls it back when the body raises
                yield self._db
        finally:
            self._gate.release()

    def _write_batch(self) -> None:
        """Every queued commit in one transaction; each hears of its outcome."""
        batch = [p for p in self._queue if not p.done.cancelled()]
        self._queue = []
        if self._loop is not None:
            self._last_write = self._loop.time()
        db = self._db
        outcomes: list[BaseException | None] = []
        self._undo = []
        self._in_transaction = False
        try:
            try:
                shared = len(batch) > 1  # alone, a refused commit needs no savepoint: the transaction rolls back
                for pending in batch:
                    outcomes.append(self._try_apply(pending, shared))
                # The tails' records first: a crash before the COMMIT leaves records that do not follow on from
                # their tasks' rows, which recovery passes over (_file_tails).
                self._tail_file.write()
                if self._in_transaction:
                    db.execute("ROLLBACK" if len(batch) == 1 and outcomes[0] is not None else "COMMIT")
            except BaseException:
                self._undo_tails(0)
                self._tail_file.discard()
                if self._in_transaction:
                    db.execute("ROLLBACK")
                raise
        except Exception as exc:  # noqa: BLE001 - the database failed: every commit of the batch hears of it
            outcomes = [exc] * len(batch)
        self._undo = []
        self._in_transaction = False
        for pending, outcome in zip(batch, outcomes, strict=True):
            if outcome is None:
                pending.done.set_result(None)
            else:
                pending.done.set_exception(outcome)
        if self._tail_file.full():
            self._rotate_tails()

    def _set_tail(self, task_id: str, tail: _Tail | None) -> None:
        """Replace the task's tail (None: it has none), undoably until the group write commits."""
        self._undo.append((task_id, self._tails.get(task_id)))
        if tail is None:
            del self._tails[task_id]
        else:
            self._tails[task_id] = tail

    def _undo_tails(self, mark: int) -> None:
        """Put back the tails as they were before the undo log's entry `mark` (a commit rolled back)."""
        while len(self._undo) > mark:
            task_id, tail = self._undo.pop()
            if tail is None:
                self._tails.pop(task_id, None)
            else:
                self._tails[task_id] = tail

    def _try_apply(self, pending: _Pending, shared: bool) -> SequenceConflict | DuplicateMessage | None:
        """Apply one commit; its refusal, if refused, with what it wrote undone: by a savepoint when other commits
        `shared` the transaction, else by the caller's rollback. A streamed token's commit takes no savepoint (two
        statements fewer): it is refused, if at all, before it writes anything (_append_tail)."""
        mark = len(self._undo)
        try:
            if self._to_tail(pending):
                return None
        except SequenceConflict as refused:
            return refused
        self._begin()
        if shared:
            self._db.execute("SAVEPOINT one")
        try:
            self._apply(pending)
        except (SequenceConflict, DuplicateMessage) as refused:
            if shared:
                self._db.execute("ROLLBACK TO one")
                self._db.execute("RELEASE one")
            self._undo_tails(mark)
            return refused
        if shared:
            self._db.execute("RELEASE one")
        return None

    def _begin(self) -> None:
        """Begin the group write's SQLite transaction, unless it did (a group of streamed tokens alone needs none:
        their records go to the tail file)."""
        if not self._in_transaction:
            self._db.execute("BEGIN IMMEDIATE")
            self._in_transaction = True

    def _position(self) -> int:
        """The next change-feed position (the feed's rows are written with theirs; a tail's commit takes one for
        the change it stands for). Positions only grow while the process runs; one a rolled-back commit took is
        skipped. At open they go on from the feed's last row."""
        self._feed_end += 1
        return self._feed_end

    def _to_tail(self, pending: _Pending) -> bool:
        """Append the commit to its task's tail if it may go there (a streamed token's: _tail_only, and no webhook
        wants its entries one by one); False: it is written whole (_apply)."""
        c = pending.commit
        if pending.snapshot is not None or len(pending.rows) != 1 or not _tail_only(c) or c.task_id in self._pushed:
            return False
        tail = self._tails.get(c.task_id) if self._tails else None
        return (tail is None or tail.count + len(c.entries) <= ROW_ENTRIES) and self._append_tail(pending, tail)

    def _apply(self, pending: _Pending) -> None:
        """The statements of one commit written whole, inside the group transaction."""
        c = pending.commit
        t = c.snapshot
        snapshot = pending.snapshot
        db = self._db
        tail = self._tails.get(c.task_id) if self._tails else None
        base_seq = c.expected_seq  # what the task row's seq must be
        if tail is not None:  # its entries go to the log before this commit's, the task row catches up below
            if c.expected_seq != tail.last_seq:
                raise SequenceConflict(c.task_id, c.expected_seq, tail.last_seq)
            db.execute("INSERT INTO entry_batches (task_id, last_seq, entries) VALUES (?,?,?)",
                       (c.task_id, tail.last_seq, pack_log_row(tail.whole(self._tail_file))))
            self._set_tail(c.task_id, None)
            base_seq = tail.base_seq
        if c.record is not None:
            r = c.record
            lease = (c.lease.holder, c.lease.expires_at) if c.lease is not None else (None, None)
            try:
                db.execute(
                    f"INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,?,{_FEED_END})",
                    (t.id, r.agent_id, r.owner, t.context_id, t.status.state.value, t.status.timestamp,
                     snapshot, c.last_seq, r.created_at, c.updated_at, r.parent_task_id, *lease, first_event_at(c)),
                )
            except sqlite3.IntegrityError:
                raise SequenceConflict(c.task_id, 0, self._seq(c.task_id)) from None
            db.execute(_CHANGED, (self._position(), c.task_id))
        else:
            if c.lease is not None:
                lease_sql, lease_args = ", lease_holder=?, lease_expires=?", [c.lease.holder, c.lease.expires_at]
            elif c.release_lease:
                lease_sql, lease_args = ", lease_holder=NULL, lease_expires=NULL", []
            else:
                lease_sql, lease_args = "", []
            if snapshot is None:  # artifact updates only: state and snapshot stay, readers fold the log since
                cur = db.execute(
                    f"UPDATE tasks SET seq=?, updated_at=?, snapshot_seq=coalesce(snapshot_seq, ?), "
                    f"tail_after={_FEED_END}{lease_sql} WHERE id=? AND seq=?",
                    [c.last_seq, c.updated_at, base_seq, *lease_args, c.task_id, base_seq],
                )
            else:
                cur = db.execute(
                    f"UPDATE tasks SET state=?, status_ts=?, snapshot=?, snapshot_seq=NULL, seq=?, updated_at=?, "
                    f"tail_after={_FEED_END}{lease_sql} WHERE id=? AND seq=?",
                    [t.status.state.value, t.status.timestamp, snapshot, c.last_seq, c.updated_at, *lease_args,
                     c.task_id, base_seq],
                )
            if cur.rowcount != 1:
                raise SequenceConflict(c.task_id, c.expected_seq, self._seq(c.task_id))
            if c.expected_seq == 1:  # the task's first event after the Task: once per task, its row's page is dirty
                db.execute("UPDATE tasks SET first_event_at=? WHERE id=?", (c.updated_at, c.task_id))
            db.execute(_CHANGED, (self._position(), c.task_id))
        if c.message is not None:
            k = c.message
            cur = db.execute("INSERT INTO message_ids VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
                             (k.agent_id, k.owner, k.message_id, k.fingerprint, c.task_id))
            if cur.rowcount != 1:
                raise DuplicateMessage(self._message(k) or "?")
        if c.push_configs:  # before the entries: the outbox trigger reads them
            db.executemany("INSERT OR REPLACE INTO push_configs VALUES (?,?,?,?,?,?,?)",
                           [_push_row(p) for p in c.push_configs])
            self._pushed.add(c.task_id)
        for last_seq, batch in pending.rows:  # one row, unless the commit has over ROW_ENTRIES entries
            db.execute("INSERT INTO entry_batches (task_id, last_seq, entries) VALUES (?,?,?)",
                       (c.task_id, last_seq, batch))
        if c.task_id in self._pushed:  # the outbox, in this transaction (see _ENQUEUE)
            db.executemany(_ENQUEUE, [(c.task_id, e.seq, kind) for e in c.entries if (kind := e.kind) in _NOTIFIED])
        if c.checkpoint is not None:
            db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?,?)", (c.task_id, _enc.encode(c.checkpoint)))
        elif c.drop_checkpoint:
            db.execute("DELETE FROM checkpoints WHERE task_id=?", (c.task_id,))
        if c.links:
            db.executemany(
                "INSERT OR IGNORE INTO task_links VALUES (?,?,?,?,?)",
                [(k.parent_task_id, k.child_url, k.child_task_id, k.agent, k.created_at) for k in c.links],
            )

    def _append_tail(self, pending: _Pending, tail: _Tail | None) -> bool:
        """Stage a commit of artifact updates only as one record of the tail file: a streamed token's commit then
        writes no database page (the task row, its ListTasks entry and the log are written when the tail moves
        into the log: _apply, _move_tails). The compare-and-set is checked against the tail held here, before
        anything is staged (so _try_apply gives it no savepoint). False: the task cannot take a tail (it is
        finished); commit it whole."""
        c = pending.commit
        if tail is None:
            row = self._db.execute("SELECT agent_id, owner, state, seq, updated_at FROM tasks WHERE id=?",
                                   (c.task_id,)).fetchone()
            if row is None:
                raise SequenceConflict(c.task_id, c.expected_seq, None)
            agent_id, owner, state, seq, updated_at = row
            if state in _TERMINAL_VALUES:
                return False
            tail = _Tail(agent_id, owner, state, seq, seq, updated_at, None, array("q"), 0)
        if c.expected_seq != tail.last_seq:
            raise SequenceConflict(c.task_id, c.expected_seq, tail.last_seq)
        batch = pending.rows[0][1]
        stored = elide(batch, tail.first) if tail.first is not None else batch  # the first stays whole: log_packing
        ref = self._tail_file.stage(TailRecord(c.task_id, c.expected_seq, c.last_seq, c.updated_at, stored))
        self._set_tail(c.task_id, tail.then(ref, self._position(), c.last_seq, c.updated_at, batch, len(c.entries)))
        return True

    def _move_tails(self, task_ids: Collection[str] | None = None) -> None:
        """Move every tail (or those of `task_ids`) into its task's log, inside the caller's transaction (the caller
        drops them from `_tails` once it committed). The change the tail stood for becomes a feed row at its
        position, so that the feed still has it once the tail is gone."""
        for task_id in self._tails if task_ids is None else task_ids:
            tail = self._tails[task_id]
            self._move(task_id, tail.base_seq, tail.last_seq, tail.updated_at, tail.whole(self._tail_file))
            self._db.execute(_CHANGED, (tail.pos, task_id))

    def _move(self, task_id: str, base_seq: int, last_seq: int, updated_at: float, batches: list[bytes]) -> None:
        """A tail's entries (each commit's whole) as one log row, and the task row caught up with them."""
        db = self._db
        db.execute("INSERT INTO entry_batches (task_id, last_seq, entries) VALUES (?,?,?)",
                   (task_id, last_seq, pack_log_row(batches)))
        db.execute(f"UPDATE tasks SET seq=?, updated_at=?, snapshot_seq=coalesce(snapshot_seq, ?), "
                   f"tail_after={_FEED_END} WHERE id=? AND seq=?", (last_seq, updated_at, base_seq, task_id, base_seq))

    def _rotate_tails(self) -> None:
        """The tail file's segment is full: append to a new one, move the tails that began two segments back or
        more into their logs, and retire those segments (deleted once a checkpoint synced the move). A tail of a
        task that pauses for long (a tool call) is moved so, instead of keeping old segments."""
        tails = self._tail_file
        try:
            tails.rotate()
        except OSError:  # no new file (the disk is full, no file descriptor left): this one grows, tried again later
            log.warning("could not start a new tail file after %s%d", tails.base, tails.active, exc_info=True)
            return
        keep_from = tails.active - 1
        old = [task_id for task_id, tail in self._tails.items() if tail.segment < keep_from]
        if old:
            try:
                with self._db:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._move_tails(old)
            except sqlite3.Error:  # the segments stay until the next rotation moves these tails
                log.warning("could not move %d tail(s) out of an old tail file", len(old), exc_info=True)
                return
            for task_id in old:
                del self._tails[task_id]
        tails.retire([segment for segment in tails.live() if segment < keep_from])

    async def _flush_tails(self) -> None:
        """Move every tail into its task's log now (before lease recovery reads the task rows, at close)."""
        if not self._tails:
            return
        async with self._writing():
            self._db.execute("BEGIN IMMEDIATE")
            self._move_tails()
        self._tails.clear()  # committed (no await since)

    def _seq(self, task_id: str) -> int | None:
        tail = self._tails.get(task_id)
        if tail is not None:
            return tail.last_seq
        row = self._db.execute("SELECT seq FROM tasks WHERE id=?", (task_id,)).fetchone()
        return row[0] if row else None

    def _message(self, key: MessageKey) -> str | None:
        row = self._db.execute(
            "SELECT task_id FROM message_ids WHERE agent_id=? AND owner=? AND message_id=? AND fingerprint=?",
            (key.agent_id, key.owner, key.message_id, key.fingerprint),
        ).fetchone()
        return row[0] if row else None

    # --- reading ---------------------------------------------------------------------------------

    async def get(self, task_id: str, *, agent_id: str | None = None, owner: str | None = None) -> TaskRecord | None:
        sql, args = f"SELECT {_RECORD} FROM tasks WHERE id=?", [task_id]
        if agent_id is not None:
            sql, args = sql + " AND agent_id=?", [*args, agent_id]
        if owner is not None:
            sql, args = sql + " AND owner=?", [*args, owner]
        row = self._db.execute(sql, args).fetchone()
        return self._record(row) if row else None

    async def events_after(self, task_id: str, seq: int, limit: int | None = None) -> list[Entry]:
        return self._entries_after(task_id, seq, limit)

    def _entries_after(self, task_id: str, seq: int, limit: int | None = None) -> list[Entry]:
        out: list[Entry] = []
        tail = self._tails.get(task_id) if self._tails else None
        if tail is None or seq < tail.base_seq:
            # the rows holding entries after `seq`, in order, read one by one: as many as `limit` needs
            rows = self._db.execute(
                "SELECT entries FROM entry_batches WHERE task_id=? AND last_seq>? ORDER BY last_seq", (task_id, seq))
            try:
                for (batch,) in rows:
                    out.extend(e for e in decode_entries(unpack_log_row(batch)) if e.seq > seq)
                    if limit is not None and len(out) >= limit:
                        return out[:limit]
            finally:
                rows.close()  # a statement left open would hold its read transaction
        if tail is not None:  # then the tail's, held here
            for batch in tail.whole(self._tail_file):
                out.extend(e for e in decode_entries(batch) if e.seq > seq)
                if limit is not None and len(out) >= limit:
                    return out[:limit]
        return out

    async def list(self, query: TaskQuery) -> TaskPage:
        where = ["1=1"]
        args: list = []
        for column, value in (("agent_id", query.agent_id), ("owner", query.owner)):
            if value is not None:
                where.append(f"{column}=?")
                args.append(value)
        if query.context_id is not None:
            where.append("context_id=?")
            args.append(query.context_id)
        if query.state is not None:
            where.append("state=?")
            args.append(query.state.value)
        if query.status_after is not None:
            where.append("status_ts>=?")
            args.append(query.status_after)
        cond = " AND ".join(where)
        total = self._db.execute(f"SELECT COUNT(*) FROM tasks WHERE {cond}", args).fetchone()[0] if query.count else -1
        created = query.order == "created"
        if self._tails and not created:  # some rows' updated_at is older than their task's: see _ids_by_update
            return self._page_of_ids(self._ids_by_update(cond, args, query), query, created, total)
        page_args = list(args)
        if query.cursor is not None and created:
            cond += " AND id < ?"
            page_args.append(query.cursor[1])
        elif query.cursor is not None:
            cond += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            page_args += [query.cursor[0], query.cursor[0], query.cursor[1]]
        order = "id DESC" if created else "updated_at DESC, id DESC"
        if query.max_bytes is not None:
            ids = self._db.execute(f"SELECT id FROM tasks WHERE {cond} ORDER BY {order} LIMIT ?",
                                   [*page_args, query.page_size + 1]).fetchall()
            return self._page_of_ids([r[0] for r in ids], query, created, total)
        rows = self._db.execute(
            f"SELECT {_RECORD} FROM tasks WHERE {cond} ORDER BY {order} LIMIT ?",
            [*page_args, query.page_size + 1],
        ).fetchall()
        records = [self._record(r) for r in rows[: query.page_size]]
        return _page(records, len(rows) > query.page_size, created, total)

    def _ids_by_update(self, cond: str, args: list, query: TaskQuery) -> list[str]:
        """The ids of a page's candidates (page_size + 1 at most), newest update first, while tasks have tails: a
        tail's task was last updated when its tail was (its row says when the tail began). ListTasks orders by
        last update (A2A spec 3.1.4); the tails stay where they are (moving them all first held the event loop
        ~100-170 ms with 1,000 streams open, each call: bench/RESULTS.md). Its rows' candidates: the page's
        count plus as many as there are tails, by their rows' order, since the tails' tasks among them are
        left out; then the tails' tasks the query matches, by their tails' updates."""
        tails = self._tails
        want = query.page_size + 1
        page_cond, page_args = cond, list(args)
        if query.cursor is not None:
            page_cond += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            page_args += [query.cursor[0], query.cursor[0], query.cursor[1]]
        rows = self._db.execute(f"SELECT updated_at, id FROM tasks WHERE {page_cond} "
                                "ORDER BY updated_at DESC, id DESC LIMIT ?", [*page_args, want + len(tails)])
        keys = [(updated_at, task_id) for updated_at, task_id in rows if task_id not in tails]
        tailed = list(tails)
        for i in range(0, len(tailed), _BATCH):
            batch = tailed[i:i + _BATCH]
            for (task_id,) in self._db.execute(
                    f"SELECT id FROM tasks WHERE {cond} AND id IN ({','.join('?' * len(batch))})", [*args, *batch]):
                key = (tails[task_id].updated_at, task_id)
                if query.cursor is None or key < query.cursor:
                    keys.append(key)
        keys.sort(reverse=True)
        return [task_id for _, task_id in keys[:want]]

    def _page_of_ids(self, ids: list[str], query: TaskQuery, created: bool, total: int) -> TaskPage:
        """The page of candidates `ids` (in page order, page_size + 1 at most): as many as the page takes (under
        `max_bytes` by their stored sizes: length() reads no snapshot), read whole."""
        if query.max_bytes is not None:
            sizes = dict(self._by_ids("id, length(snapshot)", ids))
            taken = ids[: within_bytes([sizes.get(task_id, 0) for task_id in ids], query)]
        else:
            taken = ids[: query.page_size]
        found = {r[-1]: r[:-1] for r in self._by_ids(f"{_RECORD}, id", taken)}
        records = [self._record(found[task_id]) for task_id in taken if task_id in found]
        return _page(records, len(ids) > len(taken), created, total)

    def _by_ids(self, columns: str, ids: list[str]) -> list[tuple]:
        """`columns` of the tasks `ids`, in no particular order."""
        return [r for i in range(0, len(ids), _BATCH) for r in self._db.execute(
            f"SELECT {columns} FROM tasks WHERE id IN ({','.join('?' * len(ids[i:i + _BATCH]))})",
            ids[i:i + _BATCH]).fetchall()]

    async def find_message(self, key: MessageKey) -> str | None:
        return self._message(key)

    async def get_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT state FROM checkpoints WHERE task_id=?", (task_id,)).fetchone()
        return msgspec.json.decode(row[0]) if row else None

    async def links(self, task_id: str) -> list[TaskLink]:
        rows = self._db.execute(
            "SELECT parent_task_id, child_url, child_task_id, agent, created_at FROM task_links "
            "WHERE parent_task_id=? ORDER BY created_at, child_task_id",
            (task_id,),
        ).fetchall()
        return [TaskLink(*row) for row in rows]

    async def changes_after(self, position: int, limit: int = 1000) -> list[Change]:
        rows = self._db.execute(
            "SELECT pos, task_id, agent_id, owner, seq, state, at FROM changes WHERE pos>? ORDER BY pos LIMIT ?",
            (position, limit),
        ).fetchall()
        changes = [Change(p, t, a, o, s, m.TaskState(st), at) for p, t, a, o, s, st, at in rows]
        tailed = [Change(t.pos, task_id, t.agent_id, t.owner, t.last_seq, m.TaskState(t.state), t.updated_at)
                  for task_id, t in self._tails.items() if t.pos > position] if self._tails else []
        if not tailed:
            return changes
        # Each tail's newest commit, in order among the rows (one that comes after the rows read waits for the
        # next read: cut at `limit` the first ones come before any row left out).
        return sorted([*changes, *tailed], key=lambda c: c.position)[:limit]

    # --- leases ----------------------------------------------------------------------------------

    async def lease(self, task_id: str) -> Lease | None:
        row = self._db.execute("SELECT lease_holder, lease_expires FROM tasks WHERE id=?", (task_id,)).fetchone()
        return Lease(row[0], row[1]) if row and row[0] is not None else None

    async def renew_leases(self, holder: str, task_ids: list[str], expires_at: float) -> set[str]:
        held: set[str] = set()
        async with self._writing():
            self._db.execute("BEGIN")
            for i in range(0, len(task_ids), _BATCH):
                batch = task_ids[i: i + _BATCH]
                marks = ",".join("?" * len(batch))
                self._db.execute(f"UPDATE tasks SET lease_expires=? WHERE lease_holder=? AND id IN ({marks})",
                                 [expires_at, holder, *batch])
                rows = self._db.execute(f"SELECT id FROM tasks WHERE lease_holder=? AND id IN ({marks})",
                                        [holder, *batch]).fetchall()
                held.update(r[0] for r in rows)
        return held

    async def release_leases(self, holder: str, task_ids: list[str]) -> None:
        async with self._writing():
            self._db.execute("BEGIN")
            for i in range(0, len(task_ids), _BATCH):
                batch = task_ids[i: i + _BATCH]
                marks = ",".join("?" * len(batch))
                self._db.execute(f"UPDATE tasks SET lease_holder=NULL, lease_expires=NULL "
                                 f"WHERE lease_holder=? AND id IN ({marks})", [holder, *batch])

    async def claim_orphans(self, holder: str, now: float, expires_at: float, *,
                            any_other_holder: bool = False) -> list[TaskRecord]:
        # A full scan, and no index kept for it: every commit would pay for an index this query alone
        # uses, while it runs once at start-up (one process per file: nobody else's lease can expire).
        cond = f"state IN {_UNFINISHED_SQL} AND (lease_holder IS NULL OR lease_expires <= ?"
        args: list[Any] = [now]
        if any_other_holder:
            cond += " OR lease_holder != ?"
            args.append(holder)
        cond += ")"
        await self._flush_tails()
        async with self._writing():
            self._db.execute("BEGIN IMMEDIATE")
            rows = self._db.execute(f"SELECT id, {_RECORD} FROM tasks WHERE {cond}", args).fetchall()
            ids = [r[0] for r in rows]
            for i in range(0, len(ids), _BATCH):
                batch = ids[i: i + _BATCH]
                self._db.execute(f"UPDATE tasks SET lease_holder=?, lease_expires=? "
                                 f"WHERE id IN ({','.join('?' * len(batch))})", [holder, expires_at, *batch])
        return [self._record(r[1:]) for r in rows]

    # --- retention -------------------------------------------------------------------------------

    async def prune(self, retention: Retention, *, now: float, limit: int = 200) -> int:
        # Synchronous from the first read to the commit: no other coroutine writes in between. A finished task has
        # no tail (its last commit moved it), and the tails are not in the feed (tail_file).
        async with self._writing() as db:
            ids = self._prunable(retention, limit)
            db.execute("BEGIN")
            for i in range(0, len(ids), _BATCH):
                batch = ids[i: i + _BATCH]
                marks = ",".join("?" * len(batch))
                db.execute(f"DELETE FROM push_attempts WHERE notification_id IN "
                           f"(SELECT id FROM push_outbox WHERE task_id IN ({marks}))", batch)
                for table, column in (("entry_batches", "task_id"), ("message_ids", "task_id"), ("checkpoints", "task_id"),
                                      ("task_links", "parent_task_id"), ("push_outbox", "task_id"),
                                      ("push_configs", "task_id"), ("tasks", "id")):
                    db.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", batch)
            db.execute(TRIM_CHANGES, (retention.changes_cutoff(now),))
        return len(ids)

    def _prunable(self, retention: Retention, limit: int) -> list[str]:
        """Up to `limit` ids of finished tasks `retention` lets go (oldest first); reads the tasks_finished index."""
        ids: dict[str, None] = {}
        if retention.finished_before is not None:
            rows = self._db.execute(f"SELECT id FROM tasks WHERE state IN {TERMINAL_SQL} AND updated_at < ? "
                                    "ORDER BY updated_at LIMIT ?", (retention.finished_before, limit)).fetchall()
            ids.update((r[0], None) for r in rows)
        if retention.keep_finished is not None and len(ids) < limit:
            finished = self._db.execute(f"SELECT count(*) FROM tasks WHERE state IN {TERMINAL_SQL}").fetchone()[0]
            excess = finished - retention.keep_finished
            if excess > 0:  # the oldest of them (some may be among the ids above already)
                rows = self._db.execute(f"SELECT id FROM tasks WHERE state IN {TERMINAL_SQL} "
                                        "ORDER BY updated_at LIMIT ?", (min(limit, excess),)).fetchall()
                ids.update((r[0], None) for r in rows)
        return list(ids)[:limit]

    # --- push configs and the outbox --------------------------------------------------------------

    def may_notify(self, task_id: str) -> bool:
        return task_id in self._pushed

    async def put_push_config(self, config: m.TaskPushNotificationConfig | StoredPushConfig) -> None:
        stored = config if isinstance(config, StoredPushConfig) else StoredPushConfig(config)
        async with self._writing():
            self._db.execute("INSERT OR REPLACE INTO push_configs VALUES (?,?,?,?,?,?,?)", _push_row(stored))
        self._pushed.add(stored.config.task_id)

    async def get_push_config(self, task_id: str, config_id: str) -> m.TaskPushNotificationConfig | None:
        row = self._db.execute(
            "SELECT config FROM push_configs WHERE task_id=? AND id=?", (task_id, config_id)
        ).fetchone()
        return _push_dec.decode(row[0]) if row else None

    async def list_push_configs(self, task_id: str) -> list[m.TaskPushNotificationConfig]:
        rows = self._db.execute("SELECT config FROM push_configs WHERE task_id=? ORDER BY id", (task_id,)).fetchall()
        return [_push_dec.decode(r[0]) for r in rows]

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        async with self._writing():
            self._db.execute("BEGIN")
            cur = self._db.execute("DELETE FROM push_configs WHERE task_id=? AND id=?", (task_id, config_id))
            self._db.execute(f"UPDATE push_outbox SET state='dropped', done_at={_NOW} "
                             "WHERE task_id=? AND config_id=? AND state='pending'", (task_id, config_id))
        return cur.rowcount > 0

    async def push_target(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        row = self._db.execute(
            "SELECT config, version, artifacts, created_at, disabled_at FROM push_configs WHERE task_id=? AND id=?",
            (task_id, config_id)).fetchone()
        if row is None:
            return None
        return StoredPushConfig(_push_dec.decode(row[0]), row[1], bool(row[2]), row[3], row[4])

    async def disable_push_config(self, task_id: str, config_id: str, at: float) -> None:
        async with self._writing():
            self._db.execute("BEGIN")
            self._db.execute("UPDATE push_configs SET disabled_at=? WHERE task_id=? AND id=?", (at, task_id, config_id))
            self._db.execute("UPDATE push_outbox SET state='disabled', done_at=? "
                             "WHERE task_id=? AND config_id=? AND state='pending'", (at, task_id, config_id))

    async def due_notifications(self, now: float, limit: int, busy: set[tuple[str, str]],
                                skip_owners: Collection[str] = ()) -> list[Notification]:
        # The oldest pending row of each (task, config) lane; it is due when its next_at has come.
        skip, args = _skipping(skip_owners)
        rows = self._db.execute(
            f"SELECT {_NOTIFICATION} FROM push_outbox o WHERE o.state='pending' AND o.id = ("
            "  SELECT min(p.id) FROM push_outbox p WHERE p.task_id=o.task_id AND p.config_id=o.config_id"
            f"  AND p.state='pending') AND o.next_at <= ?{skip} ORDER BY o.next_at, o.id LIMIT ?",
            (now, *args, limit + len(busy))).fetchall()
        out = [Notification(*r) for r in rows]
        return [n for n in out if (n.task_id, n.config_id) not in busy][:limit]

    async def next_notification_at(self, busy: set[tuple[str, str]],
                                   skip_owners: Collection[str] = ()) -> float | None:
        skip, args = _skipping(skip_owners)
        rows = self._db.execute(
            "SELECT o.task_id, o.config_id, o.next_at FROM push_outbox o WHERE o.state='pending' AND o.id = ("
            "  SELECT min(p.id) FROM push_outbox p WHERE p.task_id=o.task_id AND p.config_id=o.config_id"
            f"  AND p.state='pending'){skip} ORDER BY o.next_at LIMIT ?", (*args, len(busy) + 1)).fetchall()
        return next((at for task_id, config_id, at in rows if (task_id, config_id) not in busy), None)

    async def record_attempt(self, attempt: DeliveryAttempt, notification: Notification) -> None:
        a, n = attempt, notification
        async with self._writing():
            self._db.execute("BEGIN")
            self._db.execute("INSERT OR REPLACE INTO push_attempts VALUES (?,?,?,?,?,?,?,?)",
                             (a.notification_id, a.attempt, a.at, a.status, a.error, a.duration, a.outcome,
                              a.next_at))
            self._db.execute("UPDATE push_outbox SET attempts=?, next_at=?, state=?, last_status=?, last_error=?, "
                             "done_at=? WHERE id=? AND state='pending'",
                             (n.attempts, n.next_at, n.state, n.last_status, n.last_error, n.done_at, n.id))

    async def recent_attempts(self, agent_id: str, since: float, limit: int) -> list[DeliveryAttempt]:
        rows = self._db.execute(
            "SELECT a.* FROM push_attempts a JOIN push_outbox o ON o.id = a.notification_id "
            "JOIN tasks t ON t.id = o.task_id WHERE a.at >= ? AND t.agent_id = ? "
            "ORDER BY a.at DESC, a.notification_id DESC, a.attempt DESC LIMIT ?", (since, agent_id, limit)).fetchall()
        return [DeliveryAttempt(*r) for r in rows]

    async def push_log(self, task_id: str) -> tuple[list[Notification], list[DeliveryAttempt]]:
        rows = self._db.execute(f"SELECT {_NOTIFICATION} FROM push_outbox o WHERE o.task_id=? ORDER BY o.id",
                                (task_id,)).fetchall()
        notifications = [Notification(*r) for r in rows]
        attempts = self._db.execute(
            "SELECT a.* FROM push_attempts a JOIN push_outbox o ON o.id = a.notification_id "
            "WHERE o.task_id=? ORDER BY a.notification_id, a.attempt", (task_id,)).fetchall()
        return notifications, [DeliveryAttempt(*r) for r in attempts]

    async def _write_now(self) -> None:
        """Write the queued commits now, not when their group write's interval is over (close)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._queue:
            self._write_queue()
            if self._queue:  # a checkpoint holds the writer lock (see _writing)
                await asyncio.sleep(GATE_POLL_SECONDS)

    async def close(self) -> None:
        await self._write_now()  # nobody waits for a group write's interval on a closed store
        with contextlib.suppress(Exception):  # else the next open moves them (_recover_tails)
            await self._flush_tails()
        if self._checkpointer is not None:
            self._checkpointer.stop()  # its last checkpoint syncs the moves
            self._checkpointer = None
        if self._tails:
            self._tail_file.close()  # kept for the next open
        else:
            self._tail_file.delete_all()
        self._db.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None


class ProcessLock:
    """An exclusive advisory lock (flock) on `<db>.lock`, naming its holder inside the file.

    The kernel drops it when the process ends, however it ends (SIGKILL included), so a
    crashed server never blocks the next start.
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def acquire(cls, db_path: str) -> ProcessLock:
        """Take the lock of `db_path`; StoreError naming the holder if another process has it."""
        path = db_path + ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown process"
            os.close(fd)
            raise StoreError(f"the task database {db_path} is in use by another Parley process ({holder}); "
                             "stop that process first, or give this one another --db") from None
        except OSError:
            os.close(fd)
            raise
        info = f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Drop the lock (the file stays: removing it would race with a process opening it)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def wal_file_limit(limit: int) -> int:
    """The size a WAL file is cut back to when it starts over (`journal_size_limit`): twice the content at
    which a checkpoint round starts it over, so that in steady use it is reused and never cut."""
    return 2 * int(limit)


class WriterGate:
    """SQLite's writer lock as this process takes it: the store holds it for each write, the checkpointer for a
    checkpoint that takes SQLite's writer lock (RESTART, TRUNCATE), so that neither waits inside SQLite's busy
    handler. It counts the writer's entries: a checkpoint round tells an idle writer from a busy one by them."""

    __slots__ = ("_lock", "writes")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writes = 0  # how many times the writer entered (read by the checkpointer's thread)

    def writer_enters(self) -> bool:
        """For the store's writer: take the gate if it is free (True), counting the entry; False if a checkpoint
        holds it."""
        if not self._lock.acquire(blocking=False):
            return False
        self.writes += 1
        return True

    def acquire(self, blocking: bool = True) -> bool:
        """Take the gate (the checkpointer, or a test standing in for a write); not counted as a write."""
        return self._lock.acquire(blocking)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> Self:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class WalCheckpointer:
    """Keeps the WAL small, on a daemon thread: every `interval` seconds a PASSIVE checkpoint copies what it
    can into the database file without blocking anyone. Once the WAL holds more than `limit` bytes of frames,
    a RESTART checkpoint (which holds the writer for the moment it takes to copy the last frames and sync
    the database file: 2 ms on one machine, 7-9 ms on the bench VM's slower disk) makes the next commit write the WAL
    from its start, reusing the file: it is not cut back (`journal_size_limit` is twice `limit`, a backstop
    after a burst), since truncating and growing it again cost the writer 3-4 ms each time on the slower
    machine (bench/RESULTS.md). When the writer was idle for a round (no write began, ended or was under way:
    `WriterGate.writes`), a TRUNCATE empties the file. Commits
    wait for those two without blocking the event loop (`gate`).

    Under steady writes a PASSIVE checkpoint never catches up with the end of the WAL, and SQLite only
    starts the WAL over once one has: without the RESTART it grows without bound (4 GB after 50,000 sends
    was measured). A TRUNCATE instead of the RESTART also bounds it, but holds the writer about 8 times as
    long (it syncs and truncates the file): commits waited 12-15 ms at the 99th percentile.
    """

    def __init__(self, path: str, interval: float = 0.25, limit: int = WAL_LIMIT_BYTES, *,
                 after_hold: Callable[[], None] | None = None, tails: TailFile | None = None) -> None:
        self.path = path
        self.after_hold = after_hold
        self.tails = tails  # the store's tail file: synced with the WAL, its retired segments deleted once synced
        self.wal = path + "-wal"
        self.interval = interval
        self.limit = limit
        self.restarts = 0  # how many RESTART checkpoints started the WAL over (tests, logs)
        self.truncations = 0  # how many TRUNCATE checkpoints emptied the WAL (tests, logs)
        # Held by the store's writer for each group write, and by this thread for a checkpoint that takes
        # SQLite's writer lock: neither waits for the other inside SQLite, whose busy handler sleeps 1, 2, 5,
        # 10 ms and more between tries. A writer that finds it taken leaves its commits queued (the event
        # loop goes on) and `after_hold` has them written when the checkpoint is done.
        self.gate = WriterGate()
        self._version: int | None = None
        self._writes = 0  # gate.writes at the last round
        self._frame_bytes = 4096 + 24  # a WAL frame: a page and its header (connect reads the page size)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="parley-wal-checkpoint", daemon=True)
        self._thread.start()

    def connect(self) -> sqlite3.Connection:
        """The checkpointing connection (its own: the writer's stays on the event loop)."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout=5000")
        db.execute(f"PRAGMA journal_size_limit={wal_file_limit(self.limit)}")
        self._frame_bytes = db.execute("PRAGMA page_size").fetchone()[0] + 24
        return db

    def _loop(self) -> None:
        db = self.connect()
        try:
            while not self._stop.wait(self.interval):
                self.round(db)
            retired = self.tails.take_retired() if self.tails is not None else []
            if self._checkpoint(db, "TRUNCATE") and self.tails is not None:
                self.tails.delete_retired(retired)
        finally:
            db.close()

    def round(self, db: sqlite3.Connection) -> None:
        """One checkpoint round (see the class docstring)."""
        tails = self.tails
        retired = tails.take_retired() if tails is not None else []  # their moves committed before the sync below
        if tails is not None:
            tails.sync()
        frames = self._passive(db)  # syncs the WAL first (synchronous=NORMAL)
        if tails is not None and retired:
            if frames >= 0:
                tails.delete_retired(retired)
            else:
                tails.give_back(retired)
        version = db.execute("PRAGMA data_version").fetchone()[0]  # changes when another connection commits
        # Idle: no write committed, began or is under way since the last round. A group write that outlasts a
        # round commits nothing meanwhile (data_version stays): taken for idle, it had a TRUNCATE (12-73 ms of
        # the writer lock, the WAL being large) follow it while streams waited (bench/RESULTS.md, 2026-11-28).
        writes = self.gate.writes
        idle = version == self._version and writes == self._writes and not self.gate.locked()
        self._version, self._writes = version, writes
        size = self._wal_size()
        used = frames * self._frame_bytes if frames >= 0 else size  # the file may be larger: it is reused
        mode = "RESTART" if used > self.limit else "TRUNCATE" if idle and size > 0 else None
        if mode is None:
            return
        with self.gate:
            done = self._checkpoint(db, mode)
        if self.after_hold is not None:
            self.after_hold()
        if done and mode == "RESTART":
            self.restarts += 1
        elif done and self._wal_size() == 0:
            self.truncations += 1

    def _wal_size(self) -> int:
        try:
            return os.path.getsize(self.wal)
        except OSError:
            return 0

    @staticmethod
    def _passive(db: sqlite3.Connection) -> int:
        """A PASSIVE checkpoint; the number of frames in the WAL since it last started over (-1: unknown)."""
        try:
            _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # busy or locked: the next round catches up
            log.debug("WAL checkpoint (PASSIVE) skipped: %s", exc)
            return -1
        return frames

    @staticmethod
    def _checkpoint(db: sqlite3.Connection, mode: str) -> bool:
        """Run one checkpoint; True when it completed (SQLite reports busy as the first column)."""
        try:
            busy, _, _ = db.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except sqlite3.Error as exc:  # busy or locked: the next round catches up
            log.debug("WAL checkpoint (%s) skipped: %s", mode, exc)
            return False
        return busy == 0

    def stop(self) -> None:
        """Stop after one last full checkpoint."""
        self._stop.set()
        self._thread.join(timeout=10)
