"""OpenTelemetry traces and metrics, and structured logs, for Parley servers and clients (`parley-a2a[otel]`).

    from parley.telemetry import configure_telemetry, configure_logging
    configure_telemetry("my-agents")       # before building the ASGI app
    configure_logging("json")

or `parley serve --otel --log-format json`. See docs/observability.md for the spans,
metrics and log fields. The package is laid out one idea per file:

    setup.py        configure_telemetry / shutdown_telemetry, the OTEL_* environment, exporters
    context.py      the request scope and log fields (context variables)
    hooks.py        the calls the server and client make (no-ops while telemetry is off)
    requests.py     the ASGI middleware and the gRPC wrapper: one scope and SERVER span per request
    spans.py        request (SERVER) and outgoing call (CLIENT) spans, attribute names
    tasks.py        task, model-call and tool-call spans from the engine's listeners and observers
    metrics.py      the instruments
    propagation.py  W3C trace context in (headers, gRPC metadata) and out
    logs.py         JSON formatter, context filter, logging config for uvicorn

Importing this package does not import OpenTelemetry.
"""

from __future__ import annotations

from typing import Any

from parley.telemetry.hooks import trace_headers
from parley.telemetry.setup import (
    Telemetry,
    TelemetryUnavailable,
    configure_telemetry,
    current,
    disable_telemetry,
    enable_log_context,
    env_wants_telemetry,
    otel_available,
    shutdown_telemetry,
    telemetry_enabled,
)

_LOGS = {"configure_logging", "logging_config", "JsonFormatter", "ContextFilter"}


def __getattr__(name: str) -> Any:
    if name in _LOGS:
        from parley.telemetry import logs

        return getattr(logs, name)
    raise AttributeError(f"module 'parley.telemetry' has no attribute {name!r}")


__all__ = [
    "ContextFilter",
    "JsonFormatter",
    "Telemetry",
    "TelemetryUnavailable",
    "configure_logging",
    "configure_telemetry",
    "current",
    "disable_telemetry",
    "enable_log_context",
    "env_wants_telemetry",
    "logging_config",
    "otel_available",
    "shutdown_telemetry",
    "telemetry_enabled",
    "trace_headers",
]
