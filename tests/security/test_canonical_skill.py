"""One canonical skill per request: the scope check and the agent see the same skill, or the request is refused.

Issue 28 item 8: the skill-scope check was bypassed when the request metadata named an allowed skill while the
message metadata named the restricted one, or when the skill was sent as a list. A2A 1.0 section 7.5 (the
server authorizes what an authenticated client may do), 4.4.5 (`AgentSkill.securityRequirements`), and
section 5 / JSON-RPC error -32602 (InvalidParams) for a request the server cannot read one way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents.base import AgentOutput, FunctionAgent, RunContext
from parley.app import Parley, Settings
from parley.protocol import models as m
from parley.security.keys import SqliteKeyStore
from support import LiveServer

CLAIMS = m.AgentSkill(id="claims", name="Claims", description="Warranty claims", tags=["warranty"],
                      security_requirements=[{"schemes": {"apiKey": {"list": ["claims"]}}}])
PUBLIC = m.AgentSkill(id="public", name="Public", description="Opening hours", tags=["hours"])


async def desk(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield f"skill={ctx.skill} principal={ctx.principal} scopes={','.join(sorted(ctx.scopes))}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[LiveServer, str]]:
    db = tmp_path / "s.db"
    store = SqliteKeyStore(str(db))
    _, token = asyncio.run(store.create("desk", scopes=frozenset({"a2a"}), principal="alice"))
    asyncio.run(store.close())
    app = Parley(settings=Settings(db=str(db)))
    app.add_agent(FunctionAgent(desk, id="desk", skills=[PUBLIC, CLAIMS]))
    live = LiveServer(app).start()
    yield live, token
    live.stop()


def send(live: LiveServer, token: str, *, request_meta: Any = None, message_meta: Any = None) -> httpx.Response:
    message: dict[str, Any] = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
    if message_meta is not None:
        message["metadata"] = message_meta
    params: dict[str, Any] = {"message": message}
    if request_meta is not None:
        params["metadata"] = request_meta
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    return httpx.post(f"{live.url}/a2a/desk", json=body, headers={"A2A-Version": "1.0", "X-API-Key": token},
                      timeout=30)


def no_tasks(live: LiveServer, token: str) -> bool:
    listed = httpx.post(f"{live.url}/a2a/desk", headers={"A2A-Version": "1.0", "X-API-Key": token},
                        json={"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}, timeout=30).json()
    return listed["result"]["tasks"] == []


def test_an_allowed_skill_in_the_request_does_not_cover_a_restricted_one_in_the_message(server) -> None:
    live, token = server
    resp = send(live, token, request_meta={"parley.skill": "public"}, message_meta={"parley.skill": "claims"})
    error = resp.json()["error"]
    assert error["code"] == -32602, resp.text  # JSON-RPC: errors ride HTTP 200
    assert error["message"] == ("Invalid params: the request metadata names skill 'public' but the message "
                                "metadata names 'claims' ('parley.skill'): name one skill")
    assert no_tasks(live, token)


@pytest.mark.parametrize("where", ["request", "message"])
def test_a_skill_sent_as_a_list_is_refused(server, where: str) -> None:
    live, token = server
    meta = {"parley.skill": ["public", "claims"]}
    resp = send(live, token, **{f"{where}_meta": meta})
    error = resp.json()["error"]
    assert error["code"] == -32602, resp.text  # JSON-RPC: errors ride HTTP 200
    assert error["message"] == (f"Invalid params: the {where} metadata 'parley.skill' must be one skill id "
                                "(a non-empty string), not list ['public', 'claims']")
    assert no_tasks(live, token)


def test_the_restricted_skill_named_in_the_message_alone_is_checked(server) -> None:
    live, token = server
    resp = send(live, token, message_meta={"parley.skill": "claims"})
    error = resp.json()["error"]
    assert error["code"] == -31403 and error["message"] == "Skill 'claims' needs the scopes {claims}", resp.text


@pytest.mark.parametrize("places", [("request",), ("message",), ("request", "message")])
def test_the_agent_receives_exactly_the_checked_skill_and_its_caller(server, places: tuple[str, ...]) -> None:
    live, token = server
    meta = {f"{where}_meta": {"parley.skill": "public"} for where in places}
    resp = send(live, token, **meta)
    task = resp.json()["result"]["task"]
    assert task["artifacts"][0]["parts"][0]["text"] == "skill=public principal=alice scopes=a2a"
