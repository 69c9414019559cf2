"""The AI Catalog of a server (`GET /.well-known/ai-catalog.json`): one entry per hosted agent, pointing at its card.

Discovery of every agent a host serves (A2A spec PR #2240 prefers the AI Catalog for hosts with many
agents). The document follows AI Catalog v0.9: `specVersion` and `entries`, each entry with
`identifier`, `displayName`, `mediaType` (`application/a2a-agent-card+json`), `url` (the agent's
well-known card), and `description`, `version` and `updatedAt` taken from the public card: the catalog
shows nothing the public cards do not. Card responses link here (`Link: <...>; rel="ai-catalog"`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from parley.protocol import models as m

CATALOG_PATH = "/.well-known/ai-catalog.json"
CATALOG_MEDIA_TYPE = "application/ai-catalog+json"
CARD_MEDIA_TYPE = "application/a2a-agent-card+json"
SPEC_VERSION = "0.9"


def link_header(base: str) -> str:
    """The `Link` header value that points a card's reader at the catalog of `base`."""
    return f'<{base}{CATALOG_PATH}>; rel="ai-catalog"'


def card_url(base: str, agent_id: str) -> str:
    """Where an agent's card is below `base`."""
    return f"{base}/a2a/{agent_id}/.well-known/agent-card.json"


def catalog(base: str, default_agent: str, cards: Mapping[str, m.AgentCard], modified_at: float) -> dict[str, Any]:
    """The catalog of `cards` (agent id -> public card), the default agent first."""
    updated = datetime.fromtimestamp(modified_at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    order = sorted(cards, key=lambda agent_id: (agent_id != default_agent, agent_id))
    entries = []
    for agent_id in order:
        card = cards[agent_id]
        entry: dict[str, Any] = {"identifier": card_url(base, agent_id), "displayName": card.name,
                                 "mediaType": CARD_MEDIA_TYPE, "url": card_url(base, agent_id)}
        if card.description:
            entry["description"] = card.description
        if card.version:
            entry["version"] = card.version
        entry["updatedAt"] = updated
        entries.append(entry)
    return {"specVersion": SPEC_VERSION, "entries": entries}


__all__ = ["CARD_MEDIA_TYPE", "CATALOG_MEDIA_TYPE", "CATALOG_PATH", "SPEC_VERSION", "card_url", "catalog",
           "link_header"]
