"""The client transports by binding: which (binding, version) pairs the client speaks.

Each transport has `version`, `url`, `async call(op, request)` and
`stream(op, request, last_event_id)`. Bindings register a factory here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import httpx

from parley.client.jsonrpc import JsonRpcTransport


class Transport(Protocol):
    """What A2AClient needs from a binding."""

    version: str
    url: str

    async def call(self, op: Any, request: Any) -> Any: ...

    def stream(self, op: Any, request: Any, last_event_id: str | None = None) -> Any: ...


Factory = Callable[[httpx.AsyncClient, str, str], Transport]

FACTORIES: dict[str, Factory] = {"JSONRPC": JsonRpcTransport}
VERSIONS: dict[str, set[str]] = {"JSONRPC": {"1.0", "0.3"}}


def register(binding: str, factory: Factory, versions: set[str]) -> None:
    """Make a binding available to A2AClient."""
    FACTORIES[binding] = factory
    VERSIONS[binding] = set(versions)


def supported(binding: str, version: str) -> bool:
    """Whether the client speaks this binding in this protocol version."""
    return version in VERSIONS.get(binding, set())


CREDENTIAL_HEADERS = ("authorization", "x-api-key")  # what goes along as gRPC metadata too


def make(http: httpx.AsyncClient, binding: str, url: str, version: str, tenant: str | None = None) -> Transport:
    """Build the transport for a chosen interface (gRPC needs the interface's tenant, and gets the HTTP
    client's credential headers as metadata)."""
    if binding == "GRPC":
        metadata = [(name, http.headers[name]) for name in CREDENTIAL_HEADERS if name in http.headers]
        return FACTORIES[binding](http, url, version, tenant=tenant, metadata=metadata)  # type: ignore[call-arg]
    return FACTORIES[binding](http, url, version)
