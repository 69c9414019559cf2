"""A first dashboard page: every hosted agent, its card, endpoint and a curl example."""

from __future__ import annotations

import html

from parley.runtime import Runtime
from parley.server.urls import agent_url


def render_dashboard(runtime: Runtime, base: str) -> str:
    """The HTML of the dashboard page, with agent URLs below `base` (the server's public base URL)."""
    rows = []
    for agent_id, agent in runtime.agents.items():
        url = agent_url(base, agent_id)
        card = f"{url}/.well-known/agent-card.json"
        curl = (
            f"curl -s {url} -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d "
            "'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":"
            "{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"hello\"}]}}}'"
        )
        default = " <em>(default)</em>" if agent_id == runtime.default_agent else ""
        if agent.problem is not None:
            default += f" <strong class='unavailable'>unavailable: {html.escape(agent.problem)}</strong>"
        rows.append(
            f"<section class='agent' data-agent='{html.escape(agent_id)}'>"
            f"<h2>{html.escape(agent.name)}{default}</h2><p>{html.escape(agent.description)}</p>"
            f"<p>Endpoint: <code>{html.escape(url)}</code><br>Card: <a href='{html.escape(card)}'>"
            f"{html.escape(card)}</a></p><pre>{html.escape(curl)}</pre></section>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Parley</title>"
        "<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "pre{background:#f4f4f4;padding:.5rem;white-space:pre-wrap;word-break:break-all}"
        "section{border-top:1px solid #ddd}</style>"
        f"</head><body><h1>Parley</h1><p>{len(runtime.agents)} agent(s) hosted.</p>"
        + "".join(rows)
        + "</body></html>"
    )
