"""Opening the task store a setting names: "memory", or a SQLite file."""

from __future__ import annotations

from parley.settings import MEMORY
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.sqlite_store import GROUP_COMMIT_SECONDS, SqliteTaskStore
from parley.tasks.store import StoreError, TaskStore


def open_store(db: str | None, *, group_commit_seconds: float = GROUP_COMMIT_SECONDS) -> TaskStore:
    """The store for `db`: None or "memory" keeps tasks in memory, anything else is a SQLite file (its group
    writes at most one per `group_commit_seconds` while it is busy: Settings.group_commit_seconds).

    Raises StoreError with one readable line (the file is in use by another process,
    cannot be created, or was written by a newer Parley).
    """
    if db is None or db == MEMORY:
        return MemoryTaskStore()
    try:
        return SqliteTaskStore(db, group_commit_seconds=group_commit_seconds)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - sqlite3.Error, OSError...: one readable line
        reason = getattr(exc, "strerror", None) or str(exc)
        raise StoreError(f"cannot open the task database {db!r}: {reason}") from None


__all__ = ["open_store"]
