"""Delegation keeps identity: remote agents get the credentials configured for them (and only those),
and a trace shows nothing of a child task that belongs to another principal.

A2A 1.0 section 7.3 (the client obtains and presents credentials for the server it calls), 7.5 (the
server scopes what a principal may see); the issue: "remote agents get the credentials configured for
them", "traces check every node".
"""

from __future__ import annotations

import sqlite3
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from hubkit import specialist_agent

from parley.agents.base import AgentOutput, FunctionAgent, RunContext
from parley.app import Parley, Settings
from parley.client import A2AClient
from parley.hub.build import build_app
from parley.hub.config import ConfigError, load_config
from parley.hub.delegation import Delegator
from parley.protocol import models as m
from parley.security.keys import SqliteKeyStore
from support import LiveServer

S = m.TaskState


async def make_key(db: Path, agent: str, principal: str | None = None) -> str:
    """A key in the store of the server whose database is `db` (as `parley keys create` makes it)."""
    store = SqliteKeyStore(str(db))
    try:
        _, token = await store.create(agent, principal=principal)
    finally:
        await store.close()
    return token


def runtime_of(live: LiveServer):
    return live.server.config.app.state.parley


@pytest.fixture
def secured_remote(tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    """A Parley server hosting the specialist, secured by its key store (keys are made by each test)."""
    db = tmp_path / "remote.db"
    app = Parley(settings=Settings(db=str(db)))
    app.add_agent(specialist_agent())
    live = LiveServer(app).start()
    yield live, db
    live.stop()


def write_config(tmp_path: Path, remote_url: str, extra: str) -> Path:
    path = tmp_path / "parley.toml"
    path.write_text(textwrap.dedent(f"""
        [server]
        db = "memory"

        [[agents]]
        id = "claims"
        type = "remote"
        card_url = "{remote_url}/a2a/specialist/.well-known/agent-card.json"
        {extra}
    """))
    return path


async def test_remote_agent_presents_its_configured_key(secured_remote, tmp_path, monkeypatch) -> None:
    """The remote agent's `api_key_env` names the key the hub sends to it (X-API-Key): the remote task
    belongs to that key's principal, and the hub's caller is answered with the remote's result."""
    remote, db = secured_remote
    token = await make_key(db, "specialist", principal="hub-service")
    monkeypatch.setenv("CLAIMS_KEY", token)
    config = load_config(write_config(tmp_path, remote.url, 'api_key_env = "CLAIMS_KEY"'))
    hub = LiveServer(await build_app(config), self_url=True).start()
    try:
        async with await A2AClient.connect(f"{hub.url}/a2a/claims") as client:
            first = [ev async for ev in client.stream("My warranty claim")]
        task = first[0]
        assert isinstance(task, m.Task)
        final = first[-1]
        assert final.status.state is S.INPUT_REQUIRED, final
        link = next(e for e in (await runtime_of(hub).engine.store.links(task.id)))
        child = await runtime_of(remote).engine.store.get(link.child_task_id)
        assert child is not None and child.owner == "hub-service"
    finally:
        hub.stop()


async def test_remote_agent_without_credentials_is_refused_by_a_secured_remote(secured_remote, tmp_path) -> None:
    """No credentials configured: the secured remote refuses the hub (401), and the hub's task fails
    with a reason that says so; no task is made on the remote."""
    remote, db = secured_remote
    await make_key(db, "specialist")  # the remote is now secured
    async with httpx.AsyncClient() as http:  # the card stays public, so the hub starts
        assert (await http.get(f"{remote.url}/a2a/specialist/.well-known/agent-card.json")).status_code == 200
    config = load_config(write_config(tmp_path, remote.url, ""))
    hub = LiveServer(await build_app(config), self_url=True).start()
    try:
        async with await A2AClient.connect(f"{hub.url}/a2a/claims") as client:
            events = [ev async for ev in client.stream("My warranty claim")]
        last = events[-1]
        assert last.status.state is S.FAILED
        reason = last.status.message.text() if last.status.message else ""
        assert "401" in reason or "uthenticat" in reason, reason
        with sqlite3.connect(db) as conn:  # the remote's own database: nothing was made there
            assert conn.execute("SELECT count(*) FROM tasks").fetchone() == (0,)
    finally:
        hub.stop()


async def test_a_missing_credential_variable_is_a_config_error(secured_remote, tmp_path, monkeypatch) -> None:
    """`token_env` naming an unset variable stops the start with the file, the key and the variable."""
    remote, _ = secured_remote
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    path = write_config(tmp_path, remote.url, 'token_env = "NO_SUCH_TOKEN_VAR"')
    with pytest.raises(ConfigError) as err:
        await build_app(load_config(path))
    assert "agents[0].token_env" in str(err.value) and "NO_SUCH_TOKEN_VAR" in str(err.value)


async def test_credentials_go_only_to_their_agent() -> None:
    """The delegator sends an agent's own headers on calls to that agent's URL, not to others."""
    d = Delegator(headers={"User-Agent": "parley-test"})
    d.add_credentials("https://billing.example.com/a2a/billing/.well-known/agent-card.json", {"X-API-Key": "k1"})
    assert d.headers_for("https://billing.example.com/a2a/billing") == {"User-Agent": "parley-test",
                                                                         "X-API-Key": "k1"}
    assert d.headers_for("https://other.example.com/a2a/billing") == {"User-Agent": "parley-test"}
    assert d.headers_for("https://billing.example.com/a2a/refunds") == {"User-Agent": "parley-test"}


async def test_trace_hides_a_child_task_of_another_principal(tmp_path) -> None:
    """An agent that calls another agent of the same server over HTTP with a service key makes a child
    task owned by the service principal: the caller's trace shows the child's id only, never its state,
    messages or children (`source: "hidden"`); the service principal sees the child itself."""
    db = tmp_path / "s.db"
    service_key = await make_key(db, "specialist", principal="svc")
    alice_key = await make_key(db, "front", principal="alice")
    app = Parley(settings=Settings(db=str(db)))
    app.add_agent(specialist_agent())
    holder: dict[str, str] = {}

    async def front(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        delegator = Delegator(headers={"X-API-Key": service_key})  # over HTTP, as the service principal
        async for out in delegator.delegate(ctx, holder["url"], "My warranty claim"):
            yield out

    app.add_agent(FunctionAgent(front, id="front"))
    live = LiveServer(app).start()
    holder["url"] = f"{live.url}/a2a/specialist"
    try:
        async with await A2AClient.connect(f"{live.url}/a2a/front", headers={"X-API-Key": alice_key}) as client:
            events = [ev async for ev in client.stream("hello")]
        task = events[0]
        assert isinstance(task, m.Task)
        async with httpx.AsyncClient() as http:
            resp = await http.get(f"{live.url}/a2a/front/tasks/{task.id}/trace", headers={"X-API-Key": alice_key})
            assert resp.status_code == 200, resp.text
            tree = resp.json()
            assert tree["principal"] == "alice"
            [child] = tree["children"]
            assert child["source"] == "hidden"
            assert set(child) == {"taskId", "agent", "url", "source", "children"}
            assert child["children"] == []
            seen = await http.get(f"{live.url}/a2a/specialist/tasks/{child['taskId']}/trace",
                                  headers={"X-API-Key": service_key})
            assert seen.status_code == 200 and seen.json()["principal"] == "svc"
            assert seen.json()["state"] == "input-required"
            other = await http.get(f"{live.url}/a2a/specialist/tasks/{child['taskId']}/trace",
                                   headers={"X-API-Key": alice_key})
            assert other.status_code in (403, 404)  # alice's key does not open the specialist, nor is it hers
    finally:
        live.stop()
