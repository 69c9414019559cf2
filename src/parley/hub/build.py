"""Building a Parley app from a checked configuration (see :mod:`parley.hub.config`).

Everything that can fail here (imports, environment variables, unreachable
remote cards) is reported as a :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import os
import sys
from typing import Any, Literal

from parley.agents.base import Agent, FunctionAgent
from parley.agents.builtin import builtin_agents
from parley.app import Parley
from parley.hub.config import AgentConfig, Config, ConfigError
from parley.protocol import models as m

log = logging.getLogger("parley.hub")


def import_object(ref: str, path: str, key: str) -> Any:
    """Import "package.module:attribute" or raise ConfigError naming the key.

    Modules are looked up next to the config file first (so `parley serve --config some/dir/parley.toml`
    works from any directory), then in the directory the server starts in (like uvicorn)."""
    module_name, _, attr = ref.partition(":")
    for folder in (os.getcwd(), config_dir(path)):  # inserted in turn: the config's directory ends up first
        if folder is not None and folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or an error raised while importing the user's module
        raise ConfigError(path, key, f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(path, key, f"module {module_name!r} has no attribute {attr!r}") from None
    return obj


def config_dir(path: str) -> str | None:
    """The directory of the config file `path` (None for a config that is not a file)."""
    if not path or path.startswith("<"):
        return None
    return os.path.dirname(os.path.abspath(path))


def skills_of(cfg: AgentConfig) -> list[m.AgentSkill] | None:
    """The card skills declared for an agent, or None to let the agent decide."""
    if not cfg.skills:
        return None
    return [
        m.AgentSkill(id=s.id, name=s.name, description=s.description, tags=list(s.tags),
                     examples=list(s.examples) or None)
        for s in cfg.skills
    ]


def python_agent(cfg: AgentConfig, path: str, key: str) -> Agent:
    """An agent from an import path: an Agent, an async generator function, or a factory."""
    assert cfg.entry is not None
    obj = import_object(cfg.entry, path, f"{key}.entry")
    if isinstance(obj, Agent):
        agent = obj
    elif inspect.isasyncgenfunction(obj):
        agent = FunctionAgent(obj, id=cfg.id, name=cfg.name, description=cfg.description, skills=skills_of(cfg))
    elif callable(obj):
        try:
            agent = obj()
        except Exception as exc:  # noqa: BLE001 - the user's factory failed: a ConfigError says so
            raise ConfigError(path, f"{key}.entry", f"calling {cfg.entry} failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(agent, Agent):
            raise ConfigError(path, f"{key}.entry", f"{cfg.entry}() returned {type(agent).__name__}, not an Agent")
    else:
        raise ConfigError(path, f"{key}.entry",
                          f"{cfg.entry} is a {type(obj).__name__}; expected an Agent, an async generator "
                          "function or a factory returning an Agent")
    agent.id = cfg.id
    if cfg.name:
        agent.name = cfg.name
    if cfg.description:
        agent.description = cfg.description
    if cfg.skills:
        agent.skills = skills_of(cfg) or agent.skills
    return agent


def llm_agent(cfg: AgentConfig, config: Config, key: str, extra_tools: list[Any] | None = None) -> Agent:
    """An LLM agent from its declaration and the [llm] defaults."""
    from parley.agents.llm import Limits, LLMAgent, create_backend
    from parley.agents.tools.mcp import MCPTools

    path = config.path
    key_env = cfg.api_key_env or config.llm.api_key_env
    api_key = None
    if key_env:
        api_key = os.environ.get(key_env)
        if not api_key:
            raise ConfigError(path, f"{key}.api_key_env", f"the environment variable {key_env} is not set")
    model = cfg.model or config.llm.model
    provider = cfg.provider or config.llm.provider or "openai"
    if provider == "fake":
        backend = create_backend("fake", script=cfg.script, model=model)
    elif provider == "openai":
        backend = create_backend("openai", base_url=cfg.base_url or config.llm.base_url, api_key=api_key, model=model)
    else:  # a plug-in (parley.llm_backends): it reads what it needs
        try:
            backend = create_backend(provider, base_url=cfg.base_url or config.llm.base_url, api_key=api_key,
                                     model=model)
        except LookupError as exc:
            raise ConfigError(path, f"{key}.provider", str(exc)) from None
    tools: list[Any] = []
    for j, ref in enumerate(cfg.tools):
        tools.append(import_object(ref, path, f"{key}.tools[{j}]"))
    for j, ref in enumerate(cfg.client_tools):
        tools.append(import_object(ref, path, f"{key}.client_tools[{j}]"))
    for server in cfg.mcp:
        if server.command:
            tools.append(MCPTools.stdio(server.command[0], server.command[1:], env=server.env, prefix=server.prefix))
        else:
            assert server.url is not None
            tools.append(MCPTools.http(server.url, prefix=server.prefix))
    tools.extend(extra_tools or [])
    overrides: dict[str, Any] = {}
    if cfg.limits is not None:
        for name in ("max_iterations", "max_tool_calls", "model_timeout", "tool_timeout", "token_budget"):
            value = getattr(cfg.limits, name)
            if value is not None:
                overrides[name] = value
    limits = dataclasses.replace(Limits(), **overrides)
    try:
        return LLMAgent(id=cfg.id, name=cfg.name, description=cfg.description, skills=skills_of(cfg),
                        backend=backend, model=model, system_prompt=cfg.system_prompt, tools=tools, limits=limits)
    except (TypeError, ValueError) as exc:
        raise ConfigError(path, key, f"cannot build the agent: {exc}") from None


async def build_app(config: Config) -> Parley:
    """A Parley app serving every agent the config declares, with its routes and delegations.

    Every agent that has routing rules or may delegate is wrapped in a RoutedAgent, so its
    delegated calls carry its task as `referenceTaskIds` and appear in its trace.
    """
    from parley.hub.routing import RoutedAgent, RoutingRule, delegate_tool

    app = Parley(settings=config.server.settings())
    builtins = {a.id: a for a in builtin_agents()}
    agents: dict[str, Agent] = {}
    if config.server.builtin_agents:
        agents.update(builtins)
    descriptions = {a.id: a.description or a.id for a in builtins.values()}
    for cfg in config.agents:
        descriptions[cfg.id] = cfg.description or cfg.name or cfg.id
    for i, cfg in enumerate(config.agents):
        key = f"agents[{i}]"
        if cfg.type == "builtin":
            agent: Agent = builtins[cfg.id]
        elif cfg.type == "python":
            agent = python_agent(cfg, config.path, key)
        elif cfg.type == "llm":
            allowed = {target: (target, descriptions[target]) for target in cfg.delegates}
            extra = [delegate_tool(allowed)] if allowed else []
            agent = llm_agent(cfg, config, key, extra_tools=extra)
        else:
            agent = await remote_agent(cfg, config, key)
        agents[cfg.id] = agent
    rules = [
        RoutingRule(r.from_, r.to, keywords=r.keywords, regex=r.regex, tags=r.tags, priority=r.priority)
        for r in config.routes
    ]
    for agent_id, agent in agents.items():
        own = [r for r in rules if r.applies_to(agent_id)]
        delegates = next((c.delegates for c in config.agents if c.id == agent_id), [])
        if own or delegates:
            agent = RoutedAgent(agent, own, delegates=delegates)
        app.add_agent(agent)
    if config.server.default_agent:
        app.default_agent = config.server.default_agent
    elif config.agents:
        app.default_agent = config.agents[0].id
    return app


async def remote_agent(cfg: AgentConfig, config: Config, key: str) -> Agent:
    """A remote A2A agent fronted by Parley. Its card is fetched now; when it cannot be, the agent is served as
    unavailable (its `problem` says why, /agents and /readyz show it) and the server keeps trying in the
    background: one unreachable agent does not stop the fleet."""
    from parley.hub.remote import RemoteAgent

    assert cfg.card_url is not None
    headers = remote_credentials(cfg, config, key)
    exchange, key_callers = token_exchange(cfg, config, key)
    agent = RemoteAgent(cfg.id, cfg.card_url, name=cfg.name, description=cfg.description, skills=skills_of(cfg),
                        headers=headers, exchange=exchange, key_callers=key_callers)
    if not await agent.recheck():
        log.warning("agent %r (%s.card_url) is unavailable: %s; serving the others and trying again in the "
                    "background", cfg.id, key, agent.problem)
    return agent


def remote_credentials(cfg: AgentConfig, config: Config, key: str) -> dict[str, str]:
    """The headers a remote agent's `api_key_env` / `token_env` name (read from the environment now)."""
    headers: dict[str, str] = {}
    for field_name, header, prefix in (("api_key_env", "X-API-Key", ""), ("token_env", "Authorization", "Bearer ")):
        var = getattr(cfg, field_name)
        if var:
            value = os.environ.get(var)
            if not value:
                raise ConfigError(config.path, f"{key}.{field_name}", f"the environment variable {var} is not set")
            headers[header] = prefix + value
    return headers


def token_exchange(cfg: AgentConfig, config: Config, key: str) -> tuple[Any, Literal["refuse", "fixed"]]:
    """The TokenExchanger [agents.token_exchange] describes (its client secret read from the environment now),
    and what callers without a token get; (None, "refuse") without one."""
    te = cfg.token_exchange
    if te is None:
        return None, "refuse"
    from parley.security.token_exchange import SUBJECT_TOKEN_TYPES, ExchangeSettings, TokenExchanger

    secret = os.environ.get(te.client_secret_env)
    if not secret:
        raise ConfigError(config.path, f"{key}.token_exchange.client_secret_env",
                          f"the environment variable {te.client_secret_env} is not set")
    settings = ExchangeSettings(token_endpoint=te.token_endpoint, client_id=te.client_id, client_secret=secret,
                                audience=list(te.audience), resource=list(te.resource), scope=te.scope,
                                subject_token_type=SUBJECT_TOKEN_TYPES[te.subject_token_type],
                                client_auth=te.client_auth, timeout=te.timeout_seconds)
    return TokenExchanger(settings), te.key_callers
