"""API keys per agent: made once, shown once, stored as a keyed hash, checked on every request.

A key reads `pk_<id>_<secret>`: the id finds the stored record, the secret is checked
against an HMAC-SHA256 of it under a server-side pepper (`hmac.compare_digest`), so the
store never holds anything a client could present. Each key opens one agent (or every
agent, for keys made with the `admin` scope), carries scopes, may expire and may be revoked.
Unless a principal is named when it is made, a key is its own principal: two keys see each
other's tasks only when they share one.

:class:`SqliteKeyStore` keeps them in the server's database file, in a table of their own,
through a connection of its own: `parley keys ...` works on the same `--db` whether or not
the server is running (SQLite's own locking orders the writers). The pepper lives next to
the database (`<db>.pepper`, mode 0600) unless `PARLEY_KEY_PEPPER` gives it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path

from parley.private_files import prepare_private_file

PREFIX = "pk_"
ADMIN = "admin"  # the scope of keys that manage keys (and open every agent)
DEFAULT_SCOPES = frozenset({"a2a"})
ANY_AGENT = "*"
PEPPER_ENV = "PARLEY_KEY_PEPPER"
TOUCH_EVERY = 60.0  # seconds: last-used times are written at most this often per key


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key's record (never its secret)."""

    id: str
    agent_id: str  # the agent it opens, or "*" (admin keys)
    principal: str  # whose tasks it sees and makes
    name: str = ""
    scopes: frozenset[str] = DEFAULT_SCOPES
    created_at: float = 0.0
    expires_at: float | None = None
    last_used_at: float | None = None
    revoked_at: float | None = None

    def active(self, now: float) -> bool:
        """Not revoked and not expired at `now`."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def opens(self, agent_id: str) -> bool:
        """Whether this key may call `agent_id`."""
        return self.agent_id in (ANY_AGENT, agent_id)


@dataclass(slots=True)
class _Stored:
    key: ApiKey
    digest: str
    touched: float = field(default=0.0)


def parse(token: str) -> tuple[str, str] | None:
    """(id, secret) of a presented key, or None if it is not shaped like one of ours."""
    if not token.startswith(PREFIX):
        return None
    key_id, sep, secret = token[len(PREFIX):].partition("_")
    if not sep or not key_id or not secret:
        return None
    return key_id, secret


def digest(pepper: bytes, secret: str) -> str:
    """The stored form of a key's secret: HMAC-SHA256 under the pepper."""
    return hmac.new(pepper, secret.encode(), hashlib.sha256).hexdigest()


class KeyProblem(Exception):
    """A key operation that cannot be done (unknown agent, bad expiry); one readable line."""


class KeyStore(ABC):
    """Where API keys live."""

    def __init__(self, pepper: bytes) -> None:
        self.pepper = pepper
        # How many revocations went through this object: open streams of this process re-check their key
        # before their next frame when it changes (parley.security.credential_watch).
        self.revocations = 0

    async def create(self, agent_id: str, *, name: str = "", scopes: frozenset[str] | None = None,
                     expires_at: float | None = None, principal: str | None = None,
                     now: float | None = None) -> tuple[ApiKey, str]:
        """Make a key; returns its record and the key itself, which is never stored and never shown again."""
        now = time.time() if now is None else now
        if expires_at is not None and expires_at <= now:
            raise KeyProblem("the expiry must be in the future")
        scopes = frozenset(scopes) if scopes else DEFAULT_SCOPES
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        key = ApiKey(id=key_id, agent_id=ANY_AGENT if ADMIN in scopes else agent_id,
                     principal=principal or f"key:{key_id}", name=name, scopes=scopes, created_at=now,
                     expires_at=expires_at)
        await self._insert(key, digest(self.pepper, secret))
        return key, f"{PREFIX}{key_id}_{secret}"

    async def check(self, token: str, now: float | None = None) -> ApiKey | None:
        """The active key `token` is, or None (unknown, wrong secret, revoked, expired)."""
        parsed = parse(token)
        if parsed is None:
            return None
        key_id, secret = parsed
        stored = await self._get(key_id)
        now = time.time() if now is None else now
        if stored is None or not hmac.compare_digest(stored.digest, digest(self.pepper, secret)):
            return None
        if not stored.key.active(now):
            return None
        if now - stored.touched >= TOUCH_EVERY:
            stored.touched = now
            await self._touch(key_id, now)
        return stored.key

    @abstractmethod
    async def _insert(self, key: ApiKey, digest: str) -> None: ...

    @abstractmethod
    async def _get(self, key_id: str) -> _Stored | None: ...

    @abstractmethod
    async def _touch(self, key_id: str, at: float) -> None: ...

    @abstractmethod
    async def list(self, agent_id: str | None = None) -> list[ApiKey]:
        """Every key (of one agent, with the keys that open every agent), oldest first."""

    @abstractmethod
    async def revoke(self, key_id: str, now: float | None = None) -> ApiKey | None:
        """Revoke a key; its record, or None if there is no such key."""

    async def purge(self, now: float | None = None) -> list[ApiKey]:
        """Forget the keys that can never work again (revoked or expired); their records. The deliberate way
        back to development mode: a store whose keys are all purged has none, so a loopback server on it runs
        open again at its next start. Active keys are never purged; tasks are not touched."""
        now = time.time() if now is None else now
        gone = [k for k in await self.list() if not k.active(now)]
        if gone:
            await self._delete([k.id for k in gone])
        return gone

    @abstractmethod
    async def _delete(self, key_ids: list[str]) -> None: ...

    async def current(self, key_id: str, now: float | None = None) -> ApiKey | None:
        """Key `key_id` as stored now, if it is still active (not revoked, not expired, not purged)."""
        stored = await self._get(key_id)
        now = time.time() if now is None else now
        return stored.key if stored is not None and stored.key.active(now) else None

    @abstractmethod
    async def has_keys(self) -> bool:
        """Whether any key was ever made here, active, revoked or expired: then every request must
        authenticate. Revoking or outliving the last key never turns a secured server into an open one."""

    async def open(self) -> None:
        """Connect (a server database's store creates its tables here); the runtime calls it at start."""

    async def close(self) -> None:
        """Release resources."""


class MemoryKeyStore(KeyStore):
    """Keys of one process (`--memory`): gone at exit."""

    def __init__(self, pepper: bytes | None = None) -> None:
        super().__init__(pepper or secrets.token_bytes(32))
        self._keys: dict[str, _Stored] = {}

    async def _insert(self, key: ApiKey, digest: str) -> None:
        self._keys[key.id] = _Stored(key, digest)

    async def _get(self, key_id: str) -> _Stored | None:
        return self._keys.get(key_id)

    async def _touch(self, key_id: str, at: float) -> None:
        stored = self._keys.get(key_id)
        if stored is not None:
            stored.key = replace(stored.key, last_used_at=at)

    async def list(self, agent_id: str | None = None) -> list[ApiKey]:
        keys = [s.key for s in self._keys.values()]
        if agent_id is not None:
            keys = [k for k in keys if k.opens(agent_id)]
        return sorted(keys, key=lambda k: (k.created_at, k.id))

    async def revoke(self, key_id: str, now: float | None = None) -> ApiKey | None:
        stored = self._keys.get(key_id)
        if stored is None:
            return None
        if stored.key.revoked_at is None:
            stored.key = replace(stored.key, revoked_at=time.time() if now is None else now)
        self.revocations += 1
        return stored.key

    async def _delete(self, key_ids: list[str]) -> None:
        for key_id in key_ids:
            self._keys.pop(key_id, None)

    async def has_keys(self) -> bool:
        return bool(self._keys)


SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    name TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    last_used_at REAL,
    revoked_at REAL
)
"""
_COLUMNS = "id, digest, agent_id, principal, name, scopes, created_at, expires_at, last_used_at, revoked_at"


class SqliteKeyStore(KeyStore):
    """Keys in the server's SQLite file (table `api_keys`), through a connection of its own."""

    def __init__(self, path: str | Path, pepper: bytes | None = None) -> None:
        self.path = str(path)
        prepare_private_file(self.path)
        super().__init__(pepper or load_pepper(self.path))
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(SCHEMA)

    @staticmethod
    def _key(row: tuple) -> tuple[ApiKey, str]:
        key_id, dig, agent_id, principal, name, scopes, created, expires, used, revoked = row
        key = ApiKey(id=key_id, agent_id=agent_id, principal=principal, name=name,
                     scopes=frozenset(s for s in scopes.split(" ") if s), created_at=created, expires_at=expires,
                     last_used_at=used, revoked_at=revoked)
        return key, dig

    async def _insert(self, key: ApiKey, digest: str) -> None:
        self._db.execute(
            f"INSERT INTO api_keys ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (key.id, digest, key.agent_id, key.principal, key.name, " ".join(sorted(key.scopes)), key.created_at,
             key.expires_at, key.last_used_at, key.revoked_at),
        )

    async def _get(self, key_id: str) -> _Stored | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE id=?", (key_id,)).fetchone()
        if row is None:
            return None
        key, dig = self._key(row)
        return _Stored(key, dig, touched=key.last_used_at or 0.0)

    async def _touch(self, key_id: str, at: float) -> None:
        self._db.execute("UPDATE api_keys SET last_used_at=? WHERE id=?", (at, key_id))

    async def list(self, agent_id: str | None = None) -> list[ApiKey]:
        if agent_id is None:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id").fetchall()
        else:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE agent_id IN (?, ?) "
                                    "ORDER BY created_at, id", (agent_id, ANY_AGENT)).fetchall()
        return [self._key(r)[0] for r in rows]

    async def revoke(self, key_id: str, now: float | None = None) -> ApiKey | None:
        now = time.time() if now is None else now
        self._db.execute("UPDATE api_keys SET revoked_at=? WHERE id=? AND revoked_at IS NULL", (now, key_id))
        self.revocations += 1
        stored = await self._get(key_id)
        return stored.key if stored is not None else None

    async def _delete(self, key_ids: list[str]) -> None:
        self._db.executemany("DELETE FROM api_keys WHERE id=?", [(k,) for k in key_ids])

    async def has_keys(self) -> bool:
        return self._db.execute("SELECT 1 FROM api_keys LIMIT 1").fetchone() is not None

    async def close(self) -> None:
        self._db.close()


def load_pepper(db_path: str) -> bytes:
    """The pepper of the keys in `db_path`: PARLEY_KEY_PEPPER, else `<db>.pepper` (made on first use, 0600)."""
    env = os.environ.get(PEPPER_ENV)
    if env:
        return env.encode()
    path = Path(db_path + ".pepper")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        pepper = secrets.token_bytes(32)
        f.write(pepper)
    return pepper


def open_keys(db: str | None) -> KeyStore:
    """The key store beside the task store `db` names ("memory"/None: in memory)."""
    if db is None or db == "memory":
        return MemoryKeyStore()
    return SqliteKeyStore(db)


__all__ = ["ADMIN", "ANY_AGENT", "ApiKey", "KeyStore", "MemoryKeyStore", "SqliteKeyStore", "open_keys", "parse"]
