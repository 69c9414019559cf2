"""The A2A 1.0 dialect: method names and wire shapes (the canonical model).

Requests are read as ProtoJSON parsers read them: proto field names as well as JSON names
(:mod:`parley.protocol.names`); everything written uses the lowerCamel JSON names.
"""

from __future__ import annotations

from typing import Any

from parley.protocol import models as m
from parley.protocol.codec import from_wire, to_wire
from parley.protocol.operations import Operation

VERSION = "1.0"

METHODS: dict[str, Operation] = {
    "SendMessage": Operation.SEND,
    "SendStreamingMessage": Operation.STREAM,
    "GetTask": Operation.GET,
    "ListTasks": Operation.LIST,
    "CancelTask": Operation.CANCEL,
    "SubscribeToTask": Operation.SUBSCRIBE,
    "CreateTaskPushNotificationConfig": Operation.PUSH_SET,
    "GetTaskPushNotificationConfig": Operation.PUSH_GET,
    "ListTaskPushNotificationConfigs": Operation.PUSH_LIST,
    "DeleteTaskPushNotificationConfig": Operation.PUSH_DELETE,
    "GetExtendedAgentCard": Operation.EXTENDED_CARD,
}
# The 1.0 method of each operation (also the gRPC RPC names of lf.a2a.v1.A2AService).
METHOD_OF: dict[Operation, str] = {op: name for name, op in METHODS.items()}

REQUEST_TYPES: dict[Operation, type] = {
    Operation.SEND: m.SendMessageRequest,
    Operation.STREAM: m.SendMessageRequest,
    Operation.GET: m.GetTaskRequest,
    Operation.LIST: m.ListTasksRequest,
    Operation.CANCEL: m.CancelTaskRequest,
    Operation.SUBSCRIBE: m.SubscribeToTaskRequest,
    Operation.PUSH_SET: m.TaskPushNotificationConfig,
    Operation.PUSH_GET: m.TaskPushConfigRef,
    Operation.PUSH_LIST: m.ListTaskPushConfigsRequest,
    Operation.PUSH_DELETE: m.TaskPushConfigRef,
    Operation.EXTENDED_CARD: m.GetExtendedAgentCardRequest,
}

_STREAM_KEYS: dict[type, str] = {
    m.Task: "task",
    m.Message: "message",
    m.TaskStatusUpdateEvent: "statusUpdate",
    m.TaskArtifactUpdateEvent: "artifactUpdate",
}


def decode(op: Operation, params: Any) -> Any:
    """Validate 1.0 params into the canonical request for `op`.

    1.0 JSON is ProtoJSON: proto field names (`context_id`) are read like the JSON names (`contextId`),
    at any depth; an object that gives one field under both names is refused (A2A 1.0 section 5.5).
    """
    return from_wire(params if params is not None else {}, REQUEST_TYPES[op], proto_names=True)


def encode_send_result(result: m.Task | m.Message) -> dict[str, Any]:
    """SendMessageResponse: `{"task": ...}` or `{"message": ...}`."""
    return {_STREAM_KEYS[type(result)]: to_wire(result)}


def encode_event(event: m.StreamEvent, *, interrupted_final: bool = True) -> dict[str, Any]:
    """StreamResponse: one of task, message, statusUpdate, artifactUpdate (1.0 has no `final`: the
    stream's end says it, so `interrupted_final` changes nothing here)."""
    return {_STREAM_KEYS[type(event)]: to_wire(event)}


def encode_result(op: Operation, result: Any) -> Any:
    """Encode the result of a unary operation."""
    if op is Operation.SEND:
        return encode_send_result(result)
    if op is Operation.PUSH_DELETE:
        return None
    return to_wire(result)


def decode_result(op: Operation, data: Any) -> Any:
    """Client side: the canonical value of a unary 1.0 result."""
    if op is Operation.SEND:
        return decode_stream_event(data)
    if op in (Operation.GET, Operation.CANCEL):
        return from_wire(data, m.Task, what="result")
    if op is Operation.LIST:
        return from_wire(data, m.ListTasksResponse, what="result")
    if op is Operation.PUSH_LIST:
        return from_wire(data, m.ListTaskPushConfigsResponse, what="result")
    if op in (Operation.PUSH_SET, Operation.PUSH_GET):
        return from_wire(data, m.TaskPushNotificationConfig, what="result")
    if op is Operation.EXTENDED_CARD:
        return from_wire(data, m.AgentCard, what="result")
    return data


def decode_stream_event(data: Any) -> m.StreamEvent:
    """Client side: a StreamResponse / SendMessageResponse to its payload."""
    if not isinstance(data, dict) or len(data) != 1:
        return from_wire(data, m.Task, what="result")  # raises a precise error
    (key, value), = data.items()
    for cls, name in _STREAM_KEYS.items():
        if name == key:
            return from_wire(value, cls, what="result")
    return from_wire(value, m.Task, what="result")


def encode_request(op: Operation, request: Any) -> Any:
    """Client side: a canonical request as 1.0 params."""
    return to_wire(request)
