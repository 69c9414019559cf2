"""`RemoteAgent`: a remote A2A agent hosted as one of this server's agents.

    billing = await RemoteAgent.load("billing", "https://billing.example.com/.well-known/agent-card.json")
    app.add_agent(billing)

Its card (name, description, skills, modes) comes from the remote card; every turn
is delegated to the remote agent over A2A (see :mod:`parley.hub.delegation`), so
clients of this server see the remote's progress, artifacts and result, and its
follow-up questions: a continuation turn goes to the remote task through the
checkpoint. Canceling the local task cancels the remote one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing

import httpx

from parley.agents.base import Agent, AgentOutput, RunContext
from parley.client.card import fetch_card
from parley.client.errors import ClientError
from parley.hub.delegation import WELL_KNOWN_SUFFIXES, Delegator, Relay
from parley.protocol import models as m


def agent_url_of(card_url: str) -> str:
    """The agent URL a card URL belongs to (the card URL without its well-known suffix)."""
    for suffix in WELL_KNOWN_SUFFIXES:
        if card_url.endswith(suffix):
            return card_url[: -len(suffix)] or card_url
    return card_url


class RemoteAgent(Agent):
    """Fronts the A2A agent whose card is at `card_url` (or the agent URL itself).

    Args:
        id: the local agent id (`/a2a/{id}` on this server).
        card_url: the remote card's URL, or the remote agent's URL.
        card: the remote card, if already fetched (see :meth:`load`); without it the
            local card uses `name`/`description`/`skills` or generic values.
        name, description, skills: override what the remote card says.
        delegator: makes the calls (default: the server's, `ctx.delegator`, so the chain
            names this server's URL).
        relay: how the remote's artifacts are relayed ("same" keeps their ids).
        headers: the credentials this server presents to the remote agent (an API key, a bearer token),
            sent on the calls to it and nowhere else; the caller's own credentials are never forwarded.
    """

    def __init__(self, id: str, card_url: str, *, card: m.AgentCard | None = None, name: str | None = None,
                 description: str | None = None, skills: list[m.AgentSkill] | None = None,
                 delegator: Delegator | None = None, relay: Relay = "same",
                 headers: Mapping[str, str] | None = None, problem: str | None = None) -> None:
        self.id = id
        self.headers = dict(headers or {})
        self.card_url = card_url
        self.url = agent_url_of(card_url)
        self.problem = problem
        self._overrides = (name, description, skills)
        self.delegator = delegator
        self.relay: Relay = relay
        self._use_card(card)

    def _use_card(self, card: m.AgentCard | None) -> None:
        """Take name, description, skills and modes from the remote card (what the config set stays)."""
        name, description, skills = self._overrides
        id = self.id
        self.remote_card = card
        self.name = name or (card.name if card else id)
        self.description = description or (card.description if card else f"The remote agent at {self.url}")
        self.skills = skills or (list(card.skills) if card and card.skills else [
            m.AgentSkill(id=id, name=self.name, description=self.description, tags=["remote"])])
        self.version = (card.version if card and card.version else "1.0.0")
        self.input_modes = list(card.default_input_modes) if card and card.default_input_modes else ["text/plain"]
        self.output_modes = list(card.default_output_modes) if card and card.default_output_modes else ["text/plain"]
        self.extensions = []

    async def recheck(self, timeout: float = 10.0) -> bool:
        """Fetch the remote card again; True (and the card's details taken) when it answers."""
        try:
            async with httpx.AsyncClient(timeout=timeout, headers=self.headers or None) as http:
                card = await fetch_card(http, self.card_url)
        except ClientError as exc:
            self.problem = f"cannot load its card from {self.card_url}: {exc}"
            return False
        self._use_card(card)
        self.problem = None
        return True

    @classmethod
    async def load(cls, id: str, card_url: str, *, name: str | None = None, description: str | None = None,
                   skills: list[m.AgentSkill] | None = None, delegator: Delegator | None = None,
                   relay: Relay = "same", headers: Mapping[str, str] | None = None,
                   timeout: float = 10.0) -> RemoteAgent:
        """Fetch the remote card and build the agent; raises `parley.client.ClientError` if unreachable."""
        async with httpx.AsyncClient(timeout=timeout, headers=dict(headers or {}) or None) as http:
            card = await fetch_card(http, card_url)
        return cls(id, card_url, card=card, name=name, description=description, skills=skills,
                   delegator=delegator, relay=relay, headers=headers)

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        delegator = self.delegator or ctx.delegator or Delegator()
        if self.headers:
            delegator.add_credentials(self.url, self.headers)
        if Delegator.pending(ctx):  # the user answered the remote's question: continue the remote task
            call = delegator.resume(ctx, relay=self.relay)
        else:
            call = delegator.delegate(ctx, self.url, ctx.message, name=self.name, relay=self.relay)
        async with aclosing(call):
            async for out in call:
                yield out
