"""Routing rules, the agent wrapper that applies them, and the LLM-facing `delegate` tool.

    rules = [
        RoutingRule("front-desk", "billing", keywords=["invoice", "refund"], priority=10),
        RoutingRule("front-desk", "tech", regex=[r"\\berror \\d+"], tags=["*"]),
    ]
    app.add_agent(RoutedAgent(front_desk, rules))   # delegates with the server's delegator (ctx.delegator)

A rule matches a message when any of its conditions does (a rule without conditions
matches every message):

- `keywords`: a word or phrase, case-insensitive, on word boundaries;
- `regex`: a regular expression found anywhere in the text (`re.search`, as written;
  add `(?i)` for case-insensitive);
- `tags`: skill tags of the *target* agent's card, matched against the words of the
  message (case-insensitive, a trailing plural "s" allowed). A tag counts only if the
  target's card advertises it; `"*"` stands for every tag on the target's card. When
  the target's card cannot be read, the listed tags count as given.

Among the rules whose `from_agent` is the wrapped agent (or None/"*": any agent), the
highest `priority` wins, then the first declared. A matching first message of a task
is delegated over A2A (see :mod:`parley.hub.delegation`) instead of running the
wrapped agent; continuation turns of a delegated task follow the checkpoint to the
child; every other turn runs the wrapped agent.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import parley.agents.llm  # noqa: F401  (loads first: agents.tools.base and agents.llm import each other)
from parley.agents.base import Agent, AgentOutput, RunContext
from parley.agents.tools.base import Tool, ToolError
from parley.client.errors import ClientError
from parley.hub.delegation import CURRENT_RUN, Delegator, bind_run
from parley.protocol import models as m
from parley.protocol.states import is_interrupted

log = logging.getLogger("parley.hub.routing")
CARD_TTL = 300.0  # seconds a target's card tags are reused (the card's own max-age)
ANY = ("*", None)


def _term(term: str, *, plural: bool) -> re.Pattern[str]:
    suffix = "s?" if plural else ""
    return re.compile(r"(?<!\w)" + re.escape(term.strip()) + suffix + r"(?!\w)", re.IGNORECASE)


class RoutingRule:
    """Send the messages of `from_agent` (None or "*": any agent) that match to `to_agent`.

    `to_agent` is an agent id of this server or an agent URL (see `RoutedAgent.resolve_url`).
    """

    def __init__(self, from_agent: str | None, to_agent: str, *, keywords: Sequence[str] = (),
                 regex: Sequence[str] = (), tags: Sequence[str] = (), priority: int = 0) -> None:
        self.from_agent = from_agent
        self.to_agent = to_agent
        self.keywords = [k for k in keywords if k.strip()]
        self.regex = list(regex)
        self.tags = [t.strip().lower() for t in tags if t.strip()]
        self.priority = priority
        self._keywords = [(k, _term(k, plural=False)) for k in self.keywords]
        self._regex = []
        for pattern in self.regex:
            try:
                self._regex.append((pattern, re.compile(pattern)))
            except re.error as exc:
                raise ValueError(f"routing rule to {to_agent!r}: {pattern!r} is not a valid regular expression: "
                                 f"{exc}") from None

    def __repr__(self) -> str:
        return (f"RoutingRule({self.from_agent!r}, {self.to_agent!r}, keywords={self.keywords!r}, "
                f"regex={self.regex!r}, tags={self.tags!r}, priority={self.priority})")

    def applies_to(self, agent_id: str) -> bool:
        """Whether this rule routes the messages of `agent_id`."""
        return self.from_agent in ANY or self.from_agent == agent_id

    @property
    def unconditional(self) -> bool:
        """True for a rule without conditions (it matches everything)."""
        return not (self.keywords or self.regex or self.tags)

    def match(self, text: str, target_tags: Collection[str] | None = None) -> str | None:
        """Why `text` matches (e.g. "keyword 'invoice'"), or None.

        `target_tags` are the skill tags on the target's card (None: unknown).
        """
        if self.unconditional:
            return "every message"
        for keyword, pattern in self._keywords:
            if pattern.search(text):
                return f"keyword '{keyword}'"
        for source, pattern in self._regex:
            if pattern.search(text):
                return f"regex '{source}'"
        for tag in self._effective_tags(target_tags):
            if _term(tag, plural=True).search(text):
                return f"tag '{tag}'"
        return None

    def matched_tag(self, text: str, target_tags: Collection[str] | None = None) -> str | None:
        """The target skill tag `text` matches, when that is why the rule matches (keywords and regexes,
        checked first, name no skill); None otherwise."""
        if self.unconditional or any(p.search(text) for _, p in self._keywords) or any(
                p.search(text) for _, p in self._regex):
            return None
        return next((tag for tag in self._effective_tags(target_tags) if _term(tag, plural=True).search(text)), None)

    def _effective_tags(self, target_tags: Collection[str] | None) -> list[str]:
        if not self.tags:
            return []
        if target_tags is None:  # the card could not be read: the listed tags stand
            return [t for t in self.tags if t != "*"]
        card = {t.lower() for t in target_tags}
        if "*" in self.tags:
            return sorted(card)
        return [t for t in self.tags if t in card]


def select_rule(rules: Sequence[RoutingRule], text: str, *, agent_id: str | None = None,
                target_tags: Mapping[str, Collection[str] | None] | None = None) -> tuple[RoutingRule, str] | None:
    """The winning rule for `text` and why it matched: highest priority first, then declaration order.

    With `agent_id`, only rules routing that agent count; `target_tags` maps a rule's
    `to_agent` to the tags on its card.
    """
    tags = target_tags or {}
    ordered = sorted(enumerate(rules), key=lambda pair: (-pair[1].priority, pair[0]))
    for _, rule in ordered:
        if agent_id is not None and not rule.applies_to(agent_id):
            continue
        reason = rule.match(text, tags.get(rule.to_agent))
        if reason is not None:
            return rule, reason
    return None


def _forward(name: str) -> property:
    def get(self: RoutedAgent) -> Any:
        return getattr(self.inner, name)

    def set_(self: RoutedAgent, value: Any) -> None:
        setattr(self.inner, name, value)

    return property(get, set_, doc=f"The wrapped agent's `{name}`.")


class RoutedAgent(Agent):
    """An agent whose matching messages are delegated to other agents over A2A.

    Args:
        inner: the agent that answers when no rule matches; its card is this agent's card.
        rules: the routing rules (those of other agents are ignored, so all may be passed).
        resolve_url: a rule's `to_agent` -> the target's URL (absolute, `/a2a/...` or a
            local agent id, see :meth:`Delegator.resolve`); default: `to_agent` as is.
        delegator: makes the calls; default: the server's (`ctx.delegator`), which resolves
            agent ids of this server.
        delegates: the agent ids the wrapped agent's `delegate` tool may call (what the dashboard shows).

    The wrapper also makes the run current for tools (:func:`parley.hub.delegation.bind_run`),
    so an LLM agent's `delegate` tool links its calls to this task: wrap such agents
    even without rules (`RoutedAgent(llm_agent, [])`).
    """

    id = _forward("id")
    name = _forward("name")
    description = _forward("description")
    skills = _forward("skills")
    version = _forward("version")
    input_modes = _forward("input_modes")
    output_modes = _forward("output_modes")
    extensions = _forward("extensions")
    problem = _forward("problem")

    async def recheck(self) -> bool:
        return await self.inner.recheck()

    async def check_at_start(self) -> None:
        await self.inner.check_at_start()  # an LLM agent behind routing rules asks its model server too

    def __init__(self, inner: Agent, rules: Sequence[RoutingRule], resolve_url: Callable[[str], str] | None = None,
                 *, delegator: Delegator | None = None, delegates: Sequence[str] = ()) -> None:
        self.inner = inner
        self.rules = list(rules)
        self.delegates = list(delegates)  # the agents its `delegate` tool may call (shown by the dashboard)
        self.resolve_url = resolve_url or (lambda agent_id: agent_id)
        self.delegator = delegator
        self._cards: dict[str, tuple[float, list[m.AgentSkill]]] = {}  # target URL -> (expiry, its skills)

    def delegator_for(self, ctx: RunContext) -> Delegator:
        """The delegator of this wrapper, else the server's, else a plain one."""
        return self.delegator or ctx.delegator or Delegator()

    async def route(self, ctx: RunContext) -> tuple[RoutingRule, str] | None:
        """The rule this turn's message matches, and why; None to run the wrapped agent."""
        return await self.route_text(ctx.text, self.delegator_for(ctx))

    async def route_text(self, text: str, delegator: Delegator) -> tuple[RoutingRule, str] | None:
        """The rule a first message with `text` matches, and why; None when none does."""
        rules = [r for r in self.rules if r.applies_to(self.id)]
        if not rules:
            return None
        targets = {r.to_agent for r in rules if r.tags}
        tags = {t: await self.card_tags(t, delegator) for t in targets}
        return select_rule(rules, text, target_tags=tags)

    async def routed_skill(self, text: str, delegator: Delegator) -> tuple[str, m.AgentSkill] | None:
        """The target agent and skill a first message with `text` is routed to by a skill tag (the
        request authorizer checks the caller may use that skill); None when no rule names a skill."""
        choice = await self.route_text(text, delegator)
        if choice is None:
            return None
        rule = choice[0]
        skills = await self.card_skills(rule.to_agent, delegator)
        tag = rule.matched_tag(text, None if skills is None else {t.lower() for s in skills for t in s.tags})
        if tag is None or skills is None:
            return None
        skill = next((s for s in skills if tag in {t.lower() for t in s.tags}), None)
        return (rule.to_agent, skill) if skill is not None else None

    async def card_tags(self, to_agent: str, delegator: Delegator | None = None) -> frozenset[str] | None:
        """The skill tags on a target's card (cached for a few minutes); None if it cannot be read."""
        skills = await self.card_skills(to_agent, delegator)
        return None if skills is None else frozenset(t.lower() for s in skills for t in s.tags)

    async def card_skills(self, to_agent: str, delegator: Delegator | None = None) -> list[m.AgentSkill] | None:
        """The skills on a target's card (cached for a few minutes); None if it cannot be read."""
        delegator = delegator or self.delegator or Delegator()
        try:
            url = delegator.resolve(self.resolve_url(to_agent))
        except Exception:  # noqa: BLE001 - an unresolvable target has no card to read
            return None
        hit = self._cards.get(url)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        try:
            card = await delegator.card(url)
        except ClientError as exc:
            log.info("routing: cannot read the card of %s: %s", url, exc)
            return None
        self._cards[url] = (time.monotonic() + CARD_TTL, list(card.skills))
        return list(card.skills)

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        delegator = self.delegator_for(ctx)
        with bind_run(ctx) as scope:
            if Delegator.pending(ctx):  # the answer to a delegated question goes back to the child
                async with aclosing(delegator.resume(ctx)) as call:
                    async for out in call:
                        yield out
                return
            if ctx.turn <= 1:
                choice = await self.route(ctx)
                if choice is not None:
                    rule, reason = choice
                    yield ctx.internal("route", to=rule.to_agent, reason=reason, priority=rule.priority)
                    target = self.resolve_url(rule.to_agent)
                    async with aclosing(delegator.delegate(ctx, target, ctx.message)) as call:
                        async for out in call:
                            yield out
                    return
            async with aclosing(self.inner.run(ctx)) as gen:  # type: ignore[type-var]
                async for out in gen:
                    yield out
                    for ev in scope.drain():  # links of delegations its tools made meanwhile
                        yield ev
            for ev in scope.drain():
                yield ev


# --- the delegate tool --------------------------------------------------------------------


class DelegateTool(Tool):
    """Lets a model hand a request to one of a fixed set of agents and read the answer.

    The child's final text comes back as the tool result; a failure comes back as a tool
    error the model reads. Limitation: a tool call cannot pause for the user, so a child
    that asks for input (`input-required`) is canceled and the model is told what it
    asked, to call again with the missing details. Progress and artifacts of the child
    are not relayed (the model sees the text only).
    """

    def __init__(self, allowed: Mapping[str, tuple[str, str]], delegator: Delegator | None = None, *,
                 name: str = "delegate") -> None:
        if not allowed:
            raise ValueError("delegate_tool needs at least one agent to delegate to")
        self.allowed = dict(allowed)
        self.delegator = delegator
        self.name = name
        listing = "\n".join(f"- {agent_id}: {desc or 'no description'}" for agent_id, (_, desc) in self.allowed.items())
        self.description = (
            "Hand a request to another agent and get its answer. Give it everything it needs in one message; "
            f"it cannot ask you follow-up questions. Agents:\n{listing}"
        )
        self.parameters = {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": list(self.allowed),
                          "description": "Which agent to ask. " + "; ".join(
                              f"{agent_id}: {desc}" for agent_id, (_, desc) in self.allowed.items() if desc)},
                "message": {"type": "string", "description": "The request for that agent, self-contained."},
            },
            "required": ["agent", "message"],
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any]) -> Any:
        agent = arguments.get("agent")
        text = arguments.get("message")
        if agent not in self.allowed:
            raise ToolError(f"unknown agent {agent!r}; the agents are {', '.join(self.allowed)}")
        if not isinstance(text, str) or not text.strip():
            raise ToolError("`message` must be a non-empty string")
        url, _ = self.allowed[agent]
        scope = CURRENT_RUN.get()
        delegator = self.delegator or (scope.ctx.delegator if scope is not None else None) or Delegator()
        res = await delegator.ask(url, text, name=agent)
        if res.ok:
            return res.text or f"({agent} completed without an answer)"
        if res.state is not None and is_interrupted(res.state):
            question = res.message.text() if res.message is not None else "more input"
            raise ToolError(f"{agent} asked a follow-up question that cannot be answered inside a tool call: "
                            f"{question!r}. Its task was canceled; call it again with that detail in the message.")
        raise ToolError(res.error or f"{agent} did not complete")


def delegate_tool(allowed: Mapping[str, tuple[str, str]], delegator: Delegator | None = None, *,
                  name: str = "delegate") -> DelegateTool:
    """A `delegate` tool for LLM agents: `allowed` maps agent id -> (URL, description from its card).

    URLs may be absolute, `/a2a/...` or local agent ids (resolved by `delegator`, default the
    server's).
    Wrap the LLM agent in :class:`RoutedAgent` (rules may be empty) so the calls are
    linked to its task and carry the delegation chain.
    """
    return DelegateTool(allowed, delegator, name=name)


__all__ = ["DelegateTool", "RoutedAgent", "RoutingRule", "delegate_tool", "select_rule"]
