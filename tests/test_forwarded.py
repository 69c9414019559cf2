"""Behind a reverse proxy, cards point at the URL clients use (forwarded headers or public_url)."""

import httpx

from parley.app import Settings
from parley.serve import default_app

CARD = "/a2a/echo/.well-known/agent-card.json"


def urls(card):
    return {i["url"] for i in card["supportedInterfaces"]}


def test_x_forwarded_headers_from_a_trusted_proxy(server):
    card = httpx.get(server.url + CARD, headers={"A2A-Version": "1.0", "X-Forwarded-Proto": "https",
                                                 "X-Forwarded-Host": "agents.example.com",
                                                 "X-Forwarded-Prefix": "/parley"}).json()
    assert urls(card) == {"https://agents.example.com/parley/a2a/echo"}
    listed = httpx.get(server.url + "/agents", headers={"X-Forwarded-Host": "agents.example.com"}).json()
    assert listed["agents"][0]["supportedInterfaces"][0]["url"].startswith("http://agents.example.com/a2a/")


def test_rfc7239_forwarded_header(server):
    card = httpx.get(server.url + CARD, headers={"A2A-Version": "1.0",
                                                 "Forwarded": 'for=1.2.3.4;proto=https;host="a2a.example.org"'}).json()
    assert urls(card) == {"https://a2a.example.org/a2a/echo"}


def test_an_untrusted_peer_cannot_rewrite_urls(serve):
    srv = serve(default_app(None, settings=Settings(forwarded_allow_ips=["10.9.9.9"])))
    card = httpx.get(srv.url + CARD, headers={"A2A-Version": "1.0", "X-Forwarded-Host": "evil.example"}).json()
    assert urls(card) == {f"{srv.url}/a2a/echo"}


def test_public_url_wins(serve):
    srv = serve(default_app(None, settings=Settings(public_url="https://public.example/base/")))
    card = httpx.get(srv.url + CARD, headers={"A2A-Version": "1.0", "X-Forwarded-Host": "other.example"}).json()
    assert urls(card) == {"https://public.example/base/a2a/echo"}
    legacy = httpx.get(srv.url + "/.well-known/agent-card.json").json()
    assert legacy["url"] == "https://public.example/base/"

