"""The dashboard's card check (parley.web.card_check) on the cards a real Parley server serves, and on broken copies.

The agent page shows, for each agent, its card as a 1.0 client gets it (checked against a2a.proto's AgentCard,
A2A 1.0 section 4.4.1, via ProtoJSON plus the fields a2a.proto marks REQUIRED) and as a 0.3 client gets it
(checked against the `required` lists and types of the 0.3 JSON schema, specification/json/a2a.json). An
operator trusts a green list to mean "clients will accept this card" and a red line to name what is wrong, so:
the real cards pass every check, and each mutation below fails with exactly the line that names the problem.

The cards come from a live server on 127.0.0.1 (`GET /a2a/{id}/.well-known/agent-card.json`, with and without
`A2A-Version: 1.0`), open and secured (an admin key in the environment: the card then declares its schemes).
"""

from __future__ import annotations

import copy
import secrets
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from parley import Parley
from parley.protocol import models as m
from parley.settings import AuthSettings, Settings
from parley.web.card_check import Check, check_v03, check_v1
from support import LiveServer, needs

ADMIN_ENV = "PARLEY_TEST_CARD_ADMIN_KEY"
PARSES = "parses as lf.a2a.v1.AgentCard (a2a.proto, ProtoJSON)"
ALL_REQUIRED = "every field a2a.proto marks REQUIRED is present"
# the a2a.proto checks need protobuf and the generated a2a_pb2 (the grpc extra); the fallback tests do not
PROTO = needs("parley.grpc.a2a_pb2", "grpc")
V03_COMPLETE = "every property the 0.3 schema requires of `card` is present, with the right type"


def build_app(settings: Settings) -> Parley:
    app = Parley(settings=settings)

    @app.agent("echo", description="Says your text back",
               skills=[m.AgentSkill(id="say", name="Say", description="Repeats the text", tags=["echo", "text"],
                                    examples=["hello"])])
    async def echo(ctx):  # type: ignore[no-untyped-def]
        yield ctx.text

    return app


Cards = tuple[dict[str, Any], dict[str, Any], str]  # (1.0 card, 0.3 card, agent URL)


@pytest.fixture(params=["open", "secured"])
def cards(request: pytest.FixtureRequest, serve: Callable[..., LiveServer],
          monkeypatch: pytest.MonkeyPatch) -> Cards:
    """The echo agent's card as a live server serves it to a 1.0 client and to a 0.3 client."""
    if request.param == "secured":
        monkeypatch.setenv(ADMIN_ENV, "adm-" + secrets.token_urlsafe(24))
        auth = AuthSettings(admin_key_env=ADMIN_ENV)
    else:
        auth = AuthSettings()
    live = serve(build_app(Settings(db="memory", auth=auth)))
    url = f"{live.url}/a2a/echo"
    v1 = httpx.get(f"{url}/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}, timeout=10)
    v03 = httpx.get(f"{url}/.well-known/agent-card.json", timeout=10)
    assert v1.status_code == 200 and v03.status_code == 200, (v1.text, v03.text)
    if request.param == "secured":  # the secured card really declares its scheme (what the checks must accept)
        assert "securitySchemes" in v1.json() and "security" in v03.json()
    return v1.json(), v03.json(), url


def failures(checks: list[Check]) -> list[str]:
    return [c.what for c in checks if not c.ok]


def mutated(card: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copied = copy.deepcopy(card)
    change(copied)
    return copied


# --- A2A 1.0 ---------------------------------------------------------------------------------------------------------


@PROTO
def test_the_served_1_0_card_passes_every_check(cards: Cards) -> None:
    """The agent page shows only green lines for a card Parley serves: it parses as lf.a2a.v1.AgentCard
    (A2A 1.0 section 4.4.1), has every REQUIRED field, and each of its four interfaces (JSON-RPC and HTTP+JSON,
    1.0 and 0.3) has a known protocolBinding and an absolute http(s) URL."""
    v1, _, url = cards
    checks = check_v1(v1)
    assert failures(checks) == []
    shown = [c.what for c in checks]
    assert shown[:2] == [PARSES, ALL_REQUIRED]
    for i, binding in enumerate(["JSONRPC", "JSONRPC", "HTTP+JSON", "HTTP+JSON"]):
        assert f"`supportedInterfaces[{i}].protocolBinding` {binding!r} is one of JSONRPC, HTTP+JSON, GRPC" in shown
        assert f"`supportedInterfaces[{i}].url` {url!r} is an absolute http(s) URL" in shown
    assert len(shown) == 2 + 2 * 4


@PROTO
def test_a_1_0_card_without_a_name_fails_naming_the_required_field(cards: Cards) -> None:
    """`name` is REQUIRED on AgentCard (A2A 1.0 section 4.4.1; a2a.proto field_behavior): the check says so,
    naming `name`, and nothing else is reported."""
    card = mutated(cards[0], lambda c: c.pop("name"))
    checks = check_v1(card)
    assert failures(checks) == ["REQUIRED field `name` is missing or empty"]
    assert PARSES in [c.what for c in checks if c.ok]  # still valid ProtoJSON: only the REQUIRED check fails


@PROTO
def test_a_1_0_card_whose_skill_has_no_id_fails_naming_the_nested_path(cards: Cards) -> None:
    """AgentSkill.id is REQUIRED (A2A 1.0 section 4.4.1, AgentSkill): the failing line names the exact path
    `skills[0].id`, so the operator knows which skill is broken."""
    card = mutated(cards[0], lambda c: c["skills"][0].pop("id"))
    assert failures(check_v1(card)) == ["REQUIRED field `skills[0].id` is missing or empty"]


@PROTO
def test_a_1_0_card_with_an_unknown_field_does_not_parse(cards: Cards) -> None:
    """A field a2a.proto's AgentCard does not have is rejected by the ProtoJSON parser (A2A 1.0 section 4.4.1):
    one failing "does not parse" line that names the field."""
    card = mutated(cards[0], lambda c: c.update(colour="red"))
    (problem,) = failures(check_v1(card))
    assert problem.startswith("does not parse as lf.a2a.v1.AgentCard (a2a.proto): ")
    assert 'no field named "colour"' in problem


@PROTO
def test_a_1_0_card_with_a_relative_interface_url_fails_the_absolute_url_check(cards: Cards) -> None:
    """An AgentInterface url must be an absolute URL a client can call (A2A 1.0 section 4.4.1,
    supportedInterfaces): `/a2a/echo` fails, on the interface it is in, and nowhere else."""
    card = mutated(cards[0], lambda c: c["supportedInterfaces"][1].update(url="/a2a/echo"))
    assert failures(check_v1(card)) == ["`supportedInterfaces[1].url` '/a2a/echo' is an absolute http(s) URL"]


@PROTO
@pytest.mark.parametrize("url", ["ftp://127.0.0.1/a2a/echo", "http:/a2a/echo", "https://"])
def test_a_1_0_interface_url_that_is_not_http_with_a_host_fails(cards: Cards, url: str) -> None:
    """JSON-RPC and HTTP+JSON interfaces are reached over http(s) at a host (A2A 1.0 section 4.4.1): another
    scheme, or no host, is a failing line."""
    card = mutated(cards[0], lambda c: c["supportedInterfaces"][0].update(url=url))
    assert failures(check_v1(card)) == [f"`supportedInterfaces[0].url` {url!r} is an absolute http(s) URL"]


@PROTO
def test_a_1_0_interface_with_an_unknown_binding_fails_the_binding_check(cards: Cards) -> None:
    """protocolBinding is one of the bindings A2A 1.0 defines (JSONRPC, HTTP+JSON, GRPC; section 4.4.1,
    AgentInterface): "SOAP" is reported on its interface."""
    card = mutated(cards[0], lambda c: c["supportedInterfaces"][2].update(protocolBinding="SOAP"))
    assert failures(check_v1(card)) == [("`supportedInterfaces[2].protocolBinding` 'SOAP' is one of JSONRPC, "
                                         "HTTP+JSON, GRPC")]


@PROTO
def test_a_grpc_interface_is_an_address_without_a_scheme(cards: Cards) -> None:
    """A GRPC interface's url is a `host:port` address (A2A 1.0 section 4.4.1; Parley's gRPC interface has no
    scheme): that passes as "an absolute address", while a bare path does not."""
    grpc = {"url": "127.0.0.1:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "echo"}
    card = mutated(cards[0], lambda c: c["supportedInterfaces"].append(grpc))
    checks = check_v1(card)
    assert failures(checks) == []
    assert "`supportedInterfaces[4].url` '127.0.0.1:50051' is an absolute address" in [c.what for c in checks]
    broken = mutated(card, lambda c: c["supportedInterfaces"][4].update(url="/grpc"))
    assert failures(check_v1(broken)) == ["`supportedInterfaces[4].url` '/grpc' is an absolute address"]


@PROTO
def test_a_1_0_card_without_interfaces_fails(cards: Cards) -> None:
    """supportedInterfaces is REQUIRED and must not be empty (A2A 1.0 section 4.4.1): a card nobody can call is
    reported."""
    card = mutated(cards[0], lambda c: c.update(supportedInterfaces=[]))
    assert failures(check_v1(card)) == ["REQUIRED field `supportedInterfaces` is missing or empty"]


# --- without protobuf (no grpc extra): Parley's own model decodes the card ------------------------------------------


@pytest.fixture
def without_protobuf(monkeypatch: pytest.MonkeyPatch) -> None:
    """`from parley.grpc import a2a_pb2` raises ImportError, as on an install without the grpc extra.

    A None entry in sys.modules makes the import fail; the attribute the package got when a2a_pb2 was first
    imported is removed too, otherwise `from parley.grpc import a2a_pb2` would still find it."""
    monkeypatch.setitem(sys.modules, "parley.grpc.a2a_pb2", None)
    package = sys.modules.get("parley.grpc")
    if package is not None:
        monkeypatch.delattr(package, "a2a_pb2", raising=False)
    with pytest.raises(ImportError):
        from parley.grpc import a2a_pb2  # noqa: F401


def test_without_protobuf_the_1_0_card_still_gets_a_decode_result(cards: Cards, without_protobuf: None) -> None:
    """Without the grpc extra the page does not go blank: the served 1.0 card is decoded with Parley's model of
    AgentCard (A2A 1.0 section 4.4.1) and passes, the line saying how to get the a2a.proto check, and the
    interface checks still run."""
    v1, _, url = cards
    checks = check_v1(v1)
    assert failures(checks) == []
    assert checks[0].what == ("decodes as an A2A 1.0 AgentCard (Parley's model; install the grpc extra for the "
                              "a2a.proto check)")
    assert f"`supportedInterfaces[0].url` {url!r} is an absolute http(s) URL" in [c.what for c in checks]


def test_without_protobuf_a_card_whose_skills_is_a_string_fails_to_decode(cards: Cards,
                                                                          without_protobuf: None) -> None:
    """Without the grpc extra a wrong type still fails (A2A 1.0 section 4.4.1: skills is a list of AgentSkill):
    one failing line saying the card does not decode, naming `skills` and the array it must be."""
    card = mutated(cards[0], lambda c: c.update(skills="say"))
    (problem,) = failures(check_v1(card))
    assert problem.startswith("does not decode as an A2A 1.0 AgentCard: ")
    assert "skills" in problem and "Expected `array`, got `str`" in problem


def test_without_protobuf_a_card_without_a_name_fails_to_decode(cards: Cards, without_protobuf: None) -> None:
    """Without the grpc extra a missing required field is still caught (A2A 1.0 section 4.4.1, AgentCard.name)."""
    card = mutated(cards[0], lambda c: c.pop("name"))
    (problem,) = failures(check_v1(card))
    assert problem.startswith("does not decode as an A2A 1.0 AgentCard: ") and "required field `name`" in problem


# --- A2A 0.3 ---------------------------------------------------------------------------------------------------------


def test_the_served_0_3_card_passes_every_check(cards: Cards) -> None:
    """A card served without A2A-Version (a 0.3 client) has every property the 0.3 JSON schema requires of
    AgentCard (specification/json/a2a.json: url, protocolVersion, capabilities, skills, ...), with the right
    types, an absolute url and a known preferredTransport."""
    _, v03, url = cards
    checks = check_v03(v03)
    assert failures(checks) == []
    assert [c.what for c in checks] == [V03_COMPLETE, f"`url` {url!r} is an absolute http(s) URL",
                                        "preferredTransport 'JSONRPC' is one of JSONRPC, HTTP+JSON, GRPC"]


@pytest.mark.parametrize(("change", "expected"), [
    (lambda c: c.pop("url"), "`card.url` is required and missing"),
    (lambda c: c.pop("protocolVersion"), "`card.protocolVersion` is required and missing"),
    (lambda c: c["skills"][0].pop("tags"), "`skills[0].tags` is required and missing"),
    (lambda c: c.update(capabilities=["streaming"]), "`card.capabilities` must be an object"),
    (lambda c: c["skills"][0].update(tags="echo"), "`skills[0].tags` must be an array"),
    (lambda c: c["additionalInterfaces"][1].pop("transport"), ("`additionalInterfaces[1].transport` is required "
                                                               "and missing")),
    (lambda c: c.update(supportsAuthenticatedExtendedCard="yes"), ("`supportsAuthenticatedExtendedCard` must be a "
                                                                   "boolean")),
], ids=["no-url", "no-protocolVersion", "skill-without-tags", "capabilities-list", "tags-string",
        "interface-without-transport", "extended-card-flag-string"])
def test_a_broken_0_3_card_fails_naming_the_property(cards: Cards, change: Callable[[dict[str, Any]], None],
                                                     expected: str) -> None:
    """Each property the 0.3 JSON schema (specification/json/a2a.json: AgentCard, AgentSkill, AgentInterface)
    requires, or types, is reported by name when it is missing or of the wrong type, and nothing else fails."""
    card = mutated(cards[1], change)
    assert failures(check_v03(card)) == [expected]


def test_a_0_3_card_with_a_relative_url_or_an_unknown_transport_fails(cards: Cards) -> None:
    """A 0.3 client connects to `url` with `preferredTransport` (specification/json/a2a.json, AgentCard): a
    relative url and a transport outside JSONRPC / HTTP+JSON / GRPC are both reported."""
    card = mutated(cards[1], lambda c: c.update(url="/a2a/echo", preferredTransport="SOAP"))
    assert failures(check_v03(card)) == ["`url` '/a2a/echo' is an absolute http(s) URL",
                                         "preferredTransport 'SOAP' is one of JSONRPC, HTTP+JSON, GRPC"]
