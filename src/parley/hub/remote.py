"""`RemoteAgent`: a remote A2A agent hosted as one of this server's agents.

    billing = await RemoteAgent.load("billing", "https://billing.example.com/.well-known/agent-card.json")
    app.add_agent(billing)

Its card (name, description, skills, modes) comes from the remote card; every turn
is delegated to the remote agent over A2A (see :mod:`parley.hub.delegation`), so
clients of this server see the remote's progress, artifacts and result, and its
follow-up questions: a continuation turn goes to the remote task through the
checkpoint. Canceling the local task cancels the remote one.

Credentials: fixed `headers` (an API key or a bearer token of this server's own), or, with `exchange`,
the caller's identity carried to the remote agent by OAuth 2.0 Token Exchange (RFC 8693,
:mod:`parley.security.token_exchange`): the bearer token the caller authenticated with is exchanged for a
token for the remote agent naming this agent as the actor, per call (cancels included), cached until shortly
before it expires. A refused exchange fails the delegation with the endpoint's reason; the fixed headers are
never used instead. A caller without a bearer token (an API key, the admin key, an open server's anonymous
caller, or a run resumed after a restart, whose caller's token is not kept) is refused, unless
`key_callers="fixed"`: then the fixed headers are sent for them (the remote sees this server, not them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Literal

import httpx

from parley.agents.base import Agent, AgentOutput, RunContext
from parley.client.card import fetch_card
from parley.client.errors import ClientError
from parley.hub.delegation import WELL_KNOWN_SUFFIXES, DelegationError, Delegator, Relay
from parley.protocol import models as m
from parley.security.token_exchange import TokenExchangeError, TokenExchanger
from parley.server.caller import current_caller

KeyCallers = Literal["refuse", "fixed"]


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
        exchange: carry the caller's identity by token exchange instead (see the module docs).
        key_callers: with `exchange`, what a caller without a bearer token gets: "refuse" (the delegation
            fails, the default) or "fixed" (`headers` are sent for them).
    """

    def __init__(self, id: str, card_url: str, *, card: m.AgentCard | None = None, name: str | None = None,
                 description: str | None = None, skills: list[m.AgentSkill] | None = None,
                 delegator: Delegator | None = None, relay: Relay = "same",
                 headers: Mapping[str, str] | None = None, problem: str | None = None,
                 exchange: TokenExchanger | None = None, key_callers: KeyCallers = "refuse") -> None:
        if key_callers not in ("refuse", "fixed"):
            raise ValueError(f"key_callers must be 'refuse' or 'fixed', not {key_callers!r}")
        if exchange is not None and key_callers == "fixed" and not headers:
            raise ValueError("key_callers='fixed' needs the fixed headers to send")
        self.id = id
        self.headers = dict(headers or {})
        self.exchange = exchange
        self.key_callers: KeyCallers = key_callers
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
        if self.exchange is not None:
            delegator.add_credentials(self.url, self.call_credentials)
        elif self.headers:
            delegator.add_credentials(self.url, self.headers)
        if Delegator.pending(ctx):  # the user answered the remote's question: continue the remote task
            call = delegator.resume(ctx, relay=self.relay)
        else:
            call = delegator.delegate(ctx, self.url, ctx.message, name=self.name, relay=self.relay)
        async with aclosing(call):
            async for out in call:
                yield out

    async def call_credentials(self, owner: str | None) -> dict[str, str]:
        """The headers of one call for a task of `owner`: a token exchanged for the caller, the fixed headers
        for a caller without a token when allowed; DelegationError (the delegation fails) otherwise."""
        assert self.exchange is not None
        caller = current_caller()
        if caller is None or caller.id != owner:
            raise DelegationError(f"{self.name} is called with the caller's identity (token exchange), and the "
                                  "caller's token is not known here (it is never stored: a task resumed after a "
                                  "restart must be sent a new message)")
        if caller.token is None:
            if self.key_callers == "fixed":
                return dict(self.headers)
            how = "an API key" if caller.kind == "key" else f"no bearer token ({caller.kind})"
            raise DelegationError(f"{self.name} is called with the caller's identity (token exchange), and this "
                                  f"caller authenticated with {how}, not a bearer token: refused")
        try:
            issued = await self.exchange.exchange(caller.token)
        except TokenExchangeError as exc:
            raise DelegationError(f"token exchange for {self.name} failed: {exc}") from None
        return {"Authorization": f"Bearer {issued.access_token}"}
