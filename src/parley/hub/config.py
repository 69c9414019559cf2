"""The hub's configuration file (`parley serve --config parley.toml`): parse, check, report.

Parsing is strict: unknown keys, wrong types and dangling references are errors
that name the file, the key and the reason (:class:`ConfigError`), so a typo
never silently disables an agent. Building the agents from a checked config is
:mod:`parley.hub.build`. `examples/parley.toml` documents every key.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
from msgspec import Struct, field

from parley.server.loopback import loopback_name
from parley.server.reserved import agent_id_problem
from parley.settings import PushSettings, Settings

# Letters, digits, . _ - (not first: no leading '.'); and not a path Parley serves itself (agent_id_problem).
AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ConfigError(Exception):
    """A problem in the configuration file, as one readable line: file, key, reason."""

    def __init__(self, path: str | Path, key: str, reason: str) -> None:
        self.path = str(path)
        self.key = key
        self.reason = reason
        super().__init__(f"{self.path}: {key}: {reason}" if key else f"{self.path}: {reason}")


class _Strict(Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """Config tables reject keys they do not know."""


class ServerConfig(Settings, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """[server]: every server setting (:class:`parley.settings.Settings`: host, port, db, public_url,
    grpc_port, ...), plus which agents the file serves."""

    default_agent: str | None = None  # owns "/" and the root card; default: the first agent
    builtin_agents: bool = False  # also serve echo and interviewer

    def settings(self) -> Settings:
        """The server settings alone."""
        return Settings(**{name: getattr(self, name) for name in Settings.__struct_fields__})


class LLMDefaults(_Strict):
    """[llm]: defaults for every LLM agent (each agent may override them)."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key
    provider: str | None = None  # "openai" (any OpenAI-compatible server, the default), "fake", or a plug-in


class SkillConfig(_Strict):
    """A skill shown on the agent's card."""

    id: str
    name: str
    description: str
    tags: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)


class McpConfig(_Strict):
    """An MCP server whose tools an LLM agent may call: a command (stdio) or a URL (HTTP)."""

    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] | None = None
    prefix: str = ""


class LimitsConfig(_Strict):
    """Bounds on one task of an LLM agent."""

    max_iterations: int | None = None
    max_tool_calls: int | None = None
    model_timeout: float | None = None
    tool_timeout: float | None = None
    token_budget: int | None = None


class TokenExchangeConfig(_Strict):
    """[agents.token_exchange] of a remote agent: carry the caller's identity to it by OAuth 2.0 Token Exchange
    (RFC 8693; :mod:`parley.security.token_exchange`, docs/security.md)."""

    token_endpoint: str
    client_id: str
    client_secret_env: str  # the NAME of the variable holding this client's secret, never the secret
    audience: list[str] = field(default_factory=list)  # what the issued token is for: audience and/or resource
    resource: list[str] = field(default_factory=list)
    scope: str | None = None
    subject_token_type: Literal["access_token", "jwt"] = "access_token"
    client_auth: Literal["basic", "post"] = "basic"  # RFC 6749 §2.3.1: HTTP Basic, or in the form
    # a caller without a bearer token (an API key): "refuse", or "fixed" to send api_key_env / token_env for them
    key_callers: Literal["refuse", "fixed"] = "refuse"
    timeout_seconds: float = 10.0


class AgentConfig(_Strict):
    """[[agents]]: one hosted agent."""

    id: str
    type: Literal["python", "llm", "remote", "builtin"]
    name: str | None = None
    description: str | None = None
    skills: list[SkillConfig] = field(default_factory=list)
    # python
    entry: str | None = None  # "package.module:attribute"
    # llm
    model: str | None = None
    provider: str | None = None
    script: list[Any] = field(default_factory=list)  # provider "fake": the scripted model's steps
    base_url: str | None = None
    api_key_env: str | None = None
    system_prompt: str | None = None
    tools: list[str] = field(default_factory=list)  # "module:function" decorated with @tool
    client_tools: list[str] = field(default_factory=list)  # "module:function" decorated with @client_tool
    mcp: list[McpConfig] = field(default_factory=list)
    delegates: list[str] = field(default_factory=list)  # agent ids this agent may delegate to
    limits: LimitsConfig | None = None
    # remote
    card_url: str | None = None
    # remote: api_key_env (above) names the variable holding an API key for it (sent as X-API-Key);
    # token_env names one holding a bearer token (Authorization: Bearer). Never the secrets themselves.
    token_env: str | None = None
    token_exchange: TokenExchangeConfig | None = None


class RouteConfig(_Strict):
    """[[routes]]: send matching messages for one agent to another."""

    from_: str = field(name="from")
    to: str
    keywords: list[str] = field(default_factory=list)
    regex: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    priority: int = 0


class Config(_Strict):
    """The whole file."""

    server: ServerConfig = field(default_factory=ServerConfig)
    llm: LLMDefaults = field(default_factory=LLMDefaults)
    agents: list[AgentConfig] = field(default_factory=list)
    routes: list[RouteConfig] = field(default_factory=list)
    push: PushSettings | None = None  # [push]: the same table as [server.push], at the top level
    path: str = ""  # filled in by load_config, for messages


def load_config(path: str | Path) -> Config:
    """Read, parse and check a config file; raise ConfigError on any problem."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(p, "", f"cannot read the file: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(p, "", "the file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(p, "", f"not valid TOML: {exc}") from None
    return parse_config(data, p)


def parse_config(data: dict[str, Any], path: str | Path = "<config>") -> Config:
    """Check already-parsed TOML data (see :func:`load_config`)."""
    if "path" in data:
        raise ConfigError(path, "path", "unknown key")
    try:
        config = msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        key, reason = _split_validation(str(exc))
        raise ConfigError(path, key, reason) from None
    config.path = str(path)
    check(config)
    return config


def _split_validation(text: str) -> tuple[str, str]:
    """msgspec says "Expected `int`, got `str` - at `$.server.port`": split into key and reason."""
    reason, sep, where = text.rpartition(" - at ")
    if not sep:
        reason, where = text, "$"
    key = where.strip("`").removeprefix("$").removeprefix(".") or "(top level)"
    if reason.startswith("Object contains unknown field"):
        name = reason.split("`")[1] if "`" in reason else "?"
        return (f"{key}.{name}" if key != "(top level)" else name), "unknown key"
    if reason.startswith("Object missing required field"):
        name = reason.split("`")[1] if "`" in reason else "?"
        return (f"{key}.{name}" if key != "(top level)" else name), "required key is missing"
    return key, reason


def check(config: Config) -> None:
    """Cross-field rules that types alone cannot express."""
    path = config.path
    s = config.server
    if config.push is not None:
        if s.push != PushSettings():
            raise ConfigError(path, "push", "give [push] or [server.push], not both")
        s.push = config.push
    for key, reason in s.problems():
        raise ConfigError(path, f"server.{key}", reason)
    if not config.agents and not s.builtin_agents:
        raise ConfigError(path, "agents", "no agents declared (add [[agents]] or set server.builtin_agents = true)")
    ids: set[str] = {"echo", "interviewer"} if s.builtin_agents else set()
    for i, agent in enumerate(config.agents):
        key = f"agents[{i}]"
        if not AGENT_ID.match(agent.id):
            raise ConfigError(path, f"{key}.id", f"{agent.id!r} is not a valid agent id (letters, digits, . _ -)")
        if (problem := agent_id_problem(agent.id)) is not None:
            raise ConfigError(path, f"{key}.id", f"{agent.id!r} is not a valid agent id: {problem}")
        if agent.id in ids:
            raise ConfigError(path, f"{key}.id", f"duplicate agent id {agent.id!r}")
        ids.add(agent.id)
        _check_agent(path, key, agent, config.llm)
    for name in s.push.agents:
        if name not in ids:
            raise ConfigError(path, f"push.agents.{name}",
                              f"no agent {name!r} is declared (the agents are: {', '.join(sorted(ids))})")
    for name in s.limits.agents:
        if name not in ids:
            raise ConfigError(path, f"server.limits.agents.{name}",
                              f"no agent {name!r} is declared (the agents are: {', '.join(sorted(ids))})")
    for i, agent in enumerate(config.agents):
        for j, target in enumerate(agent.delegates):
            if target not in ids:
                raise ConfigError(path, f"agents[{i}].delegates[{j}]", f"no agent {target!r} is declared")
            if target == agent.id:
                raise ConfigError(path, f"agents[{i}].delegates[{j}]", "an agent cannot delegate to itself")
    if s.default_agent is not None and s.default_agent not in ids:
        raise ConfigError(path, "server.default_agent", f"no agent {s.default_agent!r} is declared")
    shadowed = s.dashboard.shadow_problem(ids)
    if shadowed is not None:
        raise ConfigError(path, "server.dashboard.path", shadowed)
    for i, route in enumerate(config.routes):
        key = f"routes[{i}]"
        for name, value in (("from", route.from_), ("to", route.to)):
            if value not in ids:
                raise ConfigError(path, f"{key}.{name}", f"no agent {value!r} is declared")
        if route.from_ == route.to:
            raise ConfigError(path, f"{key}.to", "a route cannot send an agent's messages to itself")
        if not (route.keywords or route.regex or route.tags):
            raise ConfigError(path, key, "a route needs at least one of keywords, regex or tags")
        for j, pattern in enumerate(route.regex):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(path, f"{key}.regex[{j}]", f"not a valid regular expression: {exc}") from None


def _check_agent(path: str, key: str, agent: AgentConfig, llm: LLMDefaults) -> None:
    only = {
        "python": {"entry"},
        "llm": {"model", "provider", "script", "base_url", "api_key_env", "system_prompt", "tools", "client_tools",
                "mcp", "limits"},
        "remote": {"card_url", "api_key_env", "token_env", "token_exchange"},
        "builtin": set(),
    }
    specific = {"entry", "model", "provider", "script", "base_url", "api_key_env", "system_prompt", "tools",
                "client_tools", "mcp", "limits", "card_url", "token_env", "token_exchange"}
    for name in specific - only[agent.type]:
        value = getattr(agent, name)
        if value not in (None, [], ""):
            raise ConfigError(path, f"{key}.{name}", f"not used by agents of type {agent.type!r}")
    if agent.type == "python" and not _is_import_path(agent.entry):
        raise ConfigError(path, f"{key}.entry", "a python agent needs entry = \"package.module:attribute\"")
    if agent.type == "llm":
        provider = agent.provider or llm.provider or "openai"
        if provider == "fake":
            from parley.agents.llm.fake import FakeBackend

            try:
                FakeBackend(agent.script)
            except ValueError as exc:
                raise ConfigError(path, f"{key}.script", str(exc).split(": ", 1)[-1]) from None
        elif agent.script:
            raise ConfigError(path, f"{key}.script", f"only the fake provider takes a script, not {provider!r}")
        if provider == "openai" and not (agent.model or llm.model):
            raise ConfigError(path, f"{key}.model", "an llm agent needs a model (here or in [llm])")
        if provider == "openai" and not (agent.base_url or llm.base_url):
            raise ConfigError(path, f"{key}.base_url", "an llm agent needs a base_url (here or in [llm])")
        for j, ref in enumerate([*agent.tools, *agent.client_tools]):
            if not _is_import_path(ref):
                raise ConfigError(path, f"{key}.tools[{j}]", f"{ref!r} is not \"package.module:function\"")
        for j, server in enumerate(agent.mcp):
            if bool(server.command) == bool(server.url):
                raise ConfigError(path, f"{key}.mcp[{j}]", "give exactly one of command (stdio) or url (HTTP)")
    if agent.type == "remote" and not (agent.card_url or "").startswith(("http://", "https://")):
        raise ConfigError(path, f"{key}.card_url", "a remote agent needs card_url = \"https://.../agent-card.json\"")
    if agent.type == "remote" and agent.token_exchange is not None:
        _check_exchange(path, f"{key}.token_exchange", agent)
    if agent.type == "builtin" and agent.id not in ("echo", "interviewer"):
        raise ConfigError(path, f"{key}.id", "builtin agents are 'echo' and 'interviewer'")


def _check_exchange(path: str, key: str, agent: AgentConfig) -> None:
    """[agents.token_exchange]: an http(s) endpoint, a target for the issued token, a fixed credential when
    key callers may use it."""
    te = agent.token_exchange
    assert te is not None
    if not te.token_endpoint.startswith(("http://", "https://")):
        raise ConfigError(path, f"{key}.token_endpoint", "the token endpoint must be an http:// or https:// URL")
    if _in_clear(te.token_endpoint):
        raise ConfigError(path, f"{key}.token_endpoint", "the callers' tokens would cross the network in clear: "
                          "use https:// (http:// only on this machine's loopback)")
    if _in_clear(agent.card_url or ""):
        raise ConfigError(path, f"{key.removesuffix('.token_exchange')}.card_url", "token exchange sends each "
                          "caller's exchanged token to this agent: use https:// (http:// only on the loopback)")
    if not te.client_id:
        raise ConfigError(path, f"{key}.client_id", "the OAuth client id of this server is empty")
    if not te.client_secret_env:
        raise ConfigError(path, f"{key}.client_secret_env", "name the variable holding the client secret")
    if not (te.audience or te.resource):
        raise ConfigError(path, f"{key}.audience", "say what the issued token is for: audience and/or resource "
                          "(else the endpoint may issue a token any of its services accepts)")
    for j, uri in enumerate(te.resource):
        if not uri.startswith(("http://", "https://")) or "#" in uri:
            raise ConfigError(path, f"{key}.resource[{j}]", "a resource is an absolute URI without a fragment "
                              "(RFC 8693 §2.1)")
    if te.key_callers == "fixed" and not (agent.api_key_env or agent.token_env):
        raise ConfigError(path, f"{key}.key_callers", "\"fixed\" sends the agent's api_key_env or token_env to "
                          "callers without a token; set one of them, or use \"refuse\"")
    if te.timeout_seconds <= 0:
        raise ConfigError(path, f"{key}.timeout_seconds", "must be more than 0")


def _in_clear(url: str) -> bool:
    """Whether `url` is plain http:// to another machine (a bearer token sent there is readable on the way)."""
    parts = urlsplit(url)
    return parts.scheme == "http" and not loopback_name(parts.hostname)


def _is_import_path(value: str | None) -> bool:
    if not value or value.count(":") != 1:
        return False
    module, attr = value.split(":")
    return bool(module) and bool(attr) and all(part.isidentifier() for part in module.split(".") + attr.split("."))
