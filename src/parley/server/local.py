"""Calling an agent of this server in process: the A2A contract without a card fetch or JSON over loopback.

A delegation to an agent hosted by the same runtime goes through :class:`LocalTransport`,
a client transport (like the JSON-RPC, HTTP+JSON and gRPC ones) that hands canonical
requests to the runtime's request pipeline. The callee gets its own task, log and trace,
`referenceTaskIds` name the caller's task, and the request passes the same access steps,
as the caller's principal. Each call is served in a task of its own, with its own
request scope, so telemetry sees a client call and a server request as over HTTP.

:class:`LocalAgents` says which URLs name agents of this server (its self URL and
public URL, `/a2a/{id}`, or the base URL for the default agent).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from parley.agents.base import Agent
from parley.client.jsonrpc import StreamItem
from parley.hub.delegation import normalise_url
from parley.protocol import models as m
from parley.protocol.codec import copy
from parley.protocol.operations import Operation
from parley.pump import Pump
from parley.server.access import Credentials, Principal
from parley.server.cards import Cards
from parley.server.pipeline import Call, Pipeline
from parley.server.resume import parse_event_id
from parley.telemetry import hooks as telemetry

BINDING = "LOCAL"


class LocalTransport:
    """A client transport to one agent of this runtime (binding `LOCAL`, A2A 1.0 semantics)."""

    binding = BINDING
    version = "1.0"

    def __init__(self, pipeline: Pipeline, agent_id: str, url: str, principal: Principal) -> None:
        self.pipeline = pipeline
        self.agent_id = agent_id
        self.url = url
        self.tenant = agent_id
        self.credentials = Credentials(principal=principal)

    def _decoder(self, op: Operation, request: Any, last_event_id: str | None = None) -> Any:
        resume = parse_event_id(last_event_id)

        async def decode() -> Call:
            # The engine fills in ids on the message it is given: it gets a copy, never the caller's object.
            return Call(self.agent_id, op, copy(request), "1.0", last_event_id=resume, agent_url=lambda: self.url)

        return decode

    @telemetry.traced_call  # telemetry: the CLIENT span of the call
    async def call(self, op: Operation, request: Any) -> Any:
        async def serve() -> Any:
            with telemetry.local_call(op, request):
                outcome = await self.pipeline.serve(BINDING, self.credentials, self._decoder(op, request),
                                                    self.agent_id)
                return outcome.result

        return await asyncio.ensure_future(serve())  # its own task: its own request scope

    @telemetry.traced_stream  # telemetry: the CLIENT span of the stream
    async def stream(self, op: Operation, request: Any, last_event_id: str | None = None) -> AsyncIterator[StreamItem]:
        pump: Pump[StreamItem] = Pump(self._serve_stream(op, request, last_event_id))
        try:
            while True:
                try:
                    yield await pump.get()
                except StopAsyncIteration:
                    return
        finally:
            await pump.aclose()

    async def _serve_stream(self, op: Operation, request: Any, last_event_id: str | None) -> AsyncIterator[StreamItem]:
        with telemetry.local_call(op, request):
            outcome = await self.pipeline.serve(BINDING, self.credentials, self._decoder(op, request, last_event_id),
                                                self.agent_id)
            assert outcome.events is not None
            async for entry in outcome.events:
                yield StreamItem(entry.event, str(entry.seq))

    async def close(self) -> None:
        """Nothing to release."""


class LocalAgents:
    """The agents of one runtime as a delegator sees them: which URLs are theirs, their cards, transports."""

    def __init__(self, pipeline: Callable[[], Pipeline], agents: Mapping[str, Agent], default_agent: str,
                 cards: Cards, base_urls: Callable[[], list[str]]) -> None:
        self.pipeline = pipeline  # read at call time: the pipeline is built after the delegator that uses this
        self.agents = agents
        self.default_agent = default_agent
        self.cards = cards
        self.base_urls = base_urls

    def agent_of(self, url: str) -> str | None:
        """The hosted agent `url` names (`{base}/a2a/{id}`, or `{base}` for the default agent), else None."""
        target = normalise_url(url)
        for base in self.base_urls():
            base = normalise_url(base)
            if target == base:
                return self.default_agent
            prefix = base + "/a2a/"
            if target.startswith(prefix):
                agent_id = target[len(prefix):]
                if agent_id in self.agents:
                    return agent_id
        return None

    def transport(self, url: str, owner: str) -> LocalTransport | None:
        """An in-process transport to the agent `url` names, calling as principal `owner`; None if not ours."""
        agent_id = self.agent_of(url)
        if agent_id is None:
            return None
        return LocalTransport(self.pipeline(), agent_id, url, Principal(owner, kind="internal"))

    def card(self, url: str) -> m.AgentCard | None:
        """The card of the agent `url` names, if it is one of ours."""
        agent_id = self.agent_of(url)
        return self.cards.card(agent_id, url) if agent_id is not None else None


__all__ = ["LocalAgents", "LocalTransport"]
