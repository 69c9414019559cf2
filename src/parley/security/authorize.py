"""What an authenticated principal may do: which agents, which skills, which operations.

- An API key opens the agent it was made for (admin keys open every agent).
- A skill may require scopes (its card's `securityRequirements`, 1.0 `AgentSkill`); a message
  that selects the skill (`metadata["parley.skill"]`, on the message or the request: one skill,
  :func:`parley.security.skill.requested_skill`, refused when ambiguous), or that a
  routing rule would send to it (a rule matching one of the skill's tags), is allowed only if the
  principal holds the scopes of one of the skill's requirements.
- Which tasks a principal sees is not decided here: tasks belong to the principal that made
  them, and every read is scoped by owner (another's task id is TaskNotFound).

Refusals are PermissionDeniedError (HTTP 403, gRPC PERMISSION_DENIED), naming what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parley.agents.base import Agent
from parley.protocol import models as m
from parley.protocol.errors import InvalidParamsError, PermissionDeniedError
from parley.protocol.operations import Operation
from parley.security.skill import SKILL_KEY, requested_skill
from parley.server.access import Access, Principal


def skill_requirements(skill: m.AgentSkill) -> list[frozenset[str]]:
    """The alternative scope sets a skill requires (any one suffices); empty: no requirement."""
    out = []
    for req in skill.security_requirements or []:
        schemes = req.get("schemes", req) if isinstance(req, dict) else {}
        scopes: set[str] = set()
        for value in schemes.values() if isinstance(schemes, dict) else []:
            items = value.get("list", []) if isinstance(value, dict) else value
            scopes.update(str(s) for s in items or [])
        out.append(frozenset(scopes))
    return out


def allowed_skill(skill: m.AgentSkill, principal: Principal) -> bool:
    """Whether `principal` holds the scopes of one of the skill's requirements (or it has none)."""
    reqs = skill_requirements(skill)
    return not reqs or any(req <= principal.scopes for req in reqs)


class ScopeAuthorizer:
    """The Authorizer of a secured server.

    Args:
        agents: the hosted agents (their skills' requirements).
        delegator: reads the cards of routing targets, for messages a routing rule sends to a skill.
    """

    def __init__(self, agents: Mapping[str, Agent], delegator: Any = None) -> None:
        self.agents = agents
        self.delegator = delegator

    async def authorize(self, access: Access, principal: Principal) -> None:
        if principal.kind in ("anonymous", "internal"):
            return  # an open server; or a delegation inside this server, checked when its caller came in
        if not principal.opens(access.agent_id):
            raise PermissionDeniedError(
                f"This key opens agent {principal.agent!r}, not {access.agent_id!r}: make a key for that agent"
            )
        if access.op in (Operation.SEND, Operation.STREAM):
            skill_id = requested_skill(access.request)
            if skill_id is not None:
                agent = self.agents[access.agent_id]
                skill = next((s for s in agent.skills if s.id == skill_id), None)
                if skill is None:
                    raise InvalidParamsError(
                        f"Invalid params: agent {access.agent_id!r} has no skill {skill_id!r} "
                        f"(metadata {SKILL_KEY!r})"
                    )
                if not allowed_skill(skill, principal):
                    needed = " or ".join("{" + ", ".join(sorted(r)) + "}" for r in skill_requirements(skill))
                    raise PermissionDeniedError(f"Skill {skill_id!r} needs the scopes {needed}")
            await self._check_routed_skill(access, principal)

    async def _check_routed_skill(self, access: Access, principal: Principal) -> None:
        """A new task's message that a routing rule would send to a skill (by its tags) needs that skill's scopes."""
        agent = self.agents[access.agent_id]
        routed = getattr(agent, "routed_skill", None)
        message = getattr(access.request, "message", None)
        if routed is None or message is None or message.task_id or self.delegator is None:
            return  # continuing a task goes where its first message went (checked then)
        found = await routed(message.text(), self.delegator)
        if found is not None and not allowed_skill(found[1], principal):
            target, skill = found
            needed = " or ".join("{" + ", ".join(sorted(r)) + "}" for r in skill_requirements(skill))
            raise PermissionDeniedError(f"This message is routed to skill {skill.id!r} of agent {target!r}, "
                                        f"which needs the scopes {needed}")


__all__ = ["SKILL_KEY", "ScopeAuthorizer", "allowed_skill", "requested_skill", "skill_requirements"]
