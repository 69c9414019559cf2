"""Agent cards: built from an agent's declaration, served per protocol version.

A request that asks for A2A 1.x (header `A2A-Version: 1.0`, or the
`A2A-Version` query parameter) gets a card that is pure 1.0. A request without
a version is, by the 1.0 rules, a 0.3 client: it gets the same card plus the
0.3 connection fields (`url`, `preferredTransport`, `protocolVersion`,
`additionalInterfaces`, `supportsAuthenticatedExtendedCard`), which 1.0
parsers ignore and 0.3 clients need.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec

from parley.agents.base import Agent
from parley.protocol import models as m
from parley.protocol.codec import dumps, to_wire
from parley.protocol.v0_3_cards import security_to_v03
from parley.push.signing import SigningKey
from parley.server.card_signing import signature
from parley.settings import CardOptions, Settings

if TYPE_CHECKING:
    from parley.security.schemes import CardSecurity

JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
GRPC = "GRPC"


def interfaces(url: str, *, grpc_address: str | None = None, tenant: str | None = None) -> list[m.AgentInterface]:
    """Every (binding, version) served for an agent, most preferred first.

    gRPC has one address for all agents; the interface's `tenant` names the agent.
    """
    found = [
        m.AgentInterface(url=url, protocol_binding=JSONRPC, protocol_version="1.0"),
        m.AgentInterface(url=url, protocol_binding=JSONRPC, protocol_version="0.3"),
        m.AgentInterface(url=url, protocol_binding=HTTP_JSON, protocol_version="1.0"),
        m.AgentInterface(url=url, protocol_binding=HTTP_JSON, protocol_version="0.3"),
    ]
    if grpc_address is not None:
        found.append(m.AgentInterface(url=grpc_address, protocol_binding=GRPC, protocol_version="1.0", tenant=tenant))
    return found


def build_card(agent: Agent, url: str, options: CardOptions, *, grpc_address: str | None = None,
               tenant: str | None = None, security: CardSecurity | None = None,
               skills: list[m.AgentSkill] | None = None) -> m.AgentCard:
    """The 1.0 card of `agent`, served at `url` (and at `grpc_address` over gRPC).

    `security` (a secured server) declares the enforced schemes and offers the authenticated
    extended card; `skills` replaces the agent's skills (the extended card of one caller).
    """
    return m.AgentCard(
        name=agent.name,
        description=agent.description,
        supported_interfaces=interfaces(url, grpc_address=grpc_address, tenant=tenant),
        version=agent.version,
        capabilities=m.AgentCapabilities(
            streaming=options.streaming,
            push_notifications=bool(options.push_notifications),
            extended_agent_card=options.extended_card or security is not None,
            extensions=list(agent.extensions) or None,
        ),
        default_input_modes=list(agent.input_modes),
        default_output_modes=list(agent.output_modes),
        skills=list(agent.skills if skills is None else skills),
        provider=options.provider or m.AgentProvider(organization="Parley", url=url),
        documentation_url=options.documentation_url,
        security_schemes=security.schemes_json() if security is not None else None,
        security_requirements=security.requirements_json() if security is not None else None,
    )


def card_v1(card: m.AgentCard) -> dict[str, Any]:
    """The card as A2A 1.0 JSON."""
    return to_wire(card)


def card_v1_1(card: m.AgentCard) -> dict[str, Any]:
    """The card as a client asking for A2A 1.1 gets it: the 1.0 card, its JSON-RPC and HTTP+JSON interfaces
    listed again with `protocolVersion` 1.1 (the dev-1.1 draft: generation), after the others. A 1.0 client
    (no or another A2A-Version) gets the 1.0 card unchanged."""
    data = card_v1(card)
    data["supportedInterfaces"] = [*data["supportedInterfaces"], *(
        {**i, "protocolVersion": "1.1"} for i in data["supportedInterfaces"]
        if i.get("protocolVersion") == "1.0" and i.get("protocolBinding") in (JSONRPC, HTTP_JSON))]
    return data


def card_v03(card: m.AgentCard) -> dict[str, Any]:
    """The card with the 0.3 connection fields added (for clients without a version), its security in 0.3 form."""
    data = security_to_v03(to_wire(card))
    legacy = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.")]
    primary = legacy[0] if legacy else card.supported_interfaces[0]
    data["url"] = primary.url
    data["preferredTransport"] = primary.protocol_binding
    data["protocolVersion"] = "0.3.0"
    data["additionalInterfaces"] = [{"url": i.url, "transport": i.protocol_binding} for i in legacy]
    data["supportsAuthenticatedExtendedCard"] = bool(card.capabilities.extended_agent_card)
    return data


@dataclass(frozen=True, slots=True)
class CardDocument:
    """A serialised card with its caching validators."""

    body: bytes
    etag: str
    last_modified: str


def document(card_json: dict[str, Any], modified_at: float) -> CardDocument:
    """Serialise a card and compute its strong ETag (a hash of the bytes)."""
    body = dumps(card_json)
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    return CardDocument(body=body, etag=etag, last_modified=formatdate(modified_at, usegmt=True))


class Cards:
    """The cards of a server's agents, built from their declarations and cached per URL and version.

    The cache is bounded (`cache_size` documents, least recently used dropped first): a
    client cannot grow it without limit by sending many different `Host` headers.
    """

    def __init__(self, agents: Mapping[str, Agent], settings: Settings, *, cache_size: int = 256) -> None:
        self.agents = agents
        self.settings = settings
        self.cache_size = cache_size
        self.modified_at = time.time()
        self._documents: OrderedDict[tuple[Any, ...], CardDocument] = OrderedDict()

    def forget(self, agent_id: str) -> None:
        """Drop the cached documents of an agent whose details changed (a remote agent's card arrived)."""
        for key in [k for k in self._documents if k[0] == agent_id]:
            del self._documents[key]
        self.modified_at = time.time()

    def grpc_address(self, agent_url: str) -> str | None:
        """host:port of the gRPC binding as the clients of `agent_url` reach it, if gRPC is served."""
        port = self.settings.grpc_port
        if port is None:
            return None
        host = urlsplit(agent_url).hostname or self.settings.grpc_bind_host
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def card(self, agent_id: str, agent_url: str, security: CardSecurity | None = None,
             skills: list[m.AgentSkill] | None = None) -> m.AgentCard:
        """The canonical card of an agent served at `agent_url` (see :func:`build_card`)."""
        options = msgspec.structs.replace(self.settings.card, push_notifications=self.settings.push_enabled)
        return build_card(self.agents[agent_id], agent_url, options,
                          grpc_address=self.grpc_address(agent_url), tenant=agent_id, security=security,
                          skills=skills)

    def document(self, agent_id: str, agent_url: str, *, v1: bool,
                 security: CardSecurity | None = None, signing_key: SigningKey | None = None,
                 jku: str = "", v1_1: bool = False) -> CardDocument:
        """The serialised card: pure 1.0 (`v1`; with the 1.1 interfaces too if `v1_1`), or with the 0.3
        connection fields; signed with `signing_key` (its JWKS at `jku`) over the 1.0 form (the 1.1 form for a
        1.1 client) in every case, which is what an SDK rebuilds from either."""
        kid = signing_key.kid if signing_key is not None else None
        key = (agent_id, agent_url, v1, v1_1, security.requirements if security is not None else None, kid, jku)
        doc = self._documents.get(key)
        if doc is not None:
            self._documents.move_to_end(key)
            return doc
        card = self.card(agent_id, agent_url, security)
        data = (card_v1_1(card) if v1_1 else card_v1(card)) if v1 else card_v03(card)
        modified = self.modified_at
        if signing_key is not None:
            signed = card_v1_1(card) if v1 and v1_1 else card_v1(card)
            data["signatures"] = [signature(signed, signing_key, jku)]
            modified = max(modified, signing_key.retired_at or signing_key.created_at)
        doc = document(data, modified)
        self._documents[key] = doc
        while len(self._documents) > self.cache_size:
            self._documents.popitem(last=False)
        return doc


__all__ = ["CardOptions", "Cards", "build_card", "card_v03", "card_v1", "card_v1_1", "document", "interfaces"]
