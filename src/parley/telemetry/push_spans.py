"""A span per webhook delivery attempt, in the trace of the task that notified, and the trace context
(`traceparent`, `tracestate`) the webhook request carries.

    a2a push {agent}      CLIENT    one per delivery attempt of a notification (parley.push.dispatcher):
                                    opening its config, signing, the POST, until the webhook's answer;
                                    parent: the span of the task's latest turn (`a2a task {agent}`), when
                                    this process traced it; else the root of a trace of its own

Attributes: a2a.task_id, a2a.agent_id, parley.push.event_id, parley.push.config_id, parley.push.attempt,
http.request.method, server.address/server.port (never the URL's path or query: it may hold a secret),
http.response.status_code; a failed attempt has status ERROR and error.type (the HTTP status, `no answer`,
or `refused`: not sent, because its URL is refused or its secrets do not open; the description says why,
naming a field, never a secret).

The task's span context is remembered when its turn begins (:func:`remember_task`, from
parley.telemetry.tasks), for the last MAX_TASK_TRACES tasks: a notification delivered after a restart,
or by another replica, starts a trace of its own.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode

from parley.telemetry.propagation import outgoing_headers
from parley.telemetry.spans import (
    A2A_AGENT,
    A2A_TASK,
    ERROR_TYPE,
    HTTP_METHOD,
    HTTP_STATUS,
    SERVER_ADDRESS,
    SERVER_PORT,
)

MAX_TASK_TRACES = 4096
PUSH_EVENT = "parley.push.event_id"
PUSH_CONFIG = "parley.push.config_id"
PUSH_ATTEMPT = "parley.push.attempt"
_task_traces: OrderedDict[str, SpanContext] = OrderedDict()


def remember_task(task_id: str, span: Any) -> None:
    """The span of a task's turn: its notifications' delivery spans are its children."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return
    _task_traces[task_id] = ctx
    _task_traces.move_to_end(task_id)
    while len(_task_traces) > MAX_TASK_TRACES:
        _task_traces.popitem(last=False)


@dataclass(eq=False)
class PushTrace:
    """The span of one delivery attempt and the headers that carry its context to the webhook."""

    span: Any
    headers: dict[str, str] = field(default_factory=dict)

    def answered(self, status: int | None, error: str | None, *, sent: bool = True) -> None:
        """What the attempt came to: the webhook's HTTP status (None: no answer) and the error, if any;
        `sent` False: refused before the request was made (an unsafe URL, a secret that does not open)."""
        if status is not None:
            self.span.set_attribute(HTTP_STATUS, status)
        if error:
            self.span.set_attribute(ERROR_TYPE, str(status) if status is not None else
                                    "no answer" if sent else "refused")
            self.span.set_status(Status(StatusCode.ERROR, error))


@contextlib.contextmanager
def delivery(tel: Any, *, task_id: str, agent_id: str | None, config_id: str, event_id: str, attempt: int,
             url: str) -> Iterator[PushTrace]:
    """The CLIENT span of one delivery attempt, ended on exit (an exception is recorded on it)."""
    parent = _task_traces.get(task_id)
    context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent is not None else otel_context.Context()
    where = urlsplit(url)
    attributes: dict[str, Any] = {A2A_TASK: task_id, A2A_AGENT: agent_id or "", PUSH_CONFIG: config_id,
                                  PUSH_EVENT: event_id, PUSH_ATTEMPT: attempt, HTTP_METHOD: "POST",
                                  SERVER_ADDRESS: where.hostname or ""}
    if where.port is not None:
        attributes[SERVER_PORT] = where.port
    span = tel.tracer.start_span(f"a2a push {agent_id or 'unknown'}", context=context, kind=SpanKind.CLIENT,
                                 attributes=attributes)
    pushed = PushTrace(span, outgoing_headers(trace.set_span_in_context(span)))
    try:
        yield pushed
    except BaseException as exc:
        if not isinstance(exc, GeneratorExit):
            span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(exc) or type(exc).__name__))
        raise
    finally:
        span.end()


__all__ = ["MAX_TASK_TRACES", "PushTrace", "delivery", "remember_task"]
