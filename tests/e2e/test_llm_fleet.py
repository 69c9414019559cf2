"""The LLM fleet (examples/fleet/parley-llm.toml) end to end, against the fake OpenAI-compatible server.

The configuration is loaded as `parley serve --config` would load it, with two
overrides: `[llm].base_url` points at tests/runtime/fake_llm.py's server (which
speaks the real streaming wire format, tool-call deltas included) and the database
is a file of the test. The variable named by `api_key_env` is set for the test, so
the key plumbing is exercised too. The fake model first calls the `delegate` tool
(billing, a refund for INV-7 and a broken router), then answers with what the tool
returned; billing (a Python agent) asks support before approving the refund, so the
request crosses front-desk -> billing -> support over A2A on the same server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

_TESTS = Path(__file__).resolve().parents[1]
REPO = _TESTS.parent
if str(_TESTS / "runtime") not in sys.path:
    sys.path.append(str(_TESTS / "runtime"))

from fake_llm import FakeLLM, text, tool_calls

from parley.client import A2AClient
from parley.hub.build import build_app
from parley.hub.config import Config, load_config
from parley.protocol import models as m
from support import LiveServer

WAIT = 30.0  # upper bound for one step (a blocking send crosses three agents); never a pacing delay
CONFIG = REPO / "examples" / "fleet" / "parley-llm.toml"
API_KEY = "fleet-test-key"
REQUEST = "Customer asks for a refund of invoice INV-7: the router they bought is broken and will not boot."
APPROVED = "Refund approved for INV-7: support confirmed the fault."
FINAL = f"Good news: billing says \"{APPROVED}\""
BILLING_DESCRIPTION = "Invoices and refunds; asks support to confirm faults."
SUPPORT_DESCRIPTION = "Diagnoses broken devices."
LIMIT_FIELDS = ("max_iterations", "max_tool_calls", "model_timeout", "tool_timeout", "token_budget")


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    fake = FakeLLM().start()
    yield fake
    fake.stop()


def fleet_config(base_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """examples/fleet/parley-llm.toml, its model server replaced by `base_url`, its database by a test file."""
    monkeypatch.syspath_prepend(str(REPO))  # `examples.fleet.agents`, whatever the working directory
    config = load_config(CONFIG)
    key_env = config.llm.api_key_env
    assert key_env, "the example names the variable holding the API key"
    monkeypatch.setenv(key_env, API_KEY)
    config.llm.base_url = base_url
    config.server.db = str(tmp_path / "fleet-llm.db")
    return config


DECLARED_LIMITS = {"max_iterations": 6, "max_tool_calls": 6}  # [agents.limits] of front-desk in the example


async def test_the_example_config_builds_with_its_declared_limits(tmp_path, monkeypatch):
    app = await build_app(fleet_config("http://127.0.0.1:9/v1", tmp_path, monkeypatch))
    front = app.agents["front-desk"]
    limits = getattr(front, "inner", front).limits
    assert {name: getattr(limits, name) for name in DECLARED_LIMITS} == DECLARED_LIMITS
    assert app.settings.db == str(tmp_path / "fleet-llm.db")  # building declares; nothing is opened yet
    assert not (tmp_path / "fleet-llm.db").exists()


@pytest.fixture
async def fleet(fake_llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LiveServer]:
    """The configured fleet on a live server that knows its own URL (the delegations call it)."""
    config = fleet_config(fake_llm.base_url, tmp_path, monkeypatch)
    # Work around the build bug above: build without the [agents.limits] tables, then give each LLM agent
    # exactly the limits its table declares.
    declared = {}
    for cfg in config.agents:
        if cfg.limits is not None:
            declared[cfg.id] = {k: v for k in LIMIT_FIELDS if (v := getattr(cfg.limits, k)) is not None}
            cfg.limits = None
    assert declared == {"front-desk": DECLARED_LIMITS}
    app = await build_app(config)
    for agent_id, values in declared.items():
        agent = app.agents[agent_id]
        inner = getattr(agent, "inner", agent)  # LLM agents that delegate are wrapped in a RoutedAgent
        inner.limits = dataclasses.replace(inner.limits, **values)
    assert set(app.agents) == {"front-desk", "billing", "support"} and app.default_agent == "front-desk"
    live = LiveServer(app, self_url=True).start()
    try:
        yield live
    finally:
        live.stop()


def artifact_text(task: m.Task) -> str:
    return "".join(p.text or "" for a in task.artifacts or [] for p in a.parts)


async def test_front_desk_delegates_to_billing_which_asks_support(fleet: LiveServer, fake_llm: FakeLLM):
    fake_llm.script(
        tool_calls(("call-refund", "delegate", {"agent": "billing", "message": REQUEST})),
        text("Good news: billing says ", f"\"{APPROVED}\""),
    )
    base = fleet.url
    async with await A2AClient.connect(f"{base}/a2a/front-desk") as client:
        task = await asyncio.wait_for(client.send("Hi, my router is broken and I want my money back (INV-7)."), WAIT)

    # The client sees the model's final answer.
    assert isinstance(task, m.Task)
    assert task.status.state is m.TaskState.COMPLETED, task.status
    assert artifact_text(task) == FINAL

    # The model was called twice, with the configured model and key.
    assert [r["path"] for r in fake_llm.requests] == ["/v1/chat/completions"] * 2
    assert all(r["headers"].get("authorization") == f"Bearer {API_KEY}" for r in fake_llm.requests)
    first, second = fake_llm.bodies
    assert first["model"] == "gpt-4o-mini" and first["stream"] is True

    # ... and was offered the delegate tool, listing billing and support with their descriptions.
    assert first["messages"][0]["role"] == "system" and "front desk" in first["messages"][0]["content"]
    assert first["messages"][1:] == [{"role": "user", "content": task.history[0].text()}]
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(tools) == {"delegate"}
    delegate = tools["delegate"]
    assert f"- billing: {BILLING_DESCRIPTION}" in delegate["description"]
    assert f"- support: {SUPPORT_DESCRIPTION}" in delegate["description"]
    agent_param = delegate["parameters"]["properties"]["agent"]
    assert agent_param["enum"] == ["billing", "support"]
    assert f"billing: {BILLING_DESCRIPTION}" in agent_param["description"]
    assert f"support: {SUPPORT_DESCRIPTION}" in agent_param["description"]
    assert delegate["parameters"]["required"] == ["agent", "message"]

    # The second call carries the tool call and billing's answer as the tool result.
    assert second["messages"][:2] == first["messages"]
    assistant, result = second["messages"][2:]
    assert assistant["role"] == "assistant"
    assert [(c["id"], c["function"]["name"]) for c in assistant["tool_calls"]] == [("call-refund", "delegate")]
    assert result["role"] == "tool" and result["tool_call_id"] == "call-refund"
    assert APPROVED in result["content"]

    # The trace shows front-desk -> billing -> support, each completed, each the parent of the next.
    async with httpx.AsyncClient(timeout=WAIT) as http:
        resp = await http.get(f"{base}/a2a/front-desk/tasks/{task.id}/trace")
    assert resp.status_code == 200, resp.text
    tree = resp.json()
    assert (tree["agent"], tree["taskId"], tree["state"]) == ("front-desk", task.id, "completed")
    assert [c["agent"] for c in tree["children"]] == ["billing"]
    billing = tree["children"][0]
    assert billing["state"] == "completed" and billing["parent"] == task.id
    assert [c["agent"] for c in billing["children"]] == ["support"]
    support = billing["children"][0]
    assert support["state"] == "completed" and support["parent"] == billing["taskId"]
    assert support["children"] == []

    # Billing got the model's request as written; support got billing's, which still names the router.
    async with await A2AClient.connect(f"{base}/a2a/billing") as b:
        billing_task = await asyncio.wait_for(b.get(billing["taskId"]), WAIT)
    assert billing_task.history[0].text() == REQUEST
    assert billing_task.history[0].reference_task_ids == [task.id]
    assert APPROVED in artifact_text(billing_task)
    async with await A2AClient.connect(f"{base}/a2a/support") as s:
        support_task = await asyncio.wait_for(s.get(support["taskId"]), WAIT)
    asked = support_task.history[0].text()
    assert "INV-7" in asked and "router" in asked
    assert "router has a hardware fault" in artifact_text(support_task)
