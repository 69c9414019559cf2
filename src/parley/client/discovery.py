"""Every agent a host serves: its AI Catalog (`/.well-known/ai-catalog.json`), else Parley's `GET /agents`.

The catalog's entries of media type `application/a2a-agent-card+json` name card URLs; each card is read
(asking for A2A 1.0). A host without a catalog (an older Parley, another A2A server) is asked for
`GET /agents`; a host with neither is an error that says so.
"""

from __future__ import annotations

from typing import Any

import httpx

from parley.client.errors import ClientError

CATALOG_PATH = "/.well-known/ai-catalog.json"
CARD_MEDIA_TYPE = "application/a2a-agent-card+json"


async def hosted_agents(http: httpx.AsyncClient, url: str) -> tuple[list[dict[str, Any]], str]:
    """(the 1.0 cards of the agents `url` hosts, where the list came from: "ai-catalog" or "agents")."""
    base = url.rstrip("/")
    try:
        resp = await http.get(base + CATALOG_PATH)
        if resp.status_code == 200 and _is_catalog(resp):
            return await _cards_of(http, resp.json()), "ai-catalog"
        fallback = await http.get(base + "/agents")
    except httpx.HTTPError as exc:
        raise ClientError(f"cannot reach {url}: {exc}") from None
    if fallback.status_code != 200:
        raise ClientError(f"{url} has no AI Catalog (GET {CATALOG_PATH} answered HTTP {resp.status_code}) and "
                          f"GET {base}/agents answered HTTP {fallback.status_code}")
    try:
        cards = fallback.json()["agents"]
    except (ValueError, KeyError, TypeError):
        raise ClientError(f"GET {base}/agents did not answer a list of agents") from None
    return list(cards), "agents"


def _is_catalog(resp: httpx.Response) -> bool:
    kind = resp.headers.get("content-type", "").split(";")[0].strip()
    if kind not in ("application/ai-catalog+json", "application/json"):
        return False
    try:
        return isinstance(resp.json().get("entries"), list)
    except (ValueError, AttributeError):
        return False


async def _cards_of(http: httpx.AsyncClient, catalog: dict[str, Any]) -> list[dict[str, Any]]:
    cards = []
    for entry in catalog["entries"]:
        if not isinstance(entry, dict) or entry.get("mediaType") != CARD_MEDIA_TYPE or not entry.get("url"):
            continue
        resp = await http.get(entry["url"], headers={"A2A-Version": "1.0"})
        if resp.status_code != 200:
            raise ClientError(f"the AI Catalog lists {entry['url']}, which answered HTTP {resp.status_code}")
        cards.append(resp.json())
    return cards


__all__ = ["CARD_MEDIA_TYPE", "CATALOG_PATH", "hosted_agents"]
