"""Agent cards: well-known paths, per-version shape, HTTP caching."""

from __future__ import annotations

import httpx
import pytest
from srvkit import http

LEGACY_FIELDS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces",
                 "supportsAuthenticatedExtendedCard"}
REQUIRED_V1 = {"name", "description", "supportedInterfaces", "version", "capabilities", "defaultInputModes",
               "defaultOutputModes", "skills"}


def _get(url: str, **headers: str) -> httpx.Response:
    return http.get(url, headers=headers)


@pytest.fixture(scope="module")
def card_paths(lab_server):
    base = lab_server.url
    return {
        "root": (f"{base}/.well-known/agent-card.json", f"{base}/", "echo"),
        "root-legacy": (f"{base}/.well-known/agent.json", f"{base}/", "echo"),
        "echo": (f"{base}/a2a/echo/.well-known/agent-card.json", f"{base}/a2a/echo", "echo"),
        "interviewer": (f"{base}/a2a/interviewer/.well-known/agent-card.json", f"{base}/a2a/interviewer",
                        "interviewer"),
    }


PATHS = ["root", "root-legacy", "echo", "interviewer"]


@pytest.mark.parametrize("which", PATHS)
def test_card_without_version_has_legacy_fields(card_paths, which):
    url, endpoint, agent = card_paths[which]
    r = _get(url)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    card = r.json()
    assert REQUIRED_V1 <= set(card)
    assert LEGACY_FIELDS <= set(card)
    assert card["url"] == endpoint
    assert card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"].startswith("0.3")
    assert card["supportsAuthenticatedExtendedCard"] is False
    assert {"url": endpoint, "transport": "JSONRPC"} in card["additionalInterfaces"]
    versions = {(i["protocolBinding"], i["protocolVersion"], i["url"]) for i in card["supportedInterfaces"]}
    assert ("JSONRPC", "1.0", endpoint) in versions and ("JSONRPC", "0.3", endpoint) in versions
    assert card["skills"] and all({"id", "name", "description", "tags"} <= set(s) for s in card["skills"])
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["pushNotifications"] is True  # push is on by default (docs/push.md)
    if agent == "interviewer":
        assert card["name"] == "Interviewer"


# What the built-in agents declare (parley.agents.builtin), as their 1.0 cards show it.
AGENT_CARDS = {
    "echo": {
        "name": "Echo",
        "description": "Echoes your message back, streamed in chunks as artifact updates.",
        "skills": [{"id": "echo", "name": "Echo", "description": "Repeats the text it receives, streamed in chunks.",
                    "tags": ["echo", "test"], "examples": ["hello world"]}],
    },
    "interviewer": {
        "name": "Interviewer",
        "description": "Asks one follow-up question (input-required), then answers using both replies.",
        "skills": [{"id": "interview", "name": "Interview",
                    "description": "Asks a follow-up question before answering (multi-turn, input-required).",
                    "tags": ["multi-turn", "test"], "examples": ["I want to learn Rust"]}],
    },
}


def expected_v1_card(agent: str, endpoint: str) -> dict:
    """The whole 1.0 card of a built-in agent served at `endpoint` by the lab server (no gRPC, no security)."""
    return {
        "name": AGENT_CARDS[agent]["name"],
        "description": AGENT_CARDS[agent]["description"],
        "supportedInterfaces": [  # every binding and version served, the preferred (JSON-RPC 1.0) first
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": endpoint, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": endpoint, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        ],
        "version": "1.0.0",
        "capabilities": {"streaming": True, "pushNotifications": True, "extendedAgentCard": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": AGENT_CARDS[agent]["skills"],
        "provider": {"organization": "Parley", "url": endpoint},
    }


@pytest.mark.parametrize("which", PATHS)
def test_card_for_v1_is_the_agents_card_without_legacy_fields(card_paths, which):
    url, endpoint, agent = card_paths[which]
    r = _get(url, **{"A2A-Version": "1.0"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    card = r.json()
    assert not (LEGACY_FIELDS & set(card)), LEGACY_FIELDS & set(card)
    assert len(card.pop("signatures")) == 1  # signed (tests/cards/test_signed_cards.py checks the signature)
    assert card == expected_v1_card(agent, endpoint)


def test_card_for_v1_via_query_parameter(card_paths):
    url, endpoint, agent = card_paths["root"]
    card = _get(url + "?A2A-Version=1.0").json()
    assert len(card.pop("signatures")) == 1  # signed (tests/cards/test_signed_cards.py checks the signature)
    assert card == expected_v1_card(agent, endpoint)


@pytest.mark.parametrize("version", [None, "1.0"])
def test_card_caching_headers_and_conditional_requests(card_paths, version):
    url, _, _ = card_paths["echo"]
    h = {"A2A-Version": version} if version else {}
    r = _get(url, **h)
    etag, modified, cache = r.headers.get("etag"), r.headers.get("last-modified"), r.headers.get("cache-control")
    assert etag and etag.strip('W/').startswith('"') and etag.endswith('"')
    assert modified and modified.endswith("GMT")
    assert cache and "max-age=" in cache
    max_age = int(cache.split("max-age=")[1].split(",")[0])
    assert max_age > 0
    # same card, same validator
    again = _get(url, **h)
    assert again.headers["etag"] == etag and again.content == r.content

    nm = _get(url, **h, **{"If-None-Match": etag})
    assert nm.status_code == 304 and nm.content == b""
    assert nm.headers["etag"] == etag
    assert _get(url, **h, **{"If-None-Match": f"W/{etag}"}).status_code == 304
    assert _get(url, **h, **{"If-None-Match": f'"other", {etag}'}).status_code == 304
    assert _get(url, **h, **{"If-None-Match": '"something-else"'}).status_code == 200

    ims = _get(url, **h, **{"If-Modified-Since": modified})
    assert ims.status_code == 304 and ims.content == b""
    old = _get(url, **h, **{"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"})
    assert old.status_code == 200 and old.content == r.content
    assert _get(url, **h, **{"If-Modified-Since": "not a date"}).status_code == 200


def test_cards_of_different_versions_have_different_etags(card_paths):
    url, _, _ = card_paths["root"]
    a = _get(url)
    b = _get(url, **{"A2A-Version": "1.0"})
    assert a.headers["etag"] != b.headers["etag"]
    assert "a2a-version" in a.headers.get("vary", "").lower()
    # a validator from one version does not validate the other
    assert _get(url, **{"A2A-Version": "1.0", "If-None-Match": a.headers["etag"]}).status_code == 200


def test_unknown_agent_card_is_404(lab_server):
    assert _get(f"{lab_server.url}/a2a/nope/.well-known/agent-card.json").status_code == 404
