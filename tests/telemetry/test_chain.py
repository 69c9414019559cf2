"""The example fleet (examples/fleet: front-desk -> billing -> support) traced end to end: one trace."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.trace import SpanKind
from otelkit import Otel

from parley.client import A2AClient
from parley.hub.build import build_app
from parley.hub.config import load_config
from parley.protocol import models as m
from support import LiveServer

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet" / "parley.toml"
AGENTS = ["front-desk", "billing", "support"]


@pytest.fixture
def fleet() -> Iterator[LiveServer]:
    """The example fleet in-process, on a live server that knows its own URL (delegations go over HTTP)."""
    config = load_config(str(FLEET))
    config.server.db = "memory"
    live = LiveServer(asyncio.run(build_app(config)), self_url=True).start()
    yield live
    live.stop()


def server_spans(otel: Otel) -> dict[str, list]:
    out: dict[str, list] = {}
    for span in otel.finished():
        if span.kind is SpanKind.SERVER:
            out.setdefault(span.attributes["a2a.agent_id"], []).append(span)
    return out


def ancestry(otel: Otel, span) -> list:
    """The span's ancestors, nearest first, as far as they were recorded."""
    chain = []
    while span.parent is not None:
        span = otel.by_id(span.parent.span_id)
        if span is None:
            break
        chain.append(span)
    return chain


async def test_one_message_across_three_agents_is_one_trace(spans, fleet):
    async with await A2AClient.connect(f"{fleet.url}/a2a/front-desk") as client:
        events = [ev async for ev in client.stream("I want a refund for my broken router, invoice INV-1042")]
    final = events[-1]
    assert isinstance(final, m.TaskStatusUpdateEvent) and final.status.state is m.TaskState.COMPLETED
    fleet.stop()  # a stopped server has ended (and exported) every span it started

    servers = server_spans(spans)
    assert sorted(servers) == sorted(AGENTS)
    for agent in AGENTS:
        assert [s.name for s in servers[agent]] == ["a2a SendStreamingMessage"]
    clients = [s for s in spans.finished() if s.kind is SpanKind.CLIENT]
    assert [s.name for s in clients] == ["a2a SendStreamingMessage"] * 3  # test -> front-desk -> billing -> support
    assert len({s.context.trace_id for s in spans.finished()}) == 1  # ONE trace

    # support's request span descends from billing's task, which descends from front-desk's task
    support, = servers["support"]
    names = [(s.name, s.kind) for s in ancestry(spans, support)]
    assert names == [
        ("a2a SendStreamingMessage", SpanKind.CLIENT),  # billing's delegation call
        ("a2a task billing", SpanKind.INTERNAL),
        ("a2a SendStreamingMessage", SpanKind.SERVER),  # billing's request
        ("a2a SendStreamingMessage", SpanKind.CLIENT),  # front-desk's delegation call
        ("a2a task front-desk", SpanKind.INTERNAL),
        ("a2a SendStreamingMessage", SpanKind.SERVER),  # front-desk's request
        ("a2a SendStreamingMessage", SpanKind.CLIENT),  # this test's call
    ]
    root = ancestry(spans, support)[-1]
    assert root.parent is None
    tasks = {s.attributes["a2a.agent_id"]: s for s in spans.finished() if s.name.startswith("a2a task ")}
    assert {a: t.attributes["a2a.task.state"] for a, t in tasks.items()} == dict.fromkeys(AGENTS, "completed")
    delegations = [e for e in tasks["billing"].events if e.name == "a2a.delegation"]
    assert delegations and delegations[0].attributes["a2a.delegate.agent"] == "Support"
    routes = [e for e in tasks["front-desk"].events if e.name == "a2a.route"]
    assert routes and routes[0].attributes["a2a.route.to"] == "billing"


async def test_a_conversation_in_a_span_of_the_caller_stays_in_its_trace(spans, fleet):
    """Two turns (billing asks for the invoice in between) under the caller's own span: one trace."""
    tracer = spans.tracer_provider.get_tracer("tests")
    with tracer.start_as_current_span("conversation") as conversation:
        async with await A2AClient.connect(f"{fleet.url}/a2a/front-desk") as client:
            first = [ev async for ev in client.stream("I want a refund for my broken router")]
            task_id = first[0].id
            assert first[-1].status.state is m.TaskState.INPUT_REQUIRED
            second = [ev async for ev in client.stream("INV-1042", task_id=task_id)]
            assert second[-1].status.state is m.TaskState.COMPLETED
    fleet.stop()
    trace_id = conversation.get_span_context().trace_id
    assert {s.context.trace_id for s in spans.finished()} == {trace_id}
    servers = server_spans(spans)
    assert len(servers["front-desk"]) == 2 and len(servers["billing"]) == 2 and len(servers["support"]) == 1
    turns = sorted((s for s in spans.finished() if s.name == "a2a task billing"), key=lambda s: s.start_time)
    assert [t.attributes["a2a.task.state"] for t in turns] == ["input-required", "completed"]
