"""The SQLite task store, the default of `parley serve` (a file under ./.parley/).

Uses the standard library's sqlite3 in WAL mode with `synchronous=NORMAL`:
each append is one short transaction, run directly on the event loop because
a local WAL write costs tens of microseconds, less than a thread hop.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

from parley.protocol import models as m
from parley.tasks.log import Entry
from parley.tasks.store import TaskLink, TaskPage, TaskQuery, TaskRecord, TaskStore

SCHEMA = """
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
    parent_task_id TEXT
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (agent_id, owner, updated_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state);
CREATE TABLE IF NOT EXISTS events (
    task_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS message_ids (
    agent_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    message_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (agent_id, owner, message_id)
) WITHOUT ROWID;
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
    PRIMARY KEY (task_id, id)
) WITHOUT ROWID;
"""

_KINDS: dict[str, type] = {
    "task": m.Task,
    "message": m.Message,
    "status": m.TaskStatusUpdateEvent,
    "artifact": m.TaskArtifactUpdateEvent,
}
log = logging.getLogger("parley.sqlite")
_enc = msgspec.json.Encoder()
_task_dec = msgspec.json.Decoder(m.Task)
_decoders = {k: msgspec.json.Decoder(t) for k, t in _KINDS.items()}
_push_dec = msgspec.json.Decoder(m.TaskPushNotificationConfig)


class SqliteTaskStore(TaskStore):
    """Tasks, logs, idempotency keys and push configs in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)
        self._checkpointer: WalCheckpointer | None = None
        if self.path != ":memory:":
            # Commits in WAL mode with synchronous=NORMAL do not fsync; checkpoints do. They run on
            # a thread of their own so that the event loop never waits for the disk.
            self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._checkpointer = WalCheckpointer(self.path)

    def _record(self, row: tuple) -> TaskRecord:
        agent_id, owner, snapshot, seq, created, updated, parent = row
        return TaskRecord(
            task=_task_dec.decode(snapshot),
            agent_id=agent_id,
            owner=owner,
            seq=seq,
            created_at=created,
            updated_at=updated,
            parent_task_id=parent,
        )

    async def create(self, record: TaskRecord, first: Entry, message_id: str) -> None:
        t = record.task
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    t.id,
                    record.agent_id,
                    record.owner,
                    t.context_id,
                    t.status.state.value,
                    t.status.timestamp,
                    _enc.encode(t),
                    record.seq,
                    record.created_at,
                    record.updated_at,
                    record.parent_task_id,
                ),
            )
            self._db.execute(
                "INSERT INTO events VALUES (?,?,?,?)", (t.id, first.seq, first.kind, _enc.encode(first.event))
            )
            self._db.execute(
                "INSERT OR REPLACE INTO message_ids VALUES (?,?,?,?)",
                (record.agent_id, record.owner, message_id, t.id),
            )

    async def append(self, task_id: str, entries: list[Entry], snapshot: m.Task, updated_at: float) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO events VALUES (?,?,?,?)",
                [(task_id, e.seq, e.kind, _enc.encode(e.event)) for e in entries],
            )
            self._db.execute(
                "UPDATE tasks SET state=?, status_ts=?, snapshot=?, seq=?, updated_at=? WHERE id=?",
                (
                    snapshot.status.state.value,
                    snapshot.status.timestamp,
                    _enc.encode(snapshot),
                    entries[-1].seq,
                    updated_at,
                    task_id,
                ),
            )

    async def get(self, task_id: str) -> TaskRecord | None:
        row = self._db.execute(
            "SELECT agent_id, owner, snapshot, seq, created_at, updated_at, parent_task_id FROM tasks WHERE id=?",
            (task_id,),
        ).fetchone()
        return self._record(row) if row else None

    async def events_after(self, task_id: str, seq: int) -> list[Entry]:
        rows = self._db.execute(
            "SELECT seq, kind, payload FROM events WHERE task_id=? AND seq>? ORDER BY seq", (task_id, seq)
        ).fetchall()
        return [Entry(s, _decoders[k].decode(p)) for s, k, p in rows]

    async def list(self, query: TaskQuery) -> TaskPage:
        where = ["agent_id=?", "owner=?"]
        args: list = [query.agent_id, query.owner]
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
        total = self._db.execute(f"SELECT COUNT(*) FROM tasks WHERE {cond}", args).fetchone()[0]
        page_args = list(args)
        if query.cursor is not None:
            cond += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            page_args += [query.cursor[0], query.cursor[0], query.cursor[1]]
        rows = self._db.execute(
            "SELECT agent_id, owner, snapshot, seq, created_at, updated_at, parent_task_id FROM tasks "
            f"WHERE {cond} ORDER BY updated_at DESC, id DESC LIMIT ?",
            [*page_args, query.page_size + 1],
        ).fetchall()
        records = [self._record(r) for r in rows[: query.page_size]]
        nxt = None
        if len(rows) > query.page_size and records:
            nxt = (records[-1].updated_at, records[-1].task.id)
        return TaskPage(records=records, next_cursor=nxt, total=total)

    async def remember_message(self, agent_id: str, owner: str, message_id: str, task_id: str) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO message_ids VALUES (?,?,?,?)", (agent_id, owner, message_id, task_id)
            )

    async def find_message(self, agent_id: str, owner: str, message_id: str) -> str | None:
        row = self._db.execute(
            "SELECT task_id FROM message_ids WHERE agent_id=? AND owner=? AND message_id=?",
            (agent_id, owner, message_id),
        ).fetchone()
        return row[0] if row else None

    async def unfinished(self) -> list[TaskRecord]:
        rows = self._db.execute(
            "SELECT agent_id, owner, snapshot, seq, created_at, updated_at, parent_task_id FROM tasks "
            "WHERE state IN (?, ?)",
            (m.TaskState.SUBMITTED.value, m.TaskState.WORKING.value),
        ).fetchall()
        return [self._record(r) for r in rows]

    async def put_push_config(self, config: m.TaskPushNotificationConfig) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO push_configs VALUES (?,?,?)", (config.task_id, config.id, _enc.encode(config))
            )

    async def get_push_config(self, task_id: str, config_id: str) -> m.TaskPushNotificationConfig | None:
        row = self._db.execute(
            "SELECT config FROM push_configs WHERE task_id=? AND id=?", (task_id, config_id)
        ).fetchone()
        return _push_dec.decode(row[0]) if row else None

    async def list_push_configs(self, task_id: str) -> list[m.TaskPushNotificationConfig]:
        rows = self._db.execute("SELECT config FROM push_configs WHERE task_id=? ORDER BY id", (task_id,)).fetchall()
        return [_push_dec.decode(r[0]) for r in rows]

    async def delete_push_config(self, task_id: str, config_id: str) -> bool:
        with self._db:
            cur = self._db.execute("DELETE FROM push_configs WHERE task_id=? AND id=?", (task_id, config_id))
        return cur.rowcount > 0

    async def put_checkpoint(self, task_id: str, state: dict[str, Any]) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?,?)", (task_id, _enc.encode(state)))

    async def get_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT state FROM checkpoints WHERE task_id=?", (task_id,)).fetchone()
        return msgspec.json.decode(row[0]) if row else None

    async def delete_checkpoint(self, task_id: str) -> None:
        with self._db:
            self._db.execute("DELETE FROM checkpoints WHERE task_id=?", (task_id,))

    async def add_link(self, parent_task_id: str, child_url: str, child_task_id: str, agent: str | None) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO task_links VALUES (?,?,?,?,?)",
                (parent_task_id, child_url, child_task_id, agent, time.time()),
            )

    async def links(self, task_id: str) -> list[TaskLink]:
        rows = self._db.execute(
            "SELECT parent_task_id, child_url, child_task_id, agent, created_at FROM task_links "
            "WHERE parent_task_id=? ORDER BY created_at, child_task_id",
            (task_id,),
        ).fetchall()
        return [TaskLink(*row) for row in rows]

    async def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._db.close()


class WalCheckpointer:
    """Copies the WAL into the database file every `interval` seconds, on a daemon thread."""

    def __init__(self, path: str, interval: float = 1.0) -> None:
        self.path = path
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="parley-wal-checkpoint", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout=5000")
        try:
            while not self._stop.wait(self.interval):
                self._checkpoint(db, "PASSIVE")
            self._checkpoint(db, "TRUNCATE")
        finally:
            db.close()

    @staticmethod
    def _checkpoint(db: sqlite3.Connection, mode: str) -> None:
        try:
            db.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except sqlite3.Error as exc:  # busy or locked: the next round catches up
            log.debug("WAL checkpoint (%s) skipped: %s", mode, exc)

    def stop(self) -> None:
        """Stop after one last full checkpoint."""
        self._stop.set()
        self._thread.join(timeout=10)
