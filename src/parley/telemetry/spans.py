"""Request spans (SERVER, one per A2A request) and call spans (CLIENT, one per outgoing A2A call).

    a2a SendMessage        SERVER  one per A2A request, HTTP JSON-RPC, HTTP+JSON or gRPC; the parent is
                                   the caller's span when the request carries `traceparent`
    a2a SendStreamingMessage CLIENT one per call made by parley.client (delegations included); its
                                   context goes out as `traceparent` so the callee's span is its child

Span names use the A2A 1.0 method names whatever the protocol version or binding.
Task, model and tool spans are in :mod:`parley.telemetry.tasks`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from parley.protocol.operations import Operation
from parley.telemetry import propagation
from parley.telemetry.context import RequestScope, reset
from parley.telemetry.names import final_event, method_name, request_task_id

# --- attribute names ---------------------------------------------------------------------------

RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
A2A_METHOD = "a2a.method"
A2A_BINDING = "a2a.binding"
A2A_VERSION = "a2a.protocol_version"
A2A_AGENT = "a2a.agent_id"
A2A_TASK = "a2a.task_id"
A2A_CONTEXT = "a2a.context_id"
A2A_STATE = "a2a.task.state"
HTTP_METHOD = "http.request.method"
HTTP_STATUS = "http.response.status_code"
URL_PATH = "url.path"
URL_FULL = "url.full"
GRPC_STATUS = "rpc.grpc.status_code"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

SERVICE = "lf.a2a.v1.A2AService"

GRPC_CODES = {  # grpc.StatusCode names -> numbers (rpc.grpc.status_code), without importing grpc
    "OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9,
    "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
    "DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}


def span_name(method: str | None) -> str:
    return f"a2a {method}" if method else "a2a"


# --- server spans --------------------------------------------------------------------------


def start_server_span(tel: Any, scope: RequestScope) -> None:
    """Start the request's SERVER span (child of the caller's `traceparent`) and make it current.

    The span starts when the request arrived (`scope.start_ns`); the binding calls this once
    it knows the request is an A2A one, so cards, health checks and the dashboard get none.
    """
    if scope.span is not None:
        return
    parent = propagation.extract(scope.headers)
    attributes: dict[str, Any] = {RPC_SYSTEM: "a2a", RPC_SERVICE: SERVICE}
    if scope.binding:
        attributes[A2A_BINDING] = scope.binding
    if scope.agent_id:
        attributes[A2A_AGENT] = scope.agent_id
    if scope.http_method:
        attributes[HTTP_METHOD] = scope.http_method
    if scope.path:
        attributes[URL_PATH] = scope.path
    span = tel.tracer.start_span(span_name(scope.method), context=parent, kind=SpanKind.SERVER,
                                 start_time=scope.start_ns, attributes=attributes)
    scope.telemetry = tel
    scope.span = span
    scope.otel_token = otel_context.attach(trace.set_span_in_context(span, parent))
    annotate(scope)


def annotate(scope: RequestScope) -> None:
    """Copy what is known about the request onto its span."""
    span = scope.span
    if span is None or not span.is_recording():
        return
    if scope.method:
        span.update_name(span_name(scope.method))
        span.set_attribute(A2A_METHOD, scope.method)
        span.set_attribute(RPC_METHOD, scope.method)
    if scope.version:
        span.set_attribute(A2A_VERSION, scope.version)
    if scope.agent_id:
        span.set_attribute(A2A_AGENT, scope.agent_id)
    if scope.task_id:
        span.set_attribute(A2A_TASK, scope.task_id)
    if scope.error:
        span.set_attribute(ERROR_TYPE, scope.error)


def end_server_span(scope: RequestScope, exc: BaseException | None = None) -> None:
    """Status, error and end of the request's span (before the last bytes of the answer leave)."""
    span = scope.span
    if span is None:
        return
    annotate(scope)
    if scope.status is not None:
        span.set_attribute(HTTP_STATUS, scope.status)
    if scope.grpc_status is not None:
        span.set_attribute(GRPC_STATUS, GRPC_CODES.get(scope.grpc_status, 2))
    if exc is not None:
        span.record_exception(exc)
        span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    elif (scope.status or 0) >= 500 or scope.grpc_status in ("INTERNAL", "UNKNOWN", "DATA_LOSS", "UNAVAILABLE"):
        span.set_status(Status(StatusCode.ERROR, scope.error or ""))
    span.end()


def server_attributes(scope: RequestScope) -> dict[str, Any]:
    """The metric attributes of a finished request: method, binding, agent, status, error type."""
    attrs: dict[str, Any] = {A2A_METHOD: scope.method or "unknown", A2A_BINDING: scope.binding or "unknown"}
    if scope.agent_id:
        attrs[A2A_AGENT] = scope.agent_id
    if scope.status is not None:
        attrs[HTTP_STATUS] = scope.status
    if scope.grpc_status is not None:
        attrs[GRPC_STATUS] = GRPC_CODES.get(scope.grpc_status, 2)
    if scope.error:
        attrs[ERROR_TYPE] = scope.error
    return attrs


# --- client spans ------------------------------------------------------------------------------


def _client_span(tel: Any, transport: Any, op: Operation, request: Any) -> Any:
    method = method_name(op)
    binding = getattr(transport, "binding", "JSONRPC")
    url = str(getattr(transport, "url", "") or "")
    attributes: dict[str, Any] = {
        RPC_SYSTEM: "a2a", RPC_SERVICE: SERVICE, RPC_METHOD: method, A2A_METHOD: method, A2A_BINDING: binding,
        A2A_VERSION: str(getattr(transport, "version", "") or ""),
    }
    if url:
        if "://" in url:
            parts = urlsplit(url)
            attributes[URL_FULL] = url
            if parts.hostname:
                attributes[SERVER_ADDRESS] = parts.hostname
            if parts.port:
                attributes[SERVER_PORT] = parts.port
        else:  # gRPC host:port
            host, _, port = url.rpartition(":")
            attributes[SERVER_ADDRESS] = host or url
            if port.isdigit():
                attributes[SERVER_PORT] = int(port)
    tenant = getattr(transport, "tenant", None)
    if tenant:
        attributes[A2A_AGENT] = tenant
    task_id = request_task_id(op, request)
    if task_id:
        attributes[A2A_TASK] = task_id
    return tel.tracer.start_span(span_name(method), kind=SpanKind.CLIENT, attributes=attributes)


def _failed(span: Any, exc: BaseException) -> None:
    if isinstance(exc, GeneratorExit):
        return
    reason = getattr(exc, "reason", None)
    span.set_attribute(ERROR_TYPE, reason if isinstance(reason, str) and reason else type(exc).__qualname__)
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc) or type(exc).__name__))


async def client_call(tel: Any, fn: Callable[..., Awaitable[Any]], transport: Any, op: Operation,
                      request: Any) -> Any:
    """One unary A2A call inside a CLIENT span that is current while the request is made."""
    span = _client_span(tel, transport, op, request)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        return await fn(transport, op, request)
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        reset(token)
        span.end()


async def client_stream(tel: Any, fn: Callable[..., AsyncIterator[Any]], transport: Any, op: Operation,
                        request: Any, last_event_id: str | None) -> AsyncIterator[Any]:
    """A streaming A2A call inside a CLIENT span; the span is current only while the request is sent
    (the first step of the stream), so no context leaks into the consumer between events."""
    span = _client_span(tel, transport, op, request)
    stream = fn(transport, op, request, last_event_id)
    ended = False
    try:
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            item = await stream.__anext__()
        except StopAsyncIteration:
            return
        finally:
            reset(token)
        while True:
            if not ended and final_event(getattr(item, "event", None)):
                # The task settled: the call is over, whether or not the consumer closes the stream.
                ended = True
                span.end()
            yield item
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                return
    except BaseException as exc:
        if not ended:
            _failed(span, exc)
        raise
    finally:
        try:
            await stream.aclose()
        finally:
            if not ended:
                span.end()
