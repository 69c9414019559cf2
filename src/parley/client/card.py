"""Fetching an agent card and choosing the interface to talk to.

Accepts 1.0 cards and 0.3 cards (whose `url`/`preferredTransport`/
`additionalInterfaces` become `supportedInterfaces`), so the client works with
any A2A server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from parley.client.errors import ClientError
from parley.protocol import models as m
from parley.protocol.codec import from_wire
from parley.protocol.errors import A2AError
from parley.protocol.v0_3_cards import security_from_v03

if TYPE_CHECKING:
    from parley.client.card_trust import CardTrust

WELL_KNOWN = "/.well-known/agent-card.json"


def card_url_for(url: str) -> str:
    """The card URL for an agent URL (or the URL itself if it already names a card)."""
    if url.endswith(".json"):
        return url
    return url.rstrip("/") + WELL_KNOWN


def normalise_card(data: Any) -> m.AgentCard:
    """Parse a 1.0 or 0.3 card into the canonical card."""
    if not isinstance(data, dict):
        raise ClientError("the agent card is not a JSON object")
    if not data.get("supportedInterfaces") and not data.get("url"):
        keys = ", ".join(sorted(map(str, data))[:6]) or "nothing"
        raise ClientError(f"this is not an agent card: it has neither supportedInterfaces (A2A 1.0) nor url (0.3); "
                          f"it has {keys}")
    data = dict(data)
    if not data.get("supportedInterfaces") and data.get("url"):
        data = security_from_v03(data)  # a 0.3 card: OpenAPI security shapes -> 1.0
        version = _major_minor(str(data.get("protocolVersion") or "0.3"))
        ifaces = [{"url": data["url"], "protocolBinding": data.get("preferredTransport") or "JSONRPC",
                   "protocolVersion": version}]
        for extra in data.get("additionalInterfaces") or []:
            if isinstance(extra, dict) and extra.get("url"):
                ifaces.append({"url": extra["url"], "protocolBinding": extra.get("transport") or "JSONRPC",
                               "protocolVersion": version})
        data["supportedInterfaces"] = ifaces
    caps = dict(data.get("capabilities") or {})
    if data.get("supportsAuthenticatedExtendedCard") and "extendedAgentCard" not in caps:
        caps["extendedAgentCard"] = True
    data["capabilities"] = caps
    for key in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces",
                "supportsAuthenticatedExtendedCard", "security"):
        data.pop(key, None)
    data.setdefault("defaultInputModes", [])
    data.setdefault("defaultOutputModes", [])
    data.setdefault("skills", [])
    data.setdefault("version", "")
    data.setdefault("description", "")
    for skill in data["skills"]:
        if isinstance(skill, dict):
            skill.pop("security", None)
            skill.setdefault("tags", [])
    for iface in data["supportedInterfaces"]:
        if isinstance(iface, dict):
            iface["protocolVersion"] = _major_minor(str(iface.get("protocolVersion") or "0.3"))
    try:
        return from_wire(data, m.AgentCard, what="agent card")
    except A2AError as exc:
        raise ClientError(f"the agent card is not valid: {exc.message}") from None


def _said(resp: httpx.Response) -> str:
    """': <the error message>' of a JSON error body (Parley's, JSON-RPC's, google.rpc.Status), else ''."""
    try:
        body = resp.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f": {message[:300]}" if isinstance(message, str) and message else ""


def _major_minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else f"{parts[0]}.0"


def select_interface(card: m.AgentCard, prefer_version: str | None = None,
                     bindings: list[str] | None = None) -> m.AgentInterface:
    """The first interface in the card's order that Parley's client speaks.

    `prefer_version` ("1.0" or "0.3") picks that version when the card offers it;
    `bindings` restricts and orders the bindings to use (default: the card's order).
    """
    from parley.client.transports import supported

    usable = [i for i in card.supported_interfaces if supported(i.protocol_binding, i.protocol_version)]
    if bindings:
        usable = [i for b in bindings for i in usable if i.protocol_binding == b]
        if not usable:
            offered = ", ".join(f"{i.protocol_binding} {i.protocol_version}" for i in card.supported_interfaces)
            raise ClientError(f"the agent offers no {' or '.join(bindings)} interface this client speaks "
                              f"(it offers: {offered})")
    if prefer_version:
        preferred = [i for i in usable if i.protocol_version == prefer_version]
        if not preferred:
            offered = ", ".join(f"{i.protocol_binding} {i.protocol_version}" for i in card.supported_interfaces)
            raise ClientError(f"the agent offers no usable interface for A2A {prefer_version} (it offers: {offered})")
        return preferred[0]
    if not usable:
        offered = ", ".join(f"{i.protocol_binding} {i.protocol_version}" for i in card.supported_interfaces)
        raise ClientError(f"the agent offers no interface this client speaks (it offers: {offered or 'none'})")
    return usable[0]


async def fetch_card(http: httpx.AsyncClient, url: str, trust: CardTrust | None = None) -> m.AgentCard:
    """GET and parse the card for `url` (asks for the 1.0 card); with `trust`, its signature must be by a
    trusted key (CardVerificationError otherwise)."""
    target = card_url_for(url)
    try:
        resp = await http.get(target, headers={"A2A-Version": "1.0"})
    except httpx.HTTPError as exc:
        raise ClientError(f"cannot reach {target}: {exc.__class__.__name__}: {exc}") from None
    if resp.status_code != 200:
        raise ClientError(f"GET {target} answered HTTP {resp.status_code}{_said(resp)}")
    try:
        data = resp.json()
    except ValueError:
        kind = resp.headers.get("content-type", "").split(";")[0].strip() or "no content type"
        raise ClientError(f"GET {target} did not return an agent card but {kind} "
                          f"({len(resp.content)} bytes, not JSON)") from None
    if trust is not None:
        if not isinstance(data, dict):
            raise ClientError(f"GET {target}: the agent card is not a JSON object")
        trust.check(data)
    try:
        return normalise_card(data)
    except ClientError as exc:
        raise ClientError(f"GET {target}: {exc}") from None
