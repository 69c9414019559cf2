"""`Parley`: the object a user builds a server from — agents, store and settings.

    app = Parley()

    @app.agent(id="shout", description="Answers in capitals")
    async def shout(ctx):
        yield ctx.text.upper()

    asgi = app.asgi()   # serve with uvicorn, or `parley serve --app module:app`
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from parley.agents.base import Agent, AgentOutput, FunctionAgent, RunContext
from parley.protocol import models as m
from parley.server.cards import CardOptions
from parley.tasks.store import TaskStore

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

AgentFn = Callable[[RunContext], AsyncIterator[AgentOutput]]


@dataclass
class Settings:
    """Server settings; every field has a safe default."""

    public_url: str | None = None
    self_url: str | None = None  # how this server reaches itself (in-process delegation); default: public_url
    forwarded_allow_ips: list[str] = field(default_factory=lambda: ["127.0.0.1", "::1"])  # proxies to believe
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    keepalive_seconds: float = 15.0
    card: CardOptions = field(default_factory=CardOptions)
    # gRPC (A2A 1.0, needs parley[grpc]): also serve every agent on grpc_host:grpc_port; see server/grpc_server.py
    grpc_port: int | None = None
    grpc_host: str = "127.0.0.1"


class Parley:
    """A set of agents served together, one endpoint and card per agent."""

    def __init__(self, *, store: TaskStore | None = None, settings: Settings | None = None) -> None:
        self.agents: dict[str, Agent] = {}
        self.default_agent: str | None = None
        self.store = store
        self.settings = settings or Settings()
        self._delegator = None

    @property
    def delegator(self):
        """The delegator agents of this app use (`ctx.delegate(...)`); reads self_url at call time."""
        if self._delegator is None:
            from parley.hub.delegation import Delegator

            self._delegator = Delegator.for_app(self)
        return self._delegator

    def add_agent(self, agent: Agent, *, default: bool = False) -> Agent:
        """Host `agent` at `/a2a/{agent.id}`; the first one (or `default=True`) also owns `/`."""
        if agent.id in self.agents:
            raise ValueError(f"an agent with id {agent.id!r} is already registered")
        if not agent.id or "/" in agent.id:
            raise ValueError(f"agent id {agent.id!r} must be non-empty and contain no '/'")
        self.agents[agent.id] = agent
        if default or self.default_agent is None:
            self.default_agent = agent.id
        return agent

    def agent(
        self,
        id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        skills: list[m.AgentSkill] | None = None,
        input_modes: list[str] | None = None,
        output_modes: list[str] | None = None,
        extensions: list[m.AgentExtension] | None = None,
        default: bool = False,
    ) -> Callable[[AgentFn], AgentFn]:
        """Decorator: register an async generator function as an agent."""

        def register(fn: AgentFn) -> AgentFn:
            agent = FunctionAgent(fn, id=id, name=name, description=description, skills=skills,
                                  input_modes=input_modes, output_modes=output_modes)
            agent.extensions = list(extensions or [])
            self.add_agent(agent, default=default)
            return fn

        return register

    def asgi(self):
        """Build the ASGI application (see :mod:`parley.server.app`)."""
        from parley.server.app import create_app

        return create_app(self)
