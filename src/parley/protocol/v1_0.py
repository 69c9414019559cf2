"""The A2A 1.0 dialect: method names and wire shapes (the canonical model).

Requests are read as ProtoJSON parsers read them: proto field names as well as JSON names
(:mod:`parley.protocol.names`); everything written uses the lowerCamel JSON names.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

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


def decode(op: Operation, params: Any, *, proto_names: bool = True) -> Any:
    """Validate 1.0 params into the canonical request for `op`.

    1.0 JSON is ProtoJSON: proto field names (`context_id`) are read like the JSON names (`contextId`),
    at any depth; an object that gives one field under both names is refused (A2A 1.0 section 5.5).
    The A2A 1.1 fields (`currentGeneration`, `ifGenerationMatch`) are ignored, as 1.0 ignores unknown fields.
    `proto_names=False`: the caller knows no key is a proto name (see :func:`may_hold_proto_names`).
    """
    return without_1_1(decode_1_1(op, params, proto_names=proto_names))


def decode_1_1(op: Operation, params: Any, *, proto_names: bool = True) -> Any:
    """`decode` keeping the A2A 1.1 fields (:mod:`parley.protocol.v1_1`). They are int64: ProtoJSON writes them
    as decimal strings (gRPC requests come through it), and either form is read."""
    params = params if params is not None else {}
    if isinstance(params, dict) and op in _INT64_FIELDS:
        params = _int64s(params, op)
    return from_wire(params, REQUEST_TYPES[op], proto_names=proto_names)


def may_hold_proto_names(body: bytes) -> bool:
    """Whether a JSON body may spell a field by its proto name. Every proto name that differs from its JSON name
    has an underscore (`context_id`): a body none of whose keys holds one (an underscore, then the rest of a string
    without escapes, then `:`), and with no escapes at all (a key may spell `_` as `\\u005f`), has none, and
    decoding it need not walk the request looking for them. Values may hold underscores (`ROLE_USER`)."""
    return b"\\" in body or _UNDERSCORED_KEY.search(body) is not None


_UNDERSCORED_KEY = re.compile(rb'_[^"\\]*"\s*:')  # may match inside a value too: then the walk is done anyway


# Where the A2A 1.1 int64 fields sit in a request's params: (object path, JSON name, proto name).
_INT64_FIELDS: dict[Operation, tuple[tuple[str, ...], str, str]] = {
    Operation.GET: ((), "currentGeneration", "current_generation"),
    Operation.SEND: (("configuration",), "ifGenerationMatch", "if_generation_match"),
    Operation.STREAM: (("configuration",), "ifGenerationMatch", "if_generation_match"),
}


def _int64s(params: dict[str, Any], op: Operation) -> dict[str, Any]:
    """`params` with its 1.1 int64 field read from a decimal string (a copy; the rest left to validation)."""
    path, *names = _INT64_FIELDS[op]
    holder: Any = params
    for key in path:
        holder = holder.get(key) if isinstance(holder, dict) else None
    if not isinstance(holder, dict):
        return params
    fixed = {k: _as_int(v) if k in names else v for k, v in holder.items()}
    if fixed == holder:
        return params
    if not path:
        return fixed
    return {**params, path[0]: fixed}


def _as_int(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def without_1_1(value: Any) -> Any:
    """`value` without what A2A 1.1 added (section 3.2.7 `generation`, `currentGeneration`, `ifGenerationMatch`):
    a 1.0 client sees what it saw before 1.1 and cannot ask for what 1.1 added."""
    kind = type(value)
    if kind in _GENERATION_CARRIERS and value.generation is not None:
        return msgspec.structs.replace(value, generation=None)
    if kind is m.ListTasksResponse and any(t.generation is not None for t in value.tasks):
        return msgspec.structs.replace(value, tasks=[without_1_1(t) for t in value.tasks])
    if kind is m.GetTaskRequest and value.current_generation is not None:
        return msgspec.structs.replace(value, current_generation=None)
    if kind is m.SendMessageRequest and value.configuration is not None \
            and value.configuration.if_generation_match is not None:
        config = msgspec.structs.replace(value.configuration, if_generation_match=None)
        return msgspec.structs.replace(value, configuration=config)
    return value


_GENERATION_CARRIERS = (m.Task, m.TaskStatusUpdateEvent, m.TaskArtifactUpdateEvent)


def encode_send_result(result: m.Task | m.Message) -> dict[str, Any]:
    """SendMessageResponse: `{"task": ...}` or `{"message": ...}`."""
    return encode_send_result_1_1(without_1_1(result))


def encode_send_result_1_1(result: m.Task | m.Message) -> dict[str, Any]:
    """`encode_send_result` with the task's generation (A2A 1.1)."""
    return {_STREAM_KEYS[type(result)]: to_wire(result)}


def encode_event(event: m.StreamEvent, *, interrupted_final: bool = True) -> dict[str, Any]:
    """StreamResponse: one of task, message, statusUpdate, artifactUpdate (1.0 has no `final`: the
    stream's end says it, so `interrupted_final` changes nothing here)."""
    return encode_event_1_1(without_1_1(event))


def encode_event_1_1(event: m.StreamEvent, *, interrupted_final: bool = True) -> dict[str, Any]:
    """`encode_event` with the generation (A2A 1.1 section 3.2.7)."""
    return {_STREAM_KEYS[type(event)]: to_wire(event)}


_STREAM_HEADS: dict[type, bytes] = {cls: b'{"%s":' % key.encode() for cls, key in _STREAM_KEYS.items()}


def encode_event_json(event: m.StreamEvent, *, interrupted_final: bool = True) -> bytes:
    """`encode_event` as JSON bytes, the struct encoded straight to JSON (no dicts in between: a streamed token's
    frame is made once per token)."""
    kind = type(event)
    if kind in _GENERATION_CARRIERS:  # without_1_1, inline (a streamed token's frame is made once per token)
        if event.generation is not None:
            event = msgspec.structs.replace(event, generation=None)
    else:
        event = without_1_1(event)
    return b"%b%b}" % (_STREAM_HEADS[kind], _encode(event))


_encode = msgspec.json.Encoder().encode  # what codec.dumps does, without its call


def encode_send_result_json(result: m.Task | m.Message) -> bytes:
    """`encode_send_result` as JSON bytes, the struct encoded straight to JSON (no dicts in between: every unary
    send's answer is one)."""
    return encode_event_json(result)


def encode_result(op: Operation, result: Any) -> Any:
    """Encode the result of a unary operation."""
    return encode_result_1_1(op, without_1_1(result))


def encode_result_1_1(op: Operation, result: Any) -> Any:
    """`encode_result` with the generations (A2A 1.1)."""
    if op is Operation.SEND:
        return encode_send_result_1_1(result)
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
    """Client side: a canonical request as 1.0 params (without the 1.1 fields)."""
    return to_wire(without_1_1(request))
