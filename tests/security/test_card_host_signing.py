"""Adversarial pass, second round (docs/security.md): the server's card key never vouches for a `Host` the
caller chose. A 1.0 card's signature covers its `supportedInterfaces` (A2A 1.0 §8.4.1, §8.4.3): a card that
names another host and verifies under this server's published keys sends every client that trusts those keys
(and their credentials) to that host. On main, `GET /.well-known/agent-card.json` with `Host: evil.example`
(no credentials needed) returned exactly such a card."""

from __future__ import annotations

import httpx
import pytest

from parley.client.card_trust import CardTrust, CardVerificationError
from support import running, secured_app

EVIL = "evil.example"
PATHS = ["/.well-known/agent-card.json", "/a2a/echo/.well-known/agent-card.json"]
V1 = {"A2A-Version": "1.0"}


def _trust(url: str) -> CardTrust:
    return CardTrust(httpx.get(url + "/.well-known/agent-card-jwks.json").json())


@pytest.mark.parametrize("path", PATHS)
def test_card_for_a_forged_host_is_not_signed_by_the_server(path):
    app, _admin = secured_app()
    with running(app) as srv:
        trust = _trust(srv.url)
        own = httpx.get(srv.url + path, headers=V1).json()
        assert trust.check(own)  # the card the server's own address names is signed: the check below can fail
        forged = httpx.get(srv.url + path, headers={**V1, "Host": EVIL})
        assert forged.status_code == 200
        card = forged.json()
        assert all(EVIL in i["url"] for i in card["supportedInterfaces"])  # base_url still follows Host
        with pytest.raises(CardVerificationError) as refused:
            trust.check(card)
        assert refused.value.reason == "missing"


def test_agent_list_for_a_forged_host_is_not_signed():
    """GET /agents (a key holder's view) signs its cards only for an address this server can vouch for."""
    app, admin = secured_app()
    with running(app) as srv:
        trust = _trust(srv.url)
        own = httpx.get(srv.url + "/agents", headers={"X-API-Key": admin}).json()["agents"]
        assert all(trust.check(card) for card in own)
        forged = httpx.get(srv.url + "/agents", headers={"X-API-Key": admin, "Host": EVIL})
        assert forged.status_code == 200
        for card in forged.json()["agents"]:
            assert EVIL in card["supportedInterfaces"][0]["url"]
            assert not card.get("signatures")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_extended_card_for_a_forged_host_is_not_signed(binding):
    """GetExtendedAgentCard (A2A 1.0 §3.1.11, §8.4): a key holder's call with a forged Host gets no card signed
    by this server that names that host."""
    app, admin = secured_app()
    with running(app) as srv:
        trust = _trust(srv.url)

        def extended(host: dict[str, str]) -> dict:
            headers = {"X-API-Key": admin, **V1, **host}
            if binding == "JSONRPC":
                return httpx.post(srv.url + "/a2a/echo", headers=headers, json={
                    "jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}).json()["result"]
            return httpx.get(srv.url + "/a2a/echo/extendedAgentCard", headers=headers).json()

        assert trust.check(extended({}))  # for the server's own address it is signed: the check below can fail
        card = extended({"Host": EVIL})
        assert EVIL in card["supportedInterfaces"][0]["url"]
        with pytest.raises(CardVerificationError) as refused:
            trust.check(card)
        assert refused.value.reason == "missing"


def test_dashboard_agent_page_for_a_forged_host_shows_no_signed_card():
    """The dashboard's agent page (a logged-in viewer) shows the card it would serve: signed for the server's own
    address, never for a Host the viewer chose (else the page hands out the same signed card)."""
    app, admin = secured_app()
    with running(app) as srv, httpx.Client(base_url=srv.url) as http:
        login = http.get("/ui/login").text
        csrf = login.split('name="csrf-token" content="')[1].split('"')[0]
        assert http.post("/ui/login", data={"credential": admin, "csrf": csrf, "next": "/"}).status_code == 303
        own = http.get("/ui/agents/echo")
        assert own.status_code == 200 and "protected" in own.text  # the signed card is shown: the check can fail
        forged = http.get("/ui/agents/echo", headers={"Host": EVIL})
        assert forged.status_code == 200 and EVIL in forged.text
        assert "protected" not in forged.text
