"""The access steps of one server, built from its settings: who may call, and what its cards declare."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from parley.agents.base import Agent
from parley.protocol import models as m
from parley.security.authenticate import CredentialAuthenticator
from parley.security.authorize import ScopeAuthorizer, allowed_skill
from parley.security.failures import FailureThrottle
from parley.security.keys import KeyStore
from parley.security.required import check_admin_key, check_issuer
from parley.security.schemes import CardSecurity, card_security
from parley.server.access import Principal
from parley.settings import Settings


class Security:
    """The authenticator and authorizer of a server, and the security its cards declare.

    Args:
        settings: `settings.auth` says which credentials are accepted.
        agents: the hosted agents (skill requirements).
        keys: the API key store (None, or `settings.auth.api_keys` false: keys are not accepted).
        env: where `auth.admin_key_env` and the JWT secret are read.
        delegator: the server's delegator (routing targets' cards, for skills reached by routing rules).

    Raises:
        ValueError: unusable credential settings; UnsafeSettingError for unsafe ones (an admin key shorter
            than 32 characters, a token issuer without an audience: parley.security.required).
    """

    def __init__(self, settings: Settings, agents: Mapping[str, Agent], keys: KeyStore | None,
                 env: Mapping[str, str] | None = None, delegator: Any = None) -> None:
        env = os.environ if env is None else env
        auth = settings.auth
        jwt = None
        if auth.jwt is not None:
            from parley.security.jwt import JwtVerifier

            check_issuer(auth.jwt)
            jwt = JwtVerifier(auth.jwt, env=env)
        admin_key = env.get(auth.admin_key_env) if auth.admin_key_env else None
        if admin_key:
            check_admin_key(auth.admin_key_env, admin_key)
        self.keys = keys if auth.api_keys else None
        self.jwt = jwt
        self.agents = agents
        self.failures = FailureThrottle(settings.limits.auth_failures, settings.limits.auth_failure_window_seconds)
        self.authenticator = CredentialAuthenticator(self.keys, jwt, admin_key, failures=self.failures,
                                                     trusted=settings.forwarded_allow_ips)
        self.authorizer = ScopeAuthorizer(agents, delegator)
        self.admin_principals = frozenset(auth.admin_principals)

    async def card_security(self) -> CardSecurity | None:
        """What the cards declare: the enforced schemes, or None while the server is open."""
        if not await self.authenticator.secured():
            return None
        return card_security(self.authenticator)

    def visible_skills(self, agent_id: str, principal: Principal) -> list[m.AgentSkill]:
        """The skills of an agent that `principal` may use (the extended card's)."""
        return [s for s in self.agents[agent_id].skills if allowed_skill(s, principal)]

    def is_admin(self, principal: Principal) -> bool:
        """Whether `principal` may manage keys and see every principal's tasks."""
        return "admin" in principal.scopes or principal.id in self.admin_principals

    async def close(self) -> None:
        if self.jwt is not None:
            await self.jwt.aclose()


__all__ = ["Security"]
