"""W3C trace context in and out: read `traceparent`/`tracestate` from requests, add them to calls.

The global OpenTelemetry text-map propagator is used (OTEL_PROPAGATORS; by default W3C
tracecontext and baggage), so incoming HTTP headers and gRPC metadata are read the same
way, and every outgoing A2A call made by :mod:`parley.client` (JSON-RPC, HTTP+JSON and
gRPC transports) carries the current span's context. Use :func:`outgoing_headers` for
other outgoing HTTP calls that belong to a task (webhooks, push notifications).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import propagate
from opentelemetry.context import Context


def headers_of(raw: Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """Lower-case name -> value for ASGI headers (bytes pairs) or gRPC metadata (str keys, str/bytes values)."""
    out: dict[str, str] = {}
    for key, value in raw or ():
        name = key.decode("latin-1") if isinstance(key, bytes) else str(key)
        if isinstance(value, bytes):
            if name.endswith("-bin"):
                continue  # binary gRPC metadata carries no trace context
            value = value.decode("latin-1")
        name = name.lower()
        out[name] = f"{out[name]},{value}" if name in out else value
    return out


def extract(headers: Mapping[str, str]) -> Context:
    """The remote parent context carried by request headers (an empty context if none)."""
    return propagate.extract(headers)


def outgoing_headers(context: Context | None = None) -> dict[str, str]:
    """`traceparent` (and `tracestate`, baggage) for the current or the given context."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return carrier
