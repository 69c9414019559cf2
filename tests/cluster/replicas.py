"""Real `parley serve` replicas for the cluster tests: separate processes on their own ports, sharing one
PostgreSQL schema and (optionally) one Redis namespace, as a deployment behind a load balancer would.

    with Replicas(postgres_url, redis=(url, prefix), count=2) as (a, b):
        rpc(a.url + "/a2a/echo", ...)
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support import free_port, wait_until_ready

HERE = Path(__file__).parent
PARLEY = [sys.executable, "-m", "parley.cli"]
PEPPER = "cluster-test-pepper-0123456789abcdef"
AGENTS = """
[[agents]]
id = "ticker"
type = "python"
entry = "cluster_agents:ticker"

[[agents]]
id = "counter"
type = "python"
entry = "cluster_agents:counter"

[[agents]]
id = "waiter"
type = "python"
entry = "cluster_agents:waiter"

[[agents]]
id = "stepper"
type = "python"
entry = "cluster_agents:stepper"

[[agents]]
id = "pauser"
type = "python"
entry = "cluster_agents:pauser"
"""


class Replica:
    """One `parley serve` process."""

    def __init__(self, config: Path, log: Path, name: str) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, "PARLEY_KEY_PEPPER": PEPPER, "PYTHONPATH": str(HERE)}
        self._out = log.open("wb")
        self.proc = subprocess.Popen([*PARLEY, "serve", "--config", str(config), "--port", str(self.port),
                                      "--log-level", "warning"], stdout=self._out, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, timeout: float = 60) -> Replica:
        """Until GET /readyz says 200 (store and bus connected), or fail with the replica's output."""
        wait_until_ready(self.proc, self.url, timeout, output=self.output)
        return self

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL: the process dies with its leases held (a crash)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, as an orchestrator stops a replica; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        return self.proc.returncode


def write_config(folder: Path, postgres_url: str, *, redis: tuple[str, str] | None, namespace: str,
                 lease_seconds: float = 2.0, extra: str = "") -> Path:
    """A parley.toml for every replica of one deployment."""
    bus = f'bus = {json.dumps(redis[0])}' if redis is not None else 'bus = "postgres"'
    config = folder / "parley.toml"
    config.write_text(f"""
[server]
db = {json.dumps(postgres_url)}
{bus}
namespace = {json.dumps(namespace)}
lease_seconds = {lease_seconds}
builtin_agents = true
default_agent = "echo"
{extra}
{AGENTS}
""")
    return config


@contextmanager
def replicas(folder: Path, postgres_url: str, *, redis: tuple[str, str] | None = None, count: int = 2,
             lease_seconds: float = 2.0, extra: str = "", namespace: str | None = None) -> Iterator[list[Replica]]:
    """`count` replicas of one deployment, started and ready; stopped (SIGTERM) afterwards."""
    if namespace is None:
        namespace = redis[1] if redis is not None else "t" + os.urandom(4).hex()
    config = write_config(folder, postgres_url, redis=redis, namespace=namespace, lease_seconds=lease_seconds,
                          extra=extra)
    started: list[Replica] = []
    try:
        for i in range(count):
            started.append(Replica(config, folder / f"replica-{i}.log", name="ABCDEFGH"[i]))
        for r in started:
            r.wait_ready()
        yield started
    finally:
        for r in started:
            r.stop()


async def _terminate(url: str, application_names: list[str]) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return len(await conn.fetch("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                    "WHERE application_name = ANY($1::text[]) AND pid <> pg_backend_pid()",
                                    application_names))
    finally:
        await conn.close()


def terminate_connections(url: str, application_names: list[str]) -> int:
    """Drop every PostgreSQL connection whose application_name is one of `application_names`, as a failover or
    a proxy restart does (`pg_terminate_backend`); returns how many there were."""
    return asyncio.run(_terminate(url, application_names))


async def _terminate_in_flight(url: str, application_names: list[str], waiting: int, timeout: float) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE tasks IN EXCLUSIVE MODE")  # reads go on, writes wait for the lock
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                await conn.execute("SELECT pg_stat_clear_snapshot()")  # else the view stays as first read
                held = await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                           "AND application_name = ANY($1::text[]) AND query LIKE 'WITH t AS%'",
                                           application_names)
                if held >= waiting:
                    break
                await asyncio.sleep(0.01)  # polling pg_stat_activity, with a deadline
            return len(await conn.fetch("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                        "WHERE application_name = ANY($1::text[]) AND pid <> pg_backend_pid()",
                                        application_names))
    finally:
        await conn.close()


async def _outage(url: str, application_names: list[str], seconds: float, every: float) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    dropped = 0
    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE tasks IN EXCLUSIVE MODE")
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await asyncio.sleep(every)  # the rhythm of the drops (an outage, not synchronisation)
                await conn.execute("SELECT pg_stat_clear_snapshot()")  # else the view stays as first read
                dropped += len(await conn.fetch(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = ANY($1::text[]) AND pid <> pg_backend_pid()", application_names))
    finally:
        await conn.close()
    return dropped


def outage(url: str, application_names: list[str], seconds: float, *, every: float = 0.2) -> int:
    """A database that stays away for `seconds`: writes to the `tasks` table are held (a table lock) and every
    connection with one of `application_names` is terminated every `every` seconds, so no commit, lease renewal
    or takeover gets through until the end. Returns how many connections were terminated."""
    return asyncio.run(_outage(url, application_names, seconds, every))


def terminate_in_flight(url: str, application_names: list[str], *, waiting: int = 1, timeout: float = 10) -> int:
    """Drop those connections while commits are in flight: writes to the `tasks` table of `url`'s schema are
    held (a table lock) until `waiting` commits wait for it (or `timeout` passed), then every connection is
    terminated (the outcome of those commits unknown to Parley) and the lock released. Returns how many
    connections were terminated."""
    return asyncio.run(_terminate_in_flight(url, application_names, waiting, timeout))


__all__ = ["PEPPER", "Replica", "outage", "replicas", "terminate_connections", "terminate_in_flight", "write_config"]
