"""The calls Parley's server and client make into telemetry; each is a cheap no-op while it is off.

Server (parley.server): `instrument(starlette, server)` in create_app, `server_stopped(server)`
at the end of the lifespan, and in each binding `a2a_request` (an A2A request for an agent),
`a2a_method` (the parsed method), `a2a_result` (a unary result), `a2a_error` (an A2A error
answered), `stream_events` (around the entries a stream sends) and, for gRPC, the
`traced_grpc_unary` / `traced_grpc_stream` decorators.
Client (parley.client transports and the in-process transport of parley.server.local): `@traced_call`,
`@traced_stream` and `trace_headers()`; `local_call` is the server side of an in-process call.

Off means: `configure_telemetry()` was not called (or `disable_telemetry()` was) and
structured logs are off. Then no middleware, listener or observer is installed, the
request hooks find no request scope and return, and the client decorators call straight
through. Nothing here imports OpenTelemetry until telemetry is on.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from parley.telemetry import setup
from parley.telemetry.context import EMPTY, LOG_FIELDS, REQUEST, bind

_NULL = contextlib.nullcontext()
_instrumented: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def enabled() -> bool:
    """Whether anything (spans and metrics, or structured log fields) is being recorded."""
    return setup._active is not None or setup._log_context


# --- the server ------------------------------------------------------------------------------


def push_attempt(outcome: str, agent_id: str | None, latency: float | None = None) -> None:
    """A webhook delivery was tried (parley.push.dispatcher): count it; `latency` when it was delivered."""
    active = setup._active
    if active is None:
        return
    attrs = {"outcome": outcome, "a2a.agent.id": agent_id or ""}
    active.metrics.push_attempts.add(1, attrs)
    if latency is not None:
        active.metrics.push_latency.record(latency, {"a2a.agent.id": agent_id or ""})


def push_delivery(*, task_id: str, agent_id: str | None, config_id: str, event_id: str, attempt: int,
                  url: str) -> contextlib.AbstractContextManager[Any]:
    """Around one webhook POST (parley.push.dispatcher): a CLIENT span in the task's trace, yielding a
    :class:`parley.telemetry.push_spans.PushTrace` (its `headers` go on the request); None when off."""
    tel = setup._active
    if tel is None:
        return _NULL
    from parley.telemetry.push_spans import delivery

    return delivery(tel, task_id=task_id, agent_id=agent_id, config_id=config_id, event_id=event_id,
                    attempt=attempt, url=url)


def instrument(starlette: Any, server: Any) -> None:
    """Add the request middleware and the engine's listener and observer (when telemetry is on)."""
    if not enabled():
        return
    from parley.telemetry.requests import RequestMiddleware
    from parley.telemetry.tasks import TaskTelemetry

    starlette.add_middleware(RequestMiddleware)
    if server.engine not in _instrumented:
        _instrumented[server.engine] = TaskTelemetry(server.engine, setup._active)


def server_stopped(server: Any) -> None:
    """The server stopped: end the spans of tasks still open and stop counting its runs."""
    tasks = _instrumented.pop(server.engine, None)
    if tasks is not None:
        tasks.close()


def a2a_request(binding: str, agent_id: str | None, op: Any = None, version: str | None = None) -> None:
    """The HTTP request being served is an A2A request (JSONRPC or HTTP+JSON) for `agent_id`
    (and, when already known, for operation `op` in protocol `version`)."""
    scope = REQUEST.get()
    if scope is None:
        return
    from parley.telemetry.requests import begin, method_name

    if op is not None:
        scope.method, scope.version = method_name(op), version
        bind(a2a_method=scope.method)
    begin(scope, binding, agent_id)


def a2a_method(op: Any, version: str | None, request: Any = None) -> None:
    """The A2A method (an Operation) and protocol version are known; `request` may name the task."""
    scope = REQUEST.get()
    if scope is None:
        return
    from parley.telemetry.requests import method_name, request_task_id

    scope.method = method_name(op)
    scope.version = version
    scope.task_id = request_task_id(op, request) or scope.task_id
    bind(a2a_method=scope.method, task_id=scope.task_id)
    if scope.span is not None:
        from parley.telemetry.spans import annotate

        annotate(scope)


def a2a_result(result: Any) -> None:
    """A unary call returned `result` (a Task names the task)."""
    scope = REQUEST.get()
    if scope is None:
        return
    task_id = _task_id_of(result)
    if not task_id:
        return
    if LOG_FIELDS.get().get("task_id") != task_id:
        bind(task_id=task_id)
    if scope.task_id != task_id:
        scope.task_id = task_id
        if scope.span is not None:
            from parley.telemetry.spans import annotate

            annotate(scope)


def a2a_error(error: Any) -> None:
    """An A2A error is being answered (JSON-RPC error, HTTP+JSON status, gRPC abort)."""
    scope = REQUEST.get()
    if scope is None:
        return
    scope.error = getattr(error, "reason", None) or type(error).__name__
    if scope.binding == "GRPC":  # abort() ends the call and sends the status at once: finish before it does
        scope.grpc_status = getattr(error, "grpc_status", None) or "UNKNOWN"
        from parley.telemetry.requests import finish

        finish(scope)


def stream_events(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """Wrap the entries a stream sends (SSE or gRPC): an SSE subscriber while it is open, and the
    request's span ends as the final entry (the task settled) goes out."""
    scope = REQUEST.get()
    if scope is None:
        return events
    return _streamed(scope, events)


async def _streamed(scope: Any, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    from parley.telemetry.requests import final_event, finish

    tel = scope.telemetry
    counted = tel is not None and scope.binding != "GRPC"
    attrs = {"a2a.binding": scope.binding or "unknown", "a2a.agent_id": scope.agent_id or "unknown"}
    if counted:
        tel.metrics.sse_subscribers.add(1, attrs)
    try:
        async for entry in events:
            if entry is not None and final_event(getattr(entry, "event", None)):
                # The last event: the stream is over for the client once it reads it, so count it
                # over now (and end the span), not when the server has finished writing.
                if counted:
                    counted = False
                    tel.metrics.sse_subscribers.add(-1, attrs)
                if scope.binding == "GRPC" and scope.grpc_status is None:
                    scope.grpc_status = "OK"
                finish(scope)
            yield entry
    finally:
        if counted:
            tel.metrics.sse_subscribers.add(-1, attrs)
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()


def grpc_call(servicer: Any, op: Any, request: Any, context: Any) -> contextlib.AbstractContextManager[Any]:
    """A request scope and SERVER span around one gRPC call (a shared null context when off)."""
    if not enabled():
        return _NULL
    from parley.telemetry.requests import grpc_call as call
    from parley.telemetry.requests import method_name, request_task_id

    return call(servicer, method_name(op), request, context, request_task_id(op, request))


def local_call(op: Any, request: Any) -> contextlib.AbstractContextManager[Any]:
    """A request scope for an in-process call, entered in the task that serves it (a shared null context
    when off: then no request scope exists anywhere to be confused with)."""
    if not enabled():
        return _NULL
    from parley.telemetry.requests import local_call as call
    from parley.telemetry.requests import method_name, request_task_id

    return call(method_name(op), request_task_id(op, request))


def traced_grpc_unary(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate the gRPC servicer's `_unary(op, request, context)` with :func:`grpc_call`."""

    @functools.wraps(fn)
    def unary(self: Any, op: Any, request: Any, context: Any) -> Any:
        if not enabled():
            return fn(self, op, request, context)
        return _grpc_unary(fn, self, op, request, context)

    return unary


async def _grpc_unary(fn: Callable[..., Any], servicer: Any, op: Any, request: Any, context: Any) -> Any:
    with grpc_call(servicer, op, request, context):
        return await fn(servicer, op, request, context)  # a new task's id comes from the engine listener


def traced_grpc_stream(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate the gRPC servicer's `_stream(op, request, context)` with :func:`grpc_call`."""

    @functools.wraps(fn)
    def stream(self: Any, op: Any, request: Any, context: Any) -> Any:
        if not enabled():
            return fn(self, op, request, context)
        return _grpc_stream(fn, self, op, request, context)

    return stream


async def _grpc_stream(fn: Callable[..., Any], servicer: Any, op: Any, request: Any,
                       context: Any) -> AsyncIterator[Any]:
    with grpc_call(servicer, op, request, context):
        responses = fn(servicer, op, request, context)
        try:
            async for response in responses:
                yield response
        finally:
            await responses.aclose()


def _task_id_of(result: Any) -> str | None:
    from parley.protocol import models as m

    if isinstance(result, m.Task):
        return result.id
    if isinstance(result, (m.Message, m.TaskPushNotificationConfig)):
        return result.task_id or None
    return None


# --- the client ------------------------------------------------------------------------------


def traced_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a transport's `call(op, request)`: a CLIENT span per call when telemetry is on."""

    @functools.wraps(fn)
    def call(self: Any, op: Any, request: Any) -> Any:
        tel = setup._active
        if tel is None:
            return fn(self, op, request)
        from parley.telemetry.spans import client_call

        return client_call(tel, fn, self, op, request)

    return call


def traced_stream(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a transport's `stream(op, request, last_event_id)`: a CLIENT span per stream."""

    @functools.wraps(fn)
    def stream(self: Any, op: Any, request: Any, last_event_id: str | None = None) -> Any:
        tel = setup._active
        if tel is None:
            return fn(self, op, request, last_event_id)
        from parley.telemetry.spans import client_stream

        return client_stream(tel, fn, self, op, request, last_event_id)

    return stream


def trace_headers() -> Mapping[str, str]:
    """`traceparent`/`tracestate` of the current span for an outgoing call (empty when off)."""
    if setup._active is None:
        return EMPTY
    from parley.telemetry.propagation import outgoing_headers

    return outgoing_headers()
