"""PostgreSQL, shared by everything that keeps state there: one connection pool per server, and the
schema migrations each component brings (needs parley-a2a[postgres]: asyncpg).

Several replicas may start at once against the same database: migrations run under a
transaction-scoped advisory lock, each component's version is a row of `parley_schema`,
and a database written by a newer Parley is refused with one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from parley.tasks.store import StoreError

if TYPE_CHECKING:
    import asyncpg

SCHEMES = ("postgresql://", "postgres://")
_MIGRATION_LOCK = 0x70617231  # pg_advisory_xact_lock key of Parley's migrations ("par1")


async def _keep_session(conn: object) -> None:
    """The pool's reset of a released connection: nothing to undo. asyncpg still rolls back an open transaction
    and drops listeners first; its default reset (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`)
    was one more PostgreSQL transaction per acquire, up to five per send (issue 25). Parley leaves no session
    state on pooled connections: its advisory locks are transaction-scoped, LISTEN has a connection of its
    own (tasks.pg_bus), no cursor outlives its transaction and nothing is SET for a session."""


class PostgresError(StoreError):
    """PostgreSQL cannot be used (unreachable, refused, a newer schema): one readable line."""


def is_postgres_url(value: str | None) -> bool:
    """Whether a `--db` value names a PostgreSQL database."""
    return bool(value) and value.startswith(SCHEMES)


def redact(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def _asyncpg() -> Any:
    try:
        import asyncpg
    except ImportError:
        raise PostgresError("a postgresql:// database needs the parley-a2a[postgres] extra: "
                            "pip install 'parley-a2a[postgres]'") from None
    return asyncpg


class Postgres:
    """One pool to one database, opened once and shared (task store, API keys, signing keys, bus).

    Args:
        url: postgresql://user:password@host:port/database (query parameters other than the
            driver's own are server settings, e.g. `?search_path=parley`).
        min_size, max_size: connections the pool keeps and may open.
    """

    def __init__(self, url: str, *, min_size: int = 2, max_size: int = 10) -> None:
        self.url = url
        self.min_size, self.max_size = min_size, max_size
        self._pool: asyncpg.Pool | None = None
        self._opening: asyncio.Lock | None = None
        self.users = 0  # components that opened it (the last to close closes the pool)

    async def pool(self) -> asyncpg.Pool:
        """The pool, opened on first use (PostgresError with one line if the server cannot be reached)."""
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                asyncpg = _asyncpg()
                try:
                    self._pool = await asyncpg.create_pool(self.url, min_size=self.min_size, max_size=self.max_size,
                                                           command_timeout=60, reset=_keep_session)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                    raise PostgresError(f"cannot connect to PostgreSQL at {redact(self.url)}: {reason}") from None
        return self._pool

    async def acquire_user(self) -> asyncpg.Pool:
        """Open (or share) the pool for one more component; each calls :meth:`release_user` when it closes."""
        pool = await self.pool()
        self.users += 1
        return pool

    async def release_user(self) -> None:
        """One component is done with the pool; the last one closes it."""
        self.users -= 1
        if self.users <= 0 and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def close(self) -> None:
        """Close the pool whoever still uses it (a short-lived tool's last step)."""
        self.users = 0
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def migrate(self, component: str, steps: Sequence[str]) -> int:
        """Bring `component`'s tables to version len(steps): run the steps after its recorded version, in one
        transaction, under Parley's migration lock. Returns the version it found."""
        pool = await self.pool()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute("CREATE TABLE IF NOT EXISTS parley_schema "
                               "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
            found = await conn.fetchval("SELECT version FROM parley_schema WHERE component=$1", component) or 0
            if found > len(steps):
                raise PostgresError(f"the {component} tables in {redact(self.url)} have schema {found}, written by "
                                    f"a newer Parley (this one knows schema {len(steps)})")
            for step in steps[found:]:
                await conn.execute(step)
            if found < len(steps):
                await conn.execute("INSERT INTO parley_schema VALUES ($1, $2) ON CONFLICT (component) "
                                   "DO UPDATE SET version = EXCLUDED.version", component, len(steps))
            return found

    async def schema_versions(self) -> dict[str, int]:
        """Each component's schema version as recorded (for /readyz)."""
        pool = await self.pool()
        async with pool.acquire() as conn:
            exists = await conn.fetchval("SELECT to_regclass('parley_schema') IS NOT NULL")
            if not exists:
                return {}
            rows = await conn.fetch("SELECT component, version FROM parley_schema")
        return {r["component"]: r["version"] for r in rows}


class PostgresTables:
    """A component that keeps its tables in the server's PostgreSQL (task store, API keys, signing keys):
    :meth:`open` takes a share of the pool and brings its tables to `steps`; :meth:`close` gives the share back.

    Subclasses set `component` (its row in `parley_schema`) and `steps` (its migrations, never edited:
    a change is a new step) and call :meth:`attach` from their constructor.
    """

    component: str
    steps: Sequence[str]
    postgres: Postgres
    _pool: asyncpg.Pool | None

    def attach(self, postgres: Postgres) -> None:
        """Use `postgres` (not opened yet)."""
        self.postgres = postgres
        self._pool = None

    async def open(self) -> None:
        """Take a share of the pool and migrate (PostgresError: unreachable, or a schema of a newer Parley)."""
        if self._pool is not None:
            return
        pool = await self.postgres.acquire_user()
        try:
            await self.postgres.migrate(self.component, self.steps)
        except BaseException:
            await self.postgres.release_user()
            raise
        self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await self.postgres.release_user()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError(f"the PostgreSQL {self.component} tables are not open: await open() first")
        return self._pool


__all__ = ["SCHEMES", "Postgres", "PostgresError", "PostgresTables", "is_postgres_url", "redact"]
