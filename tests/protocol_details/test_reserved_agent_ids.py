"""Agent ids that collide with Parley's routes are refused when the agent is added.

Every agent is reachable as `/{agent_id}/...` (the HTTP+JSON tenant form of A2A 1.0 section 11,
`/{tenant}/message:send`), beside the default agent's own HTTP+JSON paths (`/message:send`, `/tasks`,
0.3 under `/v1/`) and Parley's routes. An agent called `v1` used to take over the default agent's
0.3 HTTP+JSON API; such ids are now refused, naming the id and why.
"""

from __future__ import annotations

import re

import pytest

from parley.app import Parley
from parley.hub.config import ConfigError, parse_config
from parley.server import rest, rest_v03
from parley.server.app import create_app
from parley.server.reserved import RESERVED_AGENT_IDS

REQUIRED = ["v1", "tasks", "message:send", "message:stream", "extendedAgentCard", ".well-known", "card", "agents",
            "healthz", "admin", "a2a"]


def _app_with(agent_id: str) -> Parley:
    app = Parley()

    @app.agent(id=agent_id)
    async def agent(ctx):
        yield "hi"

    return app


@pytest.mark.parametrize("agent_id", [*REQUIRED, "x:y", ":", ".hidden", ".", "..", "", "a/b"])
def test_parley_refuses_colliding_ids(agent_id):
    with pytest.raises(ValueError) as caught:
        _app_with(agent_id)
    text = str(caught.value)
    assert repr(agent_id) in text
    assert any(word in text for word in ("reserved", "':'", "'.'", "empty", "'/'")), text


def test_the_reason_names_what_the_id_would_shadow():
    with pytest.raises(ValueError, match=r"'v1'.*reserved.*0\.3 HTTP\+JSON"):
        _app_with("v1")
    with pytest.raises(ValueError, match=r"'tasks'.*reserved"):
        _app_with("tasks")
    with pytest.raises(ValueError, match=r"':'"):
        _app_with("weather:v2")


@pytest.mark.parametrize("agent_id", ["echo", "v2", "v1-bot", "tasks2", "my.agent", "Card", "a_b"])
def test_ordinary_ids_are_accepted(agent_id):
    assert agent_id in _app_with(agent_id).agents


def test_the_reserved_list_covers_every_first_path_segment():
    """Each literal first segment of the HTTP routes and of both HTTP+JSON route tables is reserved, so a
    route added without reserving its segment fails here."""
    app = Parley()
    app.add_agent(_app_with("echo").agents["echo"])
    segments = set()
    for route in create_app(app.runtime()).routes:
        head = route.path.strip("/").split("/")[0]
        if head and not head.startswith("{"):
            segments.add(head)
    for pattern, _verbs in [*rest.ROUTES, *rest_v03.ROUTES]:
        head = re.split(r"[/(]", pattern.pattern)[0]
        if head:
            segments.add(head)
    assert {"a2a", "tasks", "v1", "message:send", "extendedAgentCard", ".well-known"} <= segments
    assert segments <= set(RESERVED_AGENT_IDS), segments - set(RESERVED_AGENT_IDS)
    assert set(REQUIRED) <= set(RESERVED_AGENT_IDS)


@pytest.mark.parametrize("agent_id", ["v1", "tasks", "extendedAgentCard", "healthz", "card"])
def test_hub_config_refuses_them(agent_id):
    data = {"server": {"db": "memory"}, "agents": [{"id": agent_id, "type": "python", "entry": "m:f"}]}
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "parley.toml")
    assert caught.value.key == "agents[0].id"
    assert repr(agent_id) in caught.value.reason and "reserved" in caught.value.reason
