"""AI Catalog discovery (AI Catalog v0.9, A2A spec PR #2240; A2A 1.0 §8.2 "Registries/Catalogs"): every hosted
agent's card listed at /.well-known/ai-catalog.json, linked from the cards, read by `parley agents` (which
falls back to GET /agents on a server without a catalog)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from interop_client.sdk_servers import running as sdk_running
from interop_client.sdk_servers import start_sdk13_server
from parley.serve import default_app
from support import LiveServer, running, secured_app

PARLEY = str(Path(sys.executable).with_name("parley"))
CATALOG = "/.well-known/ai-catalog.json"


def _parley(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PARLEY, *args], capture_output=True, text=True, timeout=60, check=False)


def test_catalog_lists_every_agent_and_cards_link_to_it():
    with running(default_app(None)) as srv:
        resp = httpx.get(srv.url + CATALOG)
        assert resp.status_code == 200
        assert resp.headers["content-type"].split(";")[0] == "application/ai-catalog+json"
        catalog = resp.json()
        assert catalog["specVersion"] == "0.9"
        entries = {e["url"]: e for e in catalog["entries"]}
        assert set(entries) == {f"{srv.url}/a2a/{a}/.well-known/agent-card.json" for a in ("echo", "interviewer")}
        for url, entry in entries.items():
            assert entry["mediaType"] == "application/a2a-agent-card+json"
            card = httpx.get(url, headers={"A2A-Version": "1.0"})
            assert entry["displayName"] == card.json()["name"]
            assert card.headers["link"] == f'<{srv.url}{CATALOG}>; rel="ai-catalog"'
        root = httpx.get(srv.url + "/.well-known/agent-card.json")
        assert root.headers["link"] == f'<{srv.url}{CATALOG}>; rel="ai-catalog"'


def test_secured_server_catalog_is_public_and_shows_only_the_public_cards():
    """No credentials needed (like the public cards), and nothing beyond what the public cards show."""
    app, _key = secured_app()
    with running(app) as srv:
        catalog = httpx.get(srv.url + CATALOG)
        assert catalog.status_code == 200
        for entry in catalog.json()["entries"]:
            card = httpx.get(entry["url"], headers={"A2A-Version": "1.0"})
            assert card.status_code == 200
            public = card.json()
            assert entry["displayName"] == public["name"]
            assert entry.get("description") == public["description"]
            assert set(entry) <= {"identifier", "displayName", "mediaType", "url", "description", "version",
                                  "updatedAt"}


def test_parley_agents_reads_the_catalog():
    with running(default_app(None)) as srv:
        done = _parley("agents", srv.url, "--json")
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["source"] == "ai-catalog"
        assert sorted(c["name"] for c in data["agents"]) == ["Echo", "Interviewer"]


def test_parley_agents_falls_back_to_agents_route():
    """A Parley without the catalog route (an older release): GET /agents is used."""
    app = default_app(None)
    asgi = app.asgi()
    asgi.router.routes = [r for r in asgi.router.routes if getattr(r, "path", "") != CATALOG]
    app.asgi = lambda: asgi  # LiveServer serves this app: Parley's, without the catalog route
    srv = LiveServer(app).start()
    try:
        assert httpx.get(srv.url + CATALOG).status_code != 200
        done = _parley("agents", srv.url, "--json")
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["source"] == "agents"
        assert sorted(c["name"] for c in data["agents"]) == ["Echo", "Interviewer"]
    finally:
        srv.stop()


def test_parley_agents_on_a_server_with_neither_says_so():
    """The real a2a-sdk server has no catalog and no GET /agents: one error line naming both."""
    with sdk_running(start_sdk13_server) as srv:
        done = _parley("agents", srv.url)
        assert done.returncode != 0
        assert "has no AI Catalog" in done.stderr + done.stdout
