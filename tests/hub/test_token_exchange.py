"""Remote delegation keeps the caller's identity: OAuth 2.0 Token Exchange (RFC 8693) on remote hops.

A hub built from parley.toml fronts a remote Parley server (secured with the token endpoint's JWKS). The hub's
remote agent has `[agents.token_exchange]`: the caller's bearer token is exchanged at the token endpoint the suite
serves on 127.0.0.1 (tests/security/token_endpoint.py) for a token for the remote, with the hub's agent as the
actor, and the remote agent reports the claims of the token it was called with.

RFC 8693 §2.1 (the request: subject_token, actor_token, audience), §2.2.1 (the response), §2.2.2 (errors), §4.1
(`act`, nested for each earlier actor). A2A specification §7.4 (a server authenticates every request; here with
the bearer token the exchange issued).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import pytest
from hubkit import collect, last_state, status_texts

from parley.agents.base import AgentOutput, RunContext
from parley.app import Parley
from parley.client import A2AClient
from parley.hub.build import build_app
from parley.hub.config import ConfigError, load_config, parse_config
from parley.hub.delegation import DelegationError
from parley.hub.remote import RemoteAgent
from parley.protocol import models as m
from parley.security.token_exchange import ExchangeSettings, TokenExchanger
from parley.server.caller import current_caller
from parley.settings import AuthSettings, JwtSettings, LimitSettings, Settings
from security.token_endpoint import EXCHANGE, TokenEndpoint
from support import LiveServer, free_port

S = m.TaskState
HUB_AUD = "https://hub.parley.test"
R1_AUD = "https://r1.parley.test"
R2_AUD = "https://r2.parley.test"
SECRETS = {"hub-agent": "hub-secret-xyz", "r1-agent": "r1 secret+with:odd/chars"}  # odd chars: RFC 6749 §2.3.1
ADMIN_ENV = "PARLEY_TEST_TX_REMOTE_ADMIN"
HUB_ADMIN_ENV = "PARLEY_TEST_TX_HUB_ADMIN"
REMOTE_ADMIN = "remote-admin-key-0123456789abcdef-0123456789"
HUB_ADMIN = "hub-admin-key-0123456789abcdef-0123456789"


@pytest.fixture
def sts() -> Iterator[TokenEndpoint]:
    with TokenEndpoint(clients=SECRETS, targets={R1_AUD, R2_AUD}) as endpoint:
        yield endpoint


@dataclass
class Whoami:
    """The remote server's one agent: reports its owner and the claims of the bearer token it was called with."""

    live: LiveServer
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def card_url(self) -> str:
        return f"{self.live.url}/a2a/whoami/.well-known/agent-card.json"


def whoami_server(sts: TokenEndpoint, audience: str, *, public_host: str | None = None) -> Whoami:
    """A Parley server accepting the token endpoint's tokens for `audience` (and an admin key, the fixed
    credential of some tests); with `public_host`, its card names its interfaces under that host name."""
    os.environ[ADMIN_ENV] = REMOTE_ADMIN
    port = free_port()
    jwt_settings = JwtSettings(jwks_url=sts.jwks_url, issuer=sts.issuer, audience=[audience])
    app = Parley(settings=Settings(db="memory", auth=AuthSettings(jwt=jwt_settings, admin_key_env=ADMIN_ENV),
                                   limits=LimitSettings(auth_failures=None),
                                   public_url=f"http://{public_host}:{port}" if public_host else None))
    calls: list[dict[str, Any]] = []

    @app.agent(id="whoami", description="Says who called, with which token")
    async def whoami(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        if ctx.text == "ask me first" and ctx.turn == 1:
            yield ctx.ask("Which account?")
            return
        caller = current_caller()
        claims = jwt.decode(caller.token, options={"verify_signature": False}) if caller and caller.token else None
        report = {"owner": ctx.owner, "claims": claims}
        calls.append(report)
        yield json.dumps(report)

    return Whoami(LiveServer(app, port).start(), calls)


def hub_toml(sts: TokenEndpoint, *, agent_id: str, card_url: str, own_audience: str, client: str,
             target: str, extra: str = "", agent_extra: str = "") -> str:
    """parley.toml of a hub secured by the token endpoint's tokens for `own_audience` (and an admin key), whose
    remote agent `agent_id` exchanges the caller's token for one for `target`, as OAuth client `client`."""
    return f"""
[server]
db = "memory"
[server.limits]
auth_failures = 1000
[server.auth]
admin_key_env = "{HUB_ADMIN_ENV}"
[server.auth.jwt]
jwks_url = "{sts.jwks_url}"
issuer = "{sts.issuer}"
audience = ["{own_audience}"]

[[agents]]
id = "{agent_id}"
type = "remote"
card_url = "{card_url}"
{agent_extra}
[agents.token_exchange]
token_endpoint = "{sts.token_url}"
client_id = "{client}"
client_secret_env = "PARLEY_TEST_TX_SECRET_{client.replace('-', '_').upper()}"
audience = ["{target}"]
{extra}
"""


async def start_hub(toml: str) -> LiveServer:
    os.environ[HUB_ADMIN_ENV] = HUB_ADMIN
    for client, secret in SECRETS.items():
        os.environ[f"PARLEY_TEST_TX_SECRET_{client.replace('-', '_').upper()}"] = secret
    app = await build_app(parse_config(tomllib.loads(toml)))
    return LiveServer(app, self_url=True).start()


async def ask(url: str, headers: dict[str, str], text: str = "who am I?") -> list[m.StreamEvent]:
    async with await A2AClient.connect(url, headers=headers) as client:
        return await collect(client, text)


def report_of(events: list[m.StreamEvent]) -> dict[str, Any]:
    """The whoami report relayed as the hub task's artifact."""
    texts = ["".join(p.text or "" for p in ev.artifact.parts) for ev in events
             if isinstance(ev, m.TaskArtifactUpdateEvent)]
    return json.loads("".join(texts))


async def test_a_remote_hop_carries_the_callers_identity_with_the_agent_as_actor(sts: TokenEndpoint) -> None:
    """RFC 8693 §2.1/§4.1: the remote sees the caller (`sub`), its own audience and `act` naming the hub's agent;
    the exchanged token (and the actor token) are reused for the caller's next message (cached)."""
    remote = whoami_server(sts, R1_AUD)
    hub = await start_hub(hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD,
                                   client="hub-agent", target=R1_AUD))
    try:
        caller = sts.issue("alice", aud=HUB_AUD)
        events = await ask(f"{hub.url}/a2a/billing", {"Authorization": f"Bearer {caller}"})
        assert last_state(events) is S.COMPLETED, status_texts(events)
        report = report_of(events)
        assert report["owner"] == "alice"  # the remote's own verifier made the caller its principal
        claims = report["claims"]
        assert claims["sub"] == "alice" and claims["aud"] == R1_AUD and claims["iss"] == sts.issuer
        assert claims["act"] == {"sub": "hub-agent"}  # one hop: one actor, nothing nested

        exchange = sts.seen(EXCHANGE)[0]
        assert exchange.client == "hub-agent" and exchange.basic  # RFC 6749 §2.3.1 client authentication
        assert exchange.form["subject_token"] == [caller]
        assert exchange.form["subject_token_type"] == ["urn:ietf:params:oauth:token-type:access_token"]
        assert exchange.form["audience"] == [R1_AUD]

        again = await ask(f"{hub.url}/a2a/billing", {"Authorization": f"Bearer {caller}"}, "and again?")
        assert report_of(again)["claims"]["sub"] == "alice"
        assert len(sts.seen(EXCHANGE)) == 1 and len(sts.seen("client_credentials")) == 1  # cached

        bob = sts.issue("bob", aud=HUB_AUD)  # another caller: a token of their own, never alice's
        assert report_of(await ask(f"{hub.url}/a2a/billing", {"Authorization": f"Bearer {bob}"}))["owner"] == "bob"
        assert len(sts.seen(EXCHANGE)) == 2
    finally:
        hub.stop()
        remote.live.stop()


async def test_two_hops_nest_the_actor_chain(sts: TokenEndpoint) -> None:
    """caller -> hub agent -> remote Parley's agent -> its remote: the last server's token has `act` naming the
    remote Parley's agent, with the hub's agent nested inside (RFC 8693 §4.1: the current actor outermost)."""
    leaf = whoami_server(sts, R2_AUD)
    middle = await start_hub(hub_toml(sts, agent_id="leaf", card_url=leaf.card_url, own_audience=R1_AUD,
                                      client="r1-agent", target=R2_AUD, extra='client_auth = "post"'))
    hub = await start_hub(hub_toml(sts, agent_id="front", card_url=f"{middle.url}/a2a/leaf", own_audience=HUB_AUD,
                                   client="hub-agent", target=R1_AUD))
    try:
        caller = sts.issue("carol", aud=HUB_AUD)
        events = await ask(f"{hub.url}/a2a/front", {"Authorization": f"Bearer {caller}"})
        assert last_state(events) is S.COMPLETED, status_texts(events)
        report = report_of(events)
        assert report["owner"] == "carol"
        claims = report["claims"]
        assert claims["sub"] == "carol" and claims["aud"] == R2_AUD
        assert claims["act"] == {"sub": "r1-agent", "act": {"sub": "hub-agent"}}
        first, second = sts.seen(EXCHANGE)
        assert (first.client, second.client) == ("hub-agent", "r1-agent")
        assert not second.basic and second.form["client_id"] == ["r1-agent"]  # client_auth = "post"
    finally:
        hub.stop()
        middle.stop()
        leaf.live.stop()


async def test_a_refused_exchange_fails_the_delegation_and_never_falls_back_to_the_fixed_key(
        sts: TokenEndpoint) -> None:
    """RFC 8693 §2.2.2: the endpoint's error (here invalid_target) ends the delegation, naming it; the fixed
    credential configured for key callers is not sent instead (the remote never runs)."""
    remote = whoami_server(sts, R1_AUD)
    os.environ["PARLEY_TEST_TX_FIXED"] = REMOTE_ADMIN  # a credential the remote accepts
    hub = await start_hub(hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD,
                                   client="hub-agent", target="https://unknown.parley.test",
                                   agent_extra='api_key_env = "PARLEY_TEST_TX_FIXED"',
                                   extra='key_callers = "fixed"'))
    try:
        caller = sts.issue("alice", aud=HUB_AUD)
        events = await ask(f"{hub.url}/a2a/billing", {"Authorization": f"Bearer {caller}"})
        assert last_state(events) is S.FAILED
        reason = status_texts(events)[-1]
        assert "token exchange for whoami failed" in reason and "invalid_target" in reason, reason
        assert remote.calls == []
    finally:
        hub.stop()
        remote.live.stop()


async def test_an_api_key_caller_is_refused_unless_the_fixed_credential_is_allowed(sts: TokenEndpoint) -> None:
    """A caller with an API key has no token to exchange: refused by default (saying so); with
    `key_callers = "fixed"` the configured credential is sent, and the remote sees this server's key."""
    remote = whoami_server(sts, R1_AUD)
    os.environ["PARLEY_TEST_TX_FIXED"] = REMOTE_ADMIN
    refusing = await start_hub(hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD,
                                        client="hub-agent", target=R1_AUD))
    fixed = await start_hub(hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD,
                                     client="hub-agent", target=R1_AUD,
                                     agent_extra='api_key_env = "PARLEY_TEST_TX_FIXED"',
                                     extra='key_callers = "fixed"'))
    try:
        events = await ask(f"{refusing.url}/a2a/billing", {"X-API-Key": HUB_ADMIN})
        assert last_state(events) is S.FAILED
        assert "authenticated with an API key, not a bearer token: refused" in status_texts(events)[-1]
        assert remote.calls == [] and sts.seen(EXCHANGE) == []

        events = await ask(f"{fixed.url}/a2a/billing", {"X-API-Key": HUB_ADMIN})
        assert last_state(events) is S.COMPLETED, status_texts(events)
        assert report_of(events) == {"owner": "admin", "claims": None}  # the remote's admin key: the fixed one
        assert sts.seen(EXCHANGE) == []
    finally:
        refusing.stop()
        fixed.stop()
        remote.live.stop()


async def test_without_the_callers_token_a_call_is_refused(sts: TokenEndpoint) -> None:
    """A run with no caller known here (resumed after a restart: the token is never stored) is refused rather
    than sent with another credential."""
    exchanger = TokenExchanger(ExchangeSettings(token_endpoint=sts.token_url, client_id="hub-agent",
                                                client_secret=SECRETS["hub-agent"], audience=[R1_AUD]))
    agent = RemoteAgent("billing", "http://127.0.0.1:9/a2a/billing", exchange=exchanger)
    with pytest.raises(DelegationError, match="the caller's token is not known here"):
        await agent.call_credentials("alice")
    assert sts.requests == []


REMOTE = """
[[agents]]
id = "billing"
type = "remote"
card_url = "http://127.0.0.1:9/a2a/billing"
"""
EXCHANGE_TABLE = """
[agents.token_exchange]
token_endpoint = "https://idp.example.com/token"
client_id = "hub"
client_secret_env = "PARLEY_TEST_TX_UNSET_SECRET"
"""


@pytest.mark.parametrize("text,key,reason", [
    (REMOTE + EXCHANGE_TABLE, "agents[0].token_exchange.audience", "say what the issued token is for"),
    (REMOTE + EXCHANGE_TABLE.replace("https://idp", "ftp://idp") + 'audience = ["x"]',
     "agents[0].token_exchange.token_endpoint", "must be an http:// or https:// URL"),
    (REMOTE + EXCHANGE_TABLE.replace("https://idp", "http://idp") + 'audience = ["x"]',
     "agents[0].token_exchange.token_endpoint", "would cross the network in clear"),
    (REMOTE.replace("http://127.0.0.1:9", "http://billing.example.com") + EXCHANGE_TABLE + 'audience = ["x"]',
     "agents[0].card_url", "use https:// (http:// only on the loopback)"),
    (REMOTE + EXCHANGE_TABLE + 'resource = ["billing"]', "agents[0].token_exchange.resource[0]",
     "absolute URI without a fragment"),
    (REMOTE + EXCHANGE_TABLE + 'audience = ["x"]\nkey_callers = "fixed"', "agents[0].token_exchange.key_callers",
     "set one of them"),
    (REMOTE + EXCHANGE_TABLE + 'audience = ["x"]\nkey_callers = "always"', "agents[0].token_exchange.key_callers",
     "Invalid enum value 'always'"),
    (REMOTE + EXCHANGE_TABLE + 'audience = ["x"]\nclient_secret = "s3cret"',
     "agents[0].token_exchange.client_secret", "unknown key"),
    (REMOTE + EXCHANGE_TABLE.replace('client_id = "hub"\n', "") + 'audience = ["x"]',
     "agents[0].token_exchange.client_id", "required key is missing"),
    ('[[agents]]\nid = "echo"\ntype = "builtin"\n' + EXCHANGE_TABLE + 'audience = ["x"]',
     "agents[0].token_exchange", "not used by agents of type 'builtin'"),
    ('[[agents]]\nid = "a"\ntype = "python"\nentry = "m:f"\n' + EXCHANGE_TABLE + 'audience = ["x"]',
     "agents[0].token_exchange", "not used by agents of type 'python'"),
])
def test_config_mistakes_name_file_key_and_reason(tmp_path, text: str, key: str, reason: str) -> None:
    path = tmp_path / "parley.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key and reason in info.value.reason, str(info.value)
    assert str(info.value).startswith(f"{path}: {key}: ")


async def test_an_unset_client_secret_is_named_when_the_hub_is_built(tmp_path) -> None:
    path = tmp_path / "parley.toml"
    path.write_text(REMOTE + EXCHANGE_TABLE + 'audience = ["https://billing.example.com"]')
    os.environ.pop("PARLEY_TEST_TX_UNSET_SECRET", None)
    with pytest.raises(ConfigError) as info:
        await build_app(load_config(path))
    assert str(info.value) == (f"{path}: agents[0].token_exchange.client_secret_env: the environment variable "
                               "PARLEY_TEST_TX_UNSET_SECRET is not set")


def test_the_documented_configuration_parses() -> None:
    """docs/security.md's [agents.token_exchange] example is a valid parley.toml."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", doc, re.DOTALL) if "[agents.token_exchange]" in b)
    config = parse_config(tomllib.loads(block))
    te = config.agents[0].token_exchange
    assert te is not None and te.audience == ["https://billing.example.com"] and te.key_callers == "refuse"


@pytest.mark.parametrize("exchange", [False, True], ids=["fixed key", "token exchange"])
async def test_credentials_go_only_to_the_configured_origin_whatever_the_card_says(sts: TokenEndpoint,
                                                                                   exchange: bool) -> None:
    """A2A spec §5 (the card's interfaces say where to call): a remote whose card names an interface on another
    origin (here `localhost` instead of the configured `127.0.0.1`) does not get this agent's credentials sent
    there: the delegation fails naming both origins, and nothing reaches the agent."""
    remote = whoami_server(sts, R1_AUD, public_host="localhost")
    os.environ["PARLEY_TEST_TX_FIXED"] = REMOTE_ADMIN
    if exchange:
        toml = hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD,
                        client="hub-agent", target=R1_AUD)
    else:  # the same hub, with a fixed key instead of [agents.token_exchange]
        toml = hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD,
                        client="hub-agent", target=R1_AUD, agent_extra='api_key_env = "PARLEY_TEST_TX_FIXED"')
        toml = toml[:toml.index("[agents.token_exchange]")]
    hub = await start_hub(toml)
    try:
        caller = sts.issue("alice", aud=HUB_AUD)
        events = await ask(f"{hub.url}/a2a/billing", {"Authorization": f"Bearer {caller}"})
        assert last_state(events) is S.FAILED
        port = remote.live.port
        assert (f"names an interface at http://localhost:{port}; its credentials are sent only to "
                f"http://127.0.0.1:{port}") in status_texts(events)[-1]
        assert remote.calls == []
    finally:
        hub.stop()
        remote.live.stop()


async def test_an_answer_to_the_remotes_question_goes_with_the_answering_requests_token(sts: TokenEndpoint) -> None:
    """A2A spec §6.3 (input-required, continued with the task id): the remote's question reaches the caller; the
    answer is forwarded to the remote task with a token exchanged for the token the answer came with."""
    remote = whoami_server(sts, R1_AUD)
    hub = await start_hub(hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD,
                                   client="hub-agent", target=R1_AUD))
    try:
        first_token, second_token = sts.issue("alice", aud=HUB_AUD), sts.issue("alice", aud=HUB_AUD, jti="2")
        url = f"{hub.url}/a2a/billing"
        async with await A2AClient.connect(url, headers={"Authorization": f"Bearer {first_token}"}) as client:
            events = await collect(client, "ask me first")
        assert last_state(events) is S.INPUT_REQUIRED and status_texts(events)[-1] == "Which account?"
        task = events[0]
        assert isinstance(task, m.Task)
        async with await A2AClient.connect(url, headers={"Authorization": f"Bearer {second_token}"}) as client:
            answer = await collect(client, "ACC-7", task_id=task.id, context_id=task.context_id)
        assert last_state(answer) is S.COMPLETED, status_texts(answer)
        assert report_of(answer)["claims"]["sub"] == "alice"
        subjects = [seen.form["subject_token"] for seen in sts.seen(EXCHANGE)]
        assert subjects == [[first_token], [second_token]]
    finally:
        hub.stop()
        remote.live.stop()


async def test_an_in_process_hop_keeps_the_caller_for_the_remote_hop_after_it(sts: TokenEndpoint) -> None:
    """caller -> echo (routed in process to billing, as the caller) -> billing's remote: the in-process call
    carries the caller's principal, and its token is the one exchanged for the remote."""
    remote = whoami_server(sts, R1_AUD)
    toml = hub_toml(sts, agent_id="billing", card_url=remote.card_url, own_audience=HUB_AUD, client="hub-agent",
                    target=R1_AUD)
    toml = toml.replace("[[agents]]", '[[agents]]\nid = "echo"\ntype = "builtin"\n\n[[agents]]', 1)
    toml += '\n[[routes]]\nfrom = "echo"\nto = "billing"\nkeywords = ["invoice"]\n'
    hub = await start_hub(toml)
    try:
        caller = sts.issue("dave", aud=HUB_AUD)
        events = await ask(f"{hub.url}/a2a/echo", {"Authorization": f"Bearer {caller}"}, "my invoice")
        assert last_state(events) is S.COMPLETED, status_texts(events)
        assert report_of(events)["claims"]["sub"] == "dave"
        assert report_of(events)["claims"]["act"] == {"sub": "hub-agent"}
        assert sts.seen(EXCHANGE)[0].form["subject_token"] == [caller]
    finally:
        hub.stop()
        remote.live.stop()
