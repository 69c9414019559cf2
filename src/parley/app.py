"""`Parley`: the declaration of a set of agents served together, and their settings.

    app = Parley()

    @app.agent(id="shout", description="Answers in capitals")
    async def shout(ctx):
        yield ctx.text.upper()

    asgi = app.asgi()   # serve with uvicorn, or `parley serve --app module:app`

`Parley` only declares; :meth:`Parley.runtime` builds what runs them
(:class:`parley.runtime.Runtime`: store, bus, engine, service, pipeline).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from parley.agents.base import Agent, AgentOutput, FunctionAgent, RunContext
from parley.protocol import models as m
from parley.server.reserved import agent_id_problem
from parley.settings import DEFAULT_MAX_BODY_BYTES, CardOptions, Settings
from parley.tasks.store import TaskStore

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from parley.runtime import Runtime

AgentFn = Callable[[RunContext], AsyncIterator[AgentOutput]]


class Parley:
    """A set of agents served together, one endpoint and card per agent.

    Args:
        store: a task store to use instead of the one `settings.db` names (tests, embedding).
        settings: how to serve them (see :class:`parley.settings.Settings`).
    """

    def __init__(self, *, store: TaskStore | None = None, settings: Settings | None = None) -> None:
        self.agents: dict[str, Agent] = {}
        self.default_agent: str | None = None
        self.store = store
        self.settings = settings or Settings()

    def add_agent(self, agent: Agent, *, default: bool = False) -> Agent:
        """Host `agent` at `/a2a/{agent.id}`; the first one (or `default=True`) also owns `/`.

        Ids that would collide with Parley's own routes (`v1`, `tasks`, `.well-known`, any id with
        ':' ...; see :mod:`parley.server.reserved`) are refused with a ValueError saying why.
        """
        if agent.id in self.agents:
            raise ValueError(f"an agent with id {agent.id!r} is already registered")
        problem = agent_id_problem(agent.id)
        if problem is not None:
            raise ValueError(f"agent id {agent.id!r} cannot be used: {problem}")
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
        replies: bool = False,
    ) -> Callable[[AgentFn], AgentFn]:
        """Decorator: register an async generator function as an agent (`replies=True`: it may answer a message
        with a Message instead of a Task, by yielding `ctx.reply(...)` first; docs/agents.md)."""

        def register(fn: AgentFn) -> AgentFn:
            agent = FunctionAgent(fn, id=id, name=name, description=description, skills=skills,
                                  input_modes=input_modes, output_modes=output_modes, replies=replies)
            agent.extensions = list(extensions or [])
            self.add_agent(agent, default=default)
            return fn

        return register

    def runtime(self, settings: Settings | None = None, **access: Any) -> Runtime:
        """Build the runtime serving these agents (`settings` default: the app's own).

        `access` takes the pipeline's `authenticator`, `authorizer` and `limiter`.
        """
        from parley.runtime import Runtime

        return Runtime(self.agents, default_agent=self.default_agent, settings=settings or self.settings,
                       store=self.store, **access)

    def asgi(self, settings: Settings | None = None, **access: Any) -> Starlette:
        """Build the ASGI application (see :mod:`parley.server.app`); `access` as for :meth:`runtime`."""
        from parley.server.app import create_app

        return create_app(self.runtime(settings, **access))


__all__ = ["DEFAULT_MAX_BODY_BYTES", "CardOptions", "Parley", "Settings"]
