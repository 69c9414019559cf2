"""What the telemetry hooks know about the current request and task: context variables only.

`REQUEST` holds the :class:`RequestScope` of the A2A request being served (set by the
ASGI middleware or the gRPC call wrapper, filled in by the bindings as they parse the
request). `LOG_FIELDS` holds the fields every log record gets (task id, agent, method);
runs of the task engine are asyncio tasks created while a request is handled, so they
start with a copy of both and add their own task id.

No OpenTelemetry import here: this module is what a server without OpenTelemetry uses.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(eq=False, slots=True)
class RequestScope:
    """One A2A request in flight (HTTP or gRPC) and what is known about it so far."""

    start_ns: int
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names: traceparent, tracestate, ...
    http_method: str | None = None
    path: str | None = None
    binding: str | None = None  # JSONRPC, HTTP+JSON, GRPC; None: not an A2A request (card, dashboard, ...)
    method: str | None = None  # the A2A 1.0 method name, e.g. SendMessage
    version: str | None = None  # the A2A protocol version of the request
    agent_id: str | None = None
    task_id: str | None = None
    error: str | None = None  # the reason of the A2A error answered (error.type)
    status: int | None = None  # HTTP status
    grpc_status: str | None = None  # gRPC status code name
    telemetry: Any = None  # the Telemetry that started `span`
    span: Any = None  # the SERVER span, once started
    otel_token: Any = None  # restores the OpenTelemetry context when the request ends
    done: bool = False


REQUEST: contextvars.ContextVar[RequestScope | None] = contextvars.ContextVar("parley_request", default=None)
LOG_FIELDS: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("parley_log_fields", default=EMPTY)


def bind(**fields: Any) -> None:
    """Add fields (those not None) to the log fields of the current context."""
    fields = {k: v for k, v in fields.items() if v is not None}
    if fields:
        LOG_FIELDS.set(MappingProxyType({**LOG_FIELDS.get(), **fields}))


def reset(token: contextvars.Token | None) -> None:
    """Undo a ContextVar.set (OpenTelemetry's attach too); a token of another context is ignored."""
    if token is None:
        return
    try:
        token.var.reset(token)
    except (ValueError, RuntimeError):  # set in another context (or reset already): nothing to undo here
        pass
