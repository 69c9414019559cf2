"""A first dashboard page: every hosted agent, its card, endpoint and a curl example."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from starlette.requests import Request

if TYPE_CHECKING:
    from parley.server.app import Server


def render_dashboard(server: Server, request: Request) -> str:
    """The HTML of the dashboard page."""
    rows = []
    for agent_id, agent in server.app.agents.items():
        url = server.agent_url(request, agent_id)
        card = f"{url}/.well-known/agent-card.json"
        curl = (
            f"curl -s {url} -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d "
            "'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":"
            "{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"hello\"}]}}}'"
        )
        default = " <em>(default)</em>" if agent_id == server.app.default_agent else ""
        rows.append(
            f"<section class='agent' data-agent='{html.escape(agent_id)}'>"
            f"<h2>{html.escape(agent.name)}{default}</h2><p>{html.escape(agent.description)}</p>"
            f"<p>Endpoint: <code>{html.escape(url)}</code><br>Card: <a href='{html.escape(card)}'>"
            f"{html.escape(card)}</a></p><pre>{html.escape(curl)}</pre></section>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Parley</title>"
        "<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "pre{background:#f4f4f4;padding:.5rem;overflow-x:auto}section{border-top:1px solid #ddd}</style>"
        f"</head><body><h1>Parley</h1><p>{len(server.app.agents)} agent(s) hosted.</p>"
        + "".join(rows)
        + "</body></html>"
    )
