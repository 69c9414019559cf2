"""The life of one A2A request on the server: the ASGI middleware and the gRPC call wrapper.

Both open a :class:`RequestScope` for the request; the bindings fill it in (see
:mod:`parley.telemetry.hooks`), the SERVER span starts once the binding says the request
is an A2A one, and when the answer is complete the span ends and the request is
counted. For HTTP that happens just *before* the last bytes of the answer are sent, so
a client that has read the whole answer finds the span exported and the metrics recorded.

Imports no OpenTelemetry: with structured logs but without telemetry the scope still
carries the log fields.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from parley.telemetry import setup
from parley.telemetry.context import LOG_FIELDS, REQUEST, RequestScope, bind, reset
from parley.telemetry.names import final_event, method_name, request_task_id

__all__ = ["RequestMiddleware", "begin", "final_event", "finish", "grpc_call", "local_call", "method_name",
           "request_task_id"]

def finish(scope: RequestScope, exc: BaseException | None = None) -> None:
    """End the request's span and count it (once)."""
    if scope.done:
        return
    scope.done = True
    tel = scope.telemetry
    if tel is None or scope.binding is None:
        return
    from parley.telemetry import spans

    spans.end_server_span(scope, exc)
    attrs = spans.server_attributes(scope)
    tel.metrics.requests.add(1, attrs)
    tel.metrics.request_duration.record(max(0, time.time_ns() - scope.start_ns) / 1e9, attrs)


def begin(scope: RequestScope, binding: str, agent_id: str | None) -> None:
    """The request is an A2A one for `agent_id`: start its span (telemetry on) and log fields."""
    scope.binding = binding
    scope.agent_id = agent_id or scope.agent_id
    bind(agent_id=scope.agent_id)
    tel = setup.current()
    if tel is not None and scope.span is None:
        from parley.telemetry import spans

        spans.start_server_span(tel, scope)


class RequestMiddleware:
    """ASGI middleware: a RequestScope per HTTP request; ends the span before the answer's last bytes."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        req = RequestScope(start_ns=time.time_ns(), http_method=scope.get("method"), path=scope.get("path"))
        if setup.current() is not None:
            from parley.telemetry.propagation import headers_of

            req.headers = headers_of(scope.get("headers") or ())
        token_req = REQUEST.set(req)
        token_fields = LOG_FIELDS.set(LOG_FIELDS.get())

        async def send_and_finish(message: dict) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                req.status = message["status"]
            elif kind == "http.response.body" and not message.get("more_body", False):
                finish(req)
            await send(message)

        try:
            await self.app(scope, receive, send_and_finish)
        except BaseException as exc:
            if req.status is None:
                req.status = 500
            finish(req, exc)
            raise
        finally:
            finish(req)
            reset(req.otel_token)
            reset(token_fields)
            reset(token_req)


@contextlib.contextmanager
def _scope(req: RequestScope) -> Iterator[RequestScope]:
    """Make `req` the current request (and its log fields) for the block; finish it at the end."""
    token_req = REQUEST.set(req)
    token_fields = LOG_FIELDS.set(LOG_FIELDS.get())
    bind(a2a_method=req.method, task_id=req.task_id)
    try:
        yield req
    finally:
        finish(req)
        reset(req.otel_token)
        reset(token_fields)
        reset(token_req)


def _cancelled(exc: BaseException) -> bool:
    return isinstance(exc, GeneratorExit) or type(exc).__name__ == "CancelledError"


@contextlib.contextmanager
def grpc_call(servicer: Any, method: str, request: Any, context: Any, task_id: str | None) -> Iterator[None]:
    """A RequestScope and SERVER span around one gRPC call (the `tenant` names the agent)."""
    req = RequestScope(start_ns=time.time_ns(), method=method, version="1.0", task_id=task_id)
    if setup.current() is not None:
        from parley.telemetry.propagation import headers_of

        req.headers = headers_of(context.invocation_metadata() or ())
    with _scope(req):
        try:
            begin(req, "GRPC", servicer.runtime.agent_id(getattr(request, "tenant", "") or ""))
            yield
            if req.grpc_status is None:
                req.grpc_status = "OK"
        except BaseException as exc:
            if req.grpc_status is None:  # not an A2A error answered with abort(): the call failed or was canceled
                req.grpc_status = "CANCELLED" if _cancelled(exc) else "UNKNOWN"
                finish(req, None if _cancelled(exc) else exc)
            raise


@contextlib.contextmanager
def local_call(method: str, task_id: str | None) -> Iterator[None]:
    """A RequestScope for an in-process call (a delegation to an agent of this server), in the task serving it.

    It carries the caller's current span context as if it had come in a `traceparent` header, so the
    call's SERVER span (begun by the request pipeline) is a child of the caller's CLIENT span.
    """
    req = RequestScope(start_ns=time.time_ns(), method=method, version="1.0", task_id=task_id)
    if setup.current() is not None:
        from parley.telemetry.propagation import outgoing_headers

        req.headers = outgoing_headers()
    with _scope(req):
        try:
            yield
        except BaseException as exc:
            finish(req, None if _cancelled(exc) else exc)
            raise
