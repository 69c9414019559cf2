"""The hub test fleet: agents that route and delegate to each other over A2A, on live servers.

    front-desk  RoutedAgent: "invoice"/"refund" -> billing (priority 10); any skill tag of
                specialist's card ("warranty", "repair") -> specialist; else answers itself
    billing     delegates to specialist (or to waiter when the text says "slowly", back to
                front-desk when it says "loop": a cycle)
    specialist  asks "Which invoice number is it?" until a message names one (INV-n), then
                answers with a data artifact and streamed text
    waiter      says it is waiting and waits until canceled
    hop1..hop6  each delegates to the next (hop6 -> hop7 exceeds the default depth limit)
    offline     a RemoteAgent whose remote is a closed port
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from parley.agents.base import AgentOutput, FunctionAgent, RunContext
from parley.app import Parley
from parley.client import A2AClient
from parley.hub.delegation import Delegator
from parley.hub.remote import RemoteAgent
from parley.hub.routing import RoutedAgent, RoutingRule
from parley.protocol import models as m
from parley.tasks.memory_store import MemoryTaskStore
from parley.tasks.store import TaskStore
from support import LiveServer


@dataclass
class Fleet:
    """The fleet's live server."""

    live: LiveServer
    closed_port: int

    @property
    def url(self) -> str:
        return self.live.url

    def agent(self, agent_id: str) -> str:
        return f"{self.live.url}/a2a/{agent_id}"


WAIT = 15.0  # upper bound when polling observable state; never a pacing delay
QUESTION = "Which invoice number is it?"
T = TypeVar("T")


def user_texts(ctx: RunContext) -> str:
    return " ".join(msg.text() for msg in ctx.history if msg.role is m.Role.USER)


async def specialist(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Handles refunds and warranty claims once it knows the invoice number."""
    found = re.search(r"INV-\d+", user_texts(ctx))
    if found is None:
        yield ctx.ask(QUESTION)
        return
    invoice = found.group(0)
    yield ctx.say(f"specialist: reviewing {invoice}")
    yield m.Artifact(artifact_id="report", name="report", parts=[m.Part(data={"invoice": invoice, "refund": "approved"})])
    for piece in ("Refund ", "approved ", f"for {invoice}."):
        yield piece


SPECIALIST_SKILLS = [m.AgentSkill(id="claims", name="Claims", description="Refunds and warranty claims",
                                  tags=["warranty", "repair"])]


def specialist_agent() -> FunctionAgent:
    return FunctionAgent(specialist, id="specialist", name="specialist",
                         description="Refunds and warranty claims", skills=SPECIALIST_SKILLS)


def fleet_app(closed_port: int, store: TaskStore | None = None) -> Parley:
    """The three-agent fleet plus the helpers of the failure tests, in one app."""
    app = Parley(store=store or MemoryTaskStore())
    delegator = Delegator(self_url=lambda: app.settings.self_url)

    async def front_desk(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        """Greets visitors and sends them on."""
        yield f"Front desk here. You said: {ctx.text}"

    rules = [
        RoutingRule("front-desk", "specialist", tags=["*"], priority=5),
        RoutingRule("front-desk", "billing", keywords=["invoice", "refund"], priority=10),
    ]
    app.add_agent(RoutedAgent(FunctionAgent(front_desk, id="front-desk"), rules, delegator=delegator))

    async def billing(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        """Invoices and refunds."""
        if Delegator.pending(ctx):
            async for out in delegator.resume(ctx):
                yield out
            return
        yield ctx.say("billing: checking the account")
        text = ctx.text
        target = "front-desk" if "loop" in text else "waiter" if "slowly" in text else "specialist"
        async for out in delegator.delegate(ctx, target, f"billing asks: {text}"):
            yield out

    app.add_agent(FunctionAgent(billing, id="billing", skills=[
        m.AgentSkill(id="billing", name="Billing", description="Invoices and refunds", tags=["invoice", "refund"])]))
    app.add_agent(specialist_agent())

    async def waiter(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        """Waits until canceled."""
        yield ctx.say("waiter: waiting")
        await asyncio.Event().wait()

    app.add_agent(FunctionAgent(waiter, id="waiter"))

    def hop(i: int) -> FunctionAgent:
        async def run(ctx: RunContext) -> AsyncIterator[AgentOutput]:
            async for out in delegator.delegate(ctx, f"hop{i + 1}", ctx.message):
                yield out

        return FunctionAgent(run, id=f"hop{i}", description=f"Hop {i}")

    for i in range(1, 7):
        app.add_agent(hop(i))
    app.add_agent(RemoteAgent("offline", f"http://127.0.0.1:{closed_port}/a2a/nobody",
                              delegator=Delegator(self_url=lambda: app.settings.self_url, retries=2, backoff=0.01)))
    return app


async def until(probe: Callable[[], Awaitable[T]], what: str, timeout: float = WAIT) -> T:
    """Poll `probe` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def trace(url: str, task_id: str, depth: int | None = None) -> dict[str, Any]:
    """GET the trace of a task from an agent URL."""
    async with httpx.AsyncClient(timeout=30) as http:
        resp = await http.get(f"{url}/tasks/{task_id}/trace", params={"depth": depth} if depth is not None else None)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def get_task(url: str, task_id: str) -> m.Task:
    async with await A2AClient.connect(url) as client:
        return await client.get(task_id)


async def collect(client: A2AClient, message: m.Message | str, **kw: Any) -> list[m.StreamEvent]:
    return [ev async for ev in client.stream(message, **kw)]


def status_texts(events: list[m.StreamEvent]) -> list[str]:
    return [ev.status.message.text() for ev in events
            if isinstance(ev, m.TaskStatusUpdateEvent) and ev.status.message is not None]


def last_state(events: list[m.StreamEvent]) -> m.TaskState:
    states = [ev.status.state for ev in events if isinstance(ev, m.TaskStatusUpdateEvent)]
    return states[-1]


def path_of(tree: dict[str, Any]) -> list[tuple[str, str]]:
    """(agent, state) down the first child of each level."""
    out = []
    node: dict[str, Any] | None = tree
    while node is not None:
        out.append((node["agent"], node["state"]))
        node = node["children"][0] if node.get("children") else None
    return out
