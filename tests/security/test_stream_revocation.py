"""Revoking or expiring a credential ends the streams it opened, on every binding (issue 28 item 2).

A2A 1.0 section 7.4 (the server authenticates every request; a credential that is no longer valid is
refused with 401 / UNAUTHENTICATED) and 3.1.2 / 3.1.6 (SendStreamingMessage, SubscribeToTask: the stream
ends with an error in the binding's shape: JSON-RPC error frame, HTTP+JSON error event, gRPC status).
A stream opened with a key must not go on delivering the task's answer after the key was revoked.

One live server (uvicorn + gRPC on 127.0.0.1), keys in its SQLite file, an HS256 token issuer. The agent
`slow` says "first", then waits until the test opens its gate, then says "secret". Nothing sleeps: the
tests wait for events (the first frame, the stream's end), with WAIT as a generous worst case.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt as pyjwt
import pytest

from parley.agents.base import RunContext
from parley.app import Parley, Settings
from parley.protocol import models as m
from parley.protocol.errors import UnauthenticatedError
from parley.security.keys import SqliteKeyStore, parse
from parley.settings import AuthSettings, JwtSettings, LimitSettings

from .secured import WAIT, accesskit, cli, free_port  # noqa: F401  (free_port: accesskit's servers)
from .test_auth_bindings import connect, pairs

SECRET_ENV = "PARLEY_TEST_STREAM_REVOCATION_SECRET"
SECRET = "stream-revocation-secret-of-at-least-32-bytes"
ISSUER, AUDIENCE = "https://idp.parley.test", "https://agents.parley.test/a2a"


@dataclass
class Env:
    srv: Any
    store: SqliteKeyStore
    db: Path
    admin: str
    gates: dict[str, threading.Event] = field(default_factory=dict)

    async def key(self, principal: str) -> tuple[str, str]:
        """(key id, key) of a new key for `slow` of `principal`."""
        _, token = await self.store.create("slow", principal=principal)
        key_id, _ = parse(token)  # type: ignore[misc]
        return key_id, token

    def gate(self, text: str) -> threading.Event:
        return self.gates.setdefault(text, threading.Event())


def slow_app(db: Path, gates: dict[str, threading.Event]) -> Parley:
    app = Parley(settings=Settings(db=str(db), limits=LimitSettings(auth_failures=None),
                                   auth=AuthSettings(jwt=JwtSettings(secret_env=SECRET_ENV, issuer=ISSUER,
                                                                     audience=[AUDIENCE], leeway_seconds=0))))

    @app.agent(id="slow", description="Says first, then (when its gate opens) the secret")
    async def slow(ctx: RunContext):
        yield "first"
        gate = gates.setdefault(ctx.text, threading.Event())
        while not gate.is_set():  # the agent's own pace: the test opens the gate when it wants the secret sent
            await asyncio.sleep(0.05)
        yield "secret"

    return app


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    db = tmp_path_factory.mktemp("stream-revocation") / "parley.db"
    store = SqliteKeyStore(db)
    _, admin = asyncio.run(store.create("slow", scopes=frozenset({"admin", "a2a"}), name="admin"))
    os.environ[SECRET_ENV] = SECRET
    gates: dict[str, threading.Event] = {}
    srv = accesskit.start(slow_app(db, gates))
    yield Env(srv, store, db, admin, gates)
    srv.stop()
    os.environ.pop(SECRET_ENV, None)
    asyncio.run(store.close())
    for gate in gates.values():
        gate.set()


def texts(event: Any) -> list[str]:
    """The text an event carries (artifact chunks, a task's artifacts)."""
    if isinstance(event, m.TaskArtifactUpdateEvent):
        return [p.text for p in event.artifact.parts if p.text]
    if isinstance(event, m.Task):
        return [p.text for a in event.artifacts or [] for p in a.parts if p.text]
    return []


async def until_first(events: AsyncIterator[Any]) -> str | None:
    """Read events until the agent's "first" arrives; the task id."""
    task_id = None
    async for event in events:
        task_id = task_id or getattr(event, "task_id", None) or getattr(event, "id", None)
        if "first" in texts(event):
            return task_id
    raise AssertionError("the stream ended before the agent's first words")


async def after(events: AsyncIterator[Any]) -> tuple[list[Any], BaseException | None]:
    """What the stream still delivers, and how it ends (None: it ended without an error)."""
    seen: list[Any] = []
    try:
        async with asyncio.timeout(WAIT):
            async for event in events:
                seen.append(event)
    except (UnauthenticatedError, TimeoutError) as exc:
        return seen, exc
    return seen, None


def revoke_by_admin_api(env: Env, key_id: str) -> None:
    resp = httpx.delete(f"{env.srv.live.url}/admin/keys/{key_id}", headers={"X-API-Key": env.admin}, timeout=WAIT)
    assert resp.status_code == 200, resp.text


def revoke_by_cli(env: Env, key_id: str) -> None:
    """`parley keys revoke` on the server's database: another process, as a replica's revocation would be."""
    proc = cli("keys", "revoke", key_id, "--db", str(env.db))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("binding", "version"), pairs())
async def test_revoking_the_key_ends_its_send_stream_before_the_secret(env: Env, binding: str, version: str) -> None:
    key_id, token = await env.key(f"alice-{binding}-{version}")
    text = f"stream {binding} {version}"
    client = await connect(env.srv, "slow", binding, version, token)
    try:
        events = client.stream(text)
        await until_first(events)
        revoke_by_admin_api(env, key_id)
        env.gate(text).set()  # the agent says the secret now: the stream must not deliver it
        seen, end = await after(events)
        assert isinstance(end, UnauthenticatedError), (seen, end)
        assert "not valid any more" in str(end), end
        assert not any("secret" in texts(e) for e in seen), seen
        assert seen == [], seen  # nothing at all after the revocation
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), pairs())
async def test_revoking_the_key_elsewhere_ends_its_subscription(env: Env, binding: str, version: str) -> None:
    principal = f"bob-{binding}-{version}"
    _, starter = await env.key(principal)
    key_id, token = await env.key(principal)  # the same principal: it may follow the task
    text = f"subscribe {binding} {version}"
    first = await connect(env.srv, "slow", binding, version, starter)
    second = await connect(env.srv, "slow", binding, version, token)
    try:
        stream = first.stream(text)
        task_id = await until_first(stream)
        await stream.aclose()
        events = second.resubscribe(task_id)
        async for event in events:  # the subscription is open: its first event is the task's snapshot
            break
        revoke_by_cli(env, key_id)
        seen, end = await after(events)  # the server notices within its recheck interval (one second)
        assert isinstance(end, UnauthenticatedError), (seen, end)
        assert seen == [], seen
        env.gate(text).set()
    finally:
        env.gate(text).set()
        await first.close()
        await second.close()


@pytest.mark.parametrize(("binding", "version"), pairs())
async def test_a_token_past_its_exp_ends_its_stream(env: Env, binding: str, version: str) -> None:
    now = time.time()
    token = pyjwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": f"carol-{binding}-{version}", "scope": "a2a",
                          "iat": int(now), "exp": int(now) + 5}, SECRET, algorithm="HS256")
    text = f"token {binding} {version}"
    client = await connect(env.srv, "slow", binding, version, token, how="bearer")
    try:
        events = client.stream(text)
        await until_first(events)  # the gate stays shut: only the token's expiry can end this stream
        seen, end = await after(events)
        assert isinstance(end, UnauthenticatedError), (seen, end)
        assert "expired" in str(end), end
        assert time.time() >= now + 4, "ended before the token's exp"
    finally:
        env.gate(text).set()
        await client.close()
