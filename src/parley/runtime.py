"""The runtime: the composition root of one Parley server.

Built from the agents and one :class:`~parley.settings.Settings`, it owns the
store, the event bus, the task engine, the A2A service and the request pipeline
(with its authenticator, authorizer and rate limiter), the delegator agents use,
and the cards. It starts and stops them in order. The HTTP app, the gRPC server
and the dashboard take a runtime; nothing reaches around it.

    runtime = Runtime(agents, settings=Settings(db="memory"))
    await runtime.start()
    ...
    await runtime.stop()
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

import msgspec

from parley.agents.base import Agent
from parley.backends import Backends
from parley.hub.delegation import Delegator
from parley.protocol import models as m
from parley.push.setup import Push
from parley.security.keys import KeyStore
from parley.security.ratelimit import Limiter
from parley.security.setup import Security
from parley.server.access import Authenticator, Authorizer, Principal, RateLimiter
from parley.server.caller import current_caller
from parley.server.card_signing import JWKS_PATH, CardSigner, signature
from parley.server.cards import Cards, card_v1
from parley.server.local import LocalAgents
from parley.server.pipeline import Pipeline
from parley.server.service import A2AService
from parley.settings import Settings
from parley.tasks.bus import EventBus
from parley.tasks.engine import TaskEngine
from parley.tasks.retention import Pruner
from parley.tasks.store import TaskStore

log = logging.getLogger("parley.runtime")


class Runtime:
    """Everything one Parley server runs on, wired together once.

    Args:
        agents: the hosted agents by id (the first is the default unless `default_agent` says otherwise).
        settings: how to run; `settings.db` picks the store unless `store` is given.
        store, bus, keys: replace the task store, bus and API key store the settings would build.
        authenticator, authorizer, limiter: replace the access steps of the request pipeline (default: built
            from `settings.auth` and `settings.limits`: open until a credential is configured).
    """

    def __init__(
        self,
        agents: Mapping[str, Agent],
        *,
        default_agent: str | None = None,
        settings: Settings | None = None,
        store: TaskStore | None = None,
        bus: EventBus | None = None,
        keys: KeyStore | None = None,
        authenticator: Authenticator | None = None,
        authorizer: Authorizer | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        if not agents:
            raise ValueError("a Parley server needs at least one agent")
        if default_agent is not None and default_agent not in agents:
            raise ValueError(f"the default agent {default_agent!r} is not one of the agents")
        self.agents = agents
        self.default_agent = default_agent or next(iter(agents))
        self.settings = settings or Settings()
        shadowed = self.settings.dashboard.shadow_problem(agents)  # checked here for apps built in Python too
        if shadowed is not None:
            raise ValueError(f"dashboard.path {self.settings.dashboard.path!r}: {shadowed}")
        self.backends = Backends(self.settings)
        self.store = store or self.backends.store()
        self.bus = bus or self.backends.bus()
        self.backends.link(self.store, self.bus)
        self.cards = Cards(agents, self.settings)
        self.card_signer = CardSigner(self.backends.card_keys())  # signs every well-known card (A2A 1.0 §8.4)
        # Delegations to this server's own agents run in process, through the pipeline built below.
        self.local = LocalAgents(lambda: self.pipeline, agents, self.default_agent, self.cards, self._base_urls)
        self.delegator = Delegator(self_url=self.settings.reachable_self_url, local=self.local)
        self.engine = TaskEngine(self.store, agents, bus=self.bus, delegator=self.delegator,
                                 cancel_child=self.delegator.cancel_link, lease_seconds=self.settings.lease_seconds,
                                 commit_retry_seconds=self.settings.commit_retry_seconds,
                                 max_history=self.settings.limits.max_history_length,
                                 limits=self.settings.limits, caller=current_caller)
        unknown = sorted(set(self.settings.push.agents) - set(agents))
        if unknown:
            raise ValueError(f"push.agents names no hosted agent: {', '.join(unknown)} "
                             f"(the agents are: {', '.join(agents)})")
        self.push = (Push(self.settings, self.store, self._issuer, keys=self.backends.signing_keys)
                     if self.settings.push_enabled else None)
        if self.push is not None:
            self.engine.committed.append(self.push.on_commit)
        self.keys = keys if keys is not None else self.backends.keys()
        self.security = Security(self.settings, agents, self.keys, delegator=self.delegator)
        self.service = A2AService(self.engine, card=self.public_card, extended_card=self.extended_card,
                                  push_notifications=self.push is not None,
                                  push=self.push.configs if self.push is not None else None,
                                  streaming=self.settings.card.streaming,
                                  max_subscribers=self.settings.limits.max_subscribers_per_task)
        self.counters = None  # shared rate-limit counters (Redis), made with the limiter
        self.pipeline = Pipeline(self.service, authenticator=authenticator or self.security.authenticator,
                                 authorizer=authorizer or self.security.authorizer,
                                 limiter=limiter or self._limiter(), input_limits=self.settings.limits)
        self.started_at = time.time()
        self.running = False
        self.draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rechecks: list[asyncio.Task] = []
        self.pruner = Pruner(self.store, self.settings.retention)

    def _limiter(self) -> Limiter:
        """The rate limiter of `settings.limits` (per-agent entries must name hosted agents)."""
        limits = self.settings.limits
        unknown = sorted(set(limits.agents) - set(self.agents))
        if unknown:
            raise ValueError(f"limits.agents names no hosted agent: {', '.join(unknown)} "
                             f"(the agents are: {', '.join(self.agents)})")
        self.counters = self.backends.counters()
        return Limiter(limits, per_agent=limits.agents, running=self.engine.running, counters=self.counters,
                       running_of=self.engine.running_of)

    async def start(self) -> None:
        """Connect the stores and the bus, recover what a stopped process left running, then take requests."""
        await self.store.open()
        await self.bus.start()
        await self.keys.open()
        await self.card_signer.keys.open()
        await self.card_signer.active()  # the card key is made on the first start
        if self.push is not None:
            await self.push.open()
        self._loop = asyncio.get_running_loop()
        failed = await self.engine.start()
        if self.push is not None:
            self.push.start()  # notifications left pending by a previous run go out now
        self.pruner.start()
        await self._check_agents()
        self._rechecks = [asyncio.create_task(self._recheck(agent_id), name=f"parley-recheck-{agent_id}")
                          for agent_id, agent in self.agents.items() if agent.problem is not None]
        self.running = True
        log.debug("runtime started (%d task(s) failed at recovery)", len(failed))

    async def _check_agents(self) -> None:
        """Each agent's own check at start (an LLM agent's model server): one warning line for each that cannot
        work now; it is served all the same, and rechecked in the background until it can."""
        agents = list(self.agents.values())
        results = await asyncio.gather(*(a.check_at_start() for a in agents), return_exceptions=True)
        for agent, result in zip(agents, results, strict=True):
            if isinstance(result, BaseException):
                log.error("checking agent %r at start failed: %s", agent.id, result)
            elif agent.problem is not None:
                log.warning("agent %r is unavailable: %s; /readyz lists it, and the server tries again every %g s",
                            agent.id, agent.problem, self.settings.recheck_seconds)

    def unavailable_agents(self) -> dict[str, str]:
        """The hosted agents that cannot work now, and why (a remote agent out of reach)."""
        return {agent_id: agent.problem for agent_id, agent in self.agents.items() if agent.problem is not None}

    async def _recheck(self, agent_id: str) -> None:
        """Try an unavailable agent again every `recheck_seconds` until it is available; then its card is new."""
        agent = self.agents[agent_id]
        while True:
            await asyncio.sleep(self.settings.recheck_seconds)
            try:
                if await agent.recheck():
                    self.cards.forget(agent_id)
                    log.warning("agent %r is available again", agent_id)
                    return
            except Exception:  # a broken recheck must not end the server; try again later
                log.exception("rechecking agent %r failed", agent_id)

    def begin_stop(self) -> None:
        """The server is about to stop (SIGTERM): /readyz answers 503 so the load balancer sends no more work,
        and every open stream ends now with a hint to resume (Last-Event-ID) elsewhere; :meth:`stop` then
        gives running tasks `settings.drain_seconds` to finish before handing them over."""
        self.running = False
        self.draining = True
        self.bus.end_streams()

    def begin_stop_threadsafe(self) -> None:
        """:meth:`begin_stop` from a signal handler or another thread (on the runtime's own event loop)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.begin_stop)

    async def stop(self) -> None:
        """Stop the running agents (their tasks stay resumable), then close the bus and the stores."""
        self.running = False
        for job in self._rechecks:
            job.cancel()
        await asyncio.gather(*self._rechecks, return_exceptions=True)
        await self.pruner.stop()
        try:
            await self.engine.shutdown(self.settings.drain_seconds if self.draining else 0.0)
            if self.push is not None:
                await self.push.stop()
        finally:
            await self.bus.close()
            await self.store.close()
            await self.card_signer.keys.close()
            await self.security.close()
            if self.keys is not None:
                await self.keys.close()
            if self.counters is not None:
                await self.counters.close()

    async def readiness(self, timeout: float = 2.0) -> dict[str, str]:
        """What keeps this server from taking work, by part ("ok" when nothing): started and not stopping,
        the store reachable (at its schema), the bus connected. For GET /readyz."""
        checks = {"runtime": "ok" if self.running else "not started, or stopping"}
        for name, ping in (("store", self.store.ping), ("bus", self.bus.ping)):
            try:
                async with asyncio.timeout(timeout):
                    await ping()
                checks[name] = "ok"
            except TimeoutError:
                checks[name] = f"no answer within {timeout:g} s"
            except Exception as exc:  # noqa: BLE001 - what makes the part unusable is the answer
                checks[name] = f"{type(exc).__name__}: {exc}"[:300]
        return checks

    async def public_card(self, agent_id: str, agent_url: str, *, signed: bool = True) -> m.AgentCard:
        """The card anyone may read, declaring the security that is enforced (signed: docs/cards.md, unless
        `signed` is False: `agent_url` comes from a `Host` this server cannot vouch for)."""
        card = self.cards.card(agent_id, agent_url, await self.security.card_security())
        return await self._signed(card, agent_id, agent_url) if signed else card

    async def extended_card(self, agent_id: str, agent_url: str, principal: Principal,
                            signed: bool = True) -> m.AgentCard | None:
        """The authenticated extended card: the skills this caller may use; None while the server is open. Signed
        unless `signed` is False (`agent_url` follows a `Host` this server cannot vouch for)."""
        security = await self.security.card_security()
        if security is None:
            return None
        card = self.cards.card(agent_id, agent_url, security, self.security.visible_skills(agent_id, principal))
        return await self._signed(card, agent_id, agent_url) if signed else card

    async def _signed(self, card: m.AgentCard, agent_id: str, agent_url: str) -> m.AgentCard:
        """`card` with a signature by the card key, its `jku` below the base URL of `agent_url` (A2A 1.0 §8.4)."""
        if not agent_url:
            return card
        base = agent_url.removesuffix(f"/a2a/{agent_id}").rstrip("/")
        sig = signature(card_v1(card), await self.card_signer.active(), base + JWKS_PATH)
        return msgspec.structs.replace(card, signatures=[sig])

    def _issuer(self) -> str:
        """This server's public base URL: the `iss` of its notification signatures."""
        return (self.settings.public_url or self.settings.reachable_self_url()).rstrip("/")

    def _base_urls(self) -> list[str]:
        """The base URLs that name this server (where it reaches itself, and where clients reach it)."""
        return [u for u in (self.settings.reachable_self_url(), self.settings.public_url) if u]

    def agent_id(self, name: str | None) -> str | None:
        """The hosted agent `name` names (None or "" is the default agent); None if there is none."""
        if not name:
            return self.default_agent
        return name if name in self.agents else None


__all__ = ["Runtime"]
