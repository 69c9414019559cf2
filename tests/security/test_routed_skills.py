"""A skill's scopes hold also when a routing rule is what sends a message to it.

Issue (security): "a request that selects a skill (a documented metadata key, or a routing rule that sends
it to that skill) is checked against them". A2A 1.0 section 7.5 (the server authorizes what an
authenticated client may do) and 4.4.5 (`AgentSkill.securityRequirements`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from parley.agents.base import AgentOutput, FunctionAgent, RunContext
from parley.app import Parley, Settings
from parley.hub.routing import RoutedAgent, RoutingRule
from parley.protocol import models as m
from parley.security.keys import SqliteKeyStore
from support import LiveServer

CLAIMS_SKILL = m.AgentSkill(id="claims", name="Claims", description="Warranty claims", tags=["warranty"],
                            security_requirements=[{"schemes": {"apiKey": {"list": ["claims"]}}}])


async def claims(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield f"claims desk: {ctx.text}"


async def front(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    yield f"front desk: {ctx.text}"


@pytest.fixture
async def server(tmp_path: Path) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    db = tmp_path / "s.db"
    store = SqliteKeyStore(str(db))
    tokens = {}
    for name, scopes in (("plain", {"a2a"}), ("claimant", {"a2a", "claims"})):
        _, tokens[name] = await store.create("front", scopes=frozenset(scopes), principal=name)
    await store.close()
    app = Parley(settings=Settings(db=str(db)))
    app.add_agent(FunctionAgent(claims, id="specialist", skills=[CLAIMS_SKILL]))
    rule = RoutingRule("front", "specialist", tags=["warranty"])
    app.add_agent(RoutedAgent(FunctionAgent(front, id="front"), [rule]))  # delegates with the server's delegator
    live = LiveServer(app, self_url=True).start()
    yield live, tokens
    live.stop()


def send(live: LiveServer, token: str, text: str, task_id: str | None = None) -> dict:
    message = {"messageId": f"m-{text}-{token[-6:]}", "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    resp = httpx.post(f"{live.url}/a2a/front", json=body, headers={"A2A-Version": "1.0", "X-API-Key": token},
                      timeout=30)
    return {"status": resp.status_code, **resp.json()}


async def test_a_message_routed_to_a_skill_needs_its_scopes(server) -> None:
    live, tokens = server
    refused = send(live, tokens["plain"], "my warranty claim")
    assert refused["status"] == 403 and refused["error"]["code"] == -31403, refused
    assert refused["error"]["message"] == ("This message is routed to skill 'claims' of agent 'specialist', "
                                           "which needs the scopes {claims}")
    listed = httpx.post(f"{live.url}/a2a/front", headers={"A2A-Version": "1.0", "X-API-Key": tokens["plain"]},
                        json={"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}, timeout=30).json()
    assert listed["result"]["tasks"] == []  # nothing was started

    allowed = send(live, tokens["claimant"], "my warranty claim")
    task = allowed["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "claims desk: my warranty claim"


async def test_a_message_no_rule_sends_to_a_skill_is_not_held_back(server) -> None:
    live, tokens = server
    answer = send(live, tokens["plain"], "opening hours please")
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "front desk: opening hours please"
