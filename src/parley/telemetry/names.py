"""Names the request telemetry uses: the A2A 1.0 method of an operation, the task a request names, the last event."""

from __future__ import annotations

from typing import Any

from parley.protocol import models as m
from parley.protocol import v1_0
from parley.protocol.operations import Operation
from parley.protocol.states import is_settled

# The A2A 1.0 method names (span names, a2a.method), whatever the version and binding of the request.
METHOD_NAMES: dict[Operation, str] = {
    **v1_0.METHOD_OF,
    Operation.CARD: "GetAgentCard",  # 0.3 HTTP+JSON GET /v1/card
    Operation.TRACE: "GetTaskTrace",  # Parley's trace endpoint
    Operation.PUSH_LOG: "GetTaskPushLog",  # Parley's push delivery log
}


def method_name(op: Operation) -> str:
    """The A2A 1.0 method name of an operation (span names, a2a.method)."""
    return METHOD_NAMES.get(op, str(op.value))


def request_task_id(op: Operation, request: Any) -> str | None:
    """The task a request is about, when the request says (not for a new task)."""
    try:
        if op in (Operation.SEND, Operation.STREAM):
            return getattr(request.message, "task_id", None) or None
        if op in (Operation.GET, Operation.CANCEL, Operation.SUBSCRIBE):
            return getattr(request, "id", None) or None
        if op in (Operation.PUSH_SET, Operation.PUSH_GET, Operation.PUSH_LIST, Operation.PUSH_DELETE):
            return getattr(request, "task_id", None) or None
    except AttributeError:
        return None
    return None


def final_event(event: Any) -> bool:
    """Whether a stream event is the last one of its stream (a direct reply, or the task settled)."""
    if isinstance(event, m.Message):
        return True
    if isinstance(event, (m.TaskStatusUpdateEvent, m.Task)):
        return is_settled(event.status.state)
    return False
