"""`parley serve` registers the built-in `assistant` only when a model server is configured."""

from __future__ import annotations

import httpx
from fake_llm import text

from parley.agents.llm import AgentLoop
from parley.client import A2AClient
from parley.protocol import models as m
from parley.serve import default_app


def test_without_a_model_server_only_the_builtin_agents_run(monkeypatch):
    monkeypatch.delenv("PARLEY_LLM_BASE_URL", raising=False)
    app = default_app(None)
    assert list(app.agents) == ["echo", "interviewer"]
    assert app.default_agent == "echo"


async def test_with_a_model_server_the_assistant_answers(monkeypatch, fake_llm, serve):
    monkeypatch.setenv("PARLEY_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("PARLEY_LLM_API_KEY", "env-key")
    monkeypatch.setenv("PARLEY_LLM_MODEL", "env-model")
    app = default_app(None)
    assert list(app.agents) == ["echo", "interviewer", "assistant"]
    assert app.default_agent == "echo"
    assert isinstance(app.agents["assistant"], AgentLoop)
    srv = serve(app)
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"{srv.url}/a2a/assistant/.well-known/agent-card.json", headers={"A2A-Version": "1.0"})
    card = resp.json()
    assert card["name"] == "Assistant" and "env-model" in card["description"]
    assert [s["id"] for s in card["skills"]] == ["chat"]
    fake_llm.script(text("Hi", " there"))
    async with await A2AClient.connect(f"{srv.url}/a2a/assistant") as client:
        task = await client.send("hello")
    assert task.status.state is m.TaskState.COMPLETED
    assert "".join(p.text for a in task.artifacts for p in a.parts) == "Hi there"
    req = fake_llm.requests[0]
    assert req["headers"]["authorization"] == "Bearer env-key" and req["json"]["model"] == "env-model"
