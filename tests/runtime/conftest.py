"""Fixtures of the agent-runtime tests: a fake model server and live Parley servers hosting LLM agents."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from fake_llm import FakeLLM

from parley.agents.base import Agent, InternalEvent
from parley.agents.llm import OpenAICompatBackend
from parley.app import Parley
from parley.tasks.memory_store import MemoryTaskStore


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A fake OpenAI-compatible server on 127.0.0.1, with no replies scripted yet."""
    fake = FakeLLM().start()
    yield fake
    fake.stop()


@pytest.fixture
def backend(fake_llm: FakeLLM) -> OpenAICompatBackend:
    """A backend pointed at the fake server, with fast retries."""
    return OpenAICompatBackend(base_url=fake_llm.base_url, api_key="test-key", model="fake-model",
                               timeout=20, max_attempts=3, backoff=0.001, max_backoff=0.01, env={})


@dataclass
class Hosted:
    """A live Parley server, and the internal events its engine's observers saw."""

    url: str
    internal: list[tuple[str, InternalEvent]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def agent_url(self, agent_id: str) -> str:
        return f"{self.url}/a2a/{agent_id}"

    def kinds(self, task_id: str | None = None) -> list[str]:
        with self.lock:
            return [ev.kind for tid, ev in self.internal if task_id is None or tid == task_id]

    def events(self, kind: str, task_id: str | None = None) -> list[InternalEvent]:
        with self.lock:
            return [ev for tid, ev in self.internal if ev.kind == kind and (task_id is None or tid == task_id)]


@pytest.fixture
def host(serve) -> Callable[..., Hosted]:
    """`host(agent, ...)` serves the agents on a live server that records internal events."""

    def start(*agents: Agent) -> Hosted:
        app = Parley(store=MemoryTaskStore())
        for agent in agents:
            app.add_agent(agent)
        srv = serve(app)
        hosted = Hosted(srv.url)

        def observe(task_id: str, event: InternalEvent) -> None:
            with hosted.lock:
                hosted.internal.append((task_id, event))

        srv.server.config.app.state.parley.engine.observers.append(observe)
        return hosted

    return start
