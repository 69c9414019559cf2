"""Protobuf messages of `lf.a2a.v1` <-> Parley's canonical model.

The canonical model's JSON *is* the ProtoJSON of `lf.a2a.v1`, so conversion
goes through it: `json_format.MessageToDict` gives the 1.0 JSON that
:mod:`parley.protocol.v1_0` validates into structs, and `json_format.ParseDict`
turns encoded structs back into messages. Validation errors keep their
`params.field` paths and become InvalidParamsError (INVALID_ARGUMENT).

ProtoJSON leaves out fields that hold their zero value, and proto3 cannot tell
"empty" from "absent" for plain strings, numbers and lists; the canonical model
requires a few of those (`ListTasksResponse.nextPageToken`, `Task.contextId`,
...), so :func:`to_dict` puts their zero values back.

The server's hot paths (encoding Task / Message / stream events, decoding
SendMessageRequest and GetTaskRequest) go through :mod:`parley.grpc.fast`, which
builds the same messages and dicts without json_format and hands anything it does
not handle exactly like json_format back to it.
"""

from __future__ import annotations

import re
from typing import Any

from google.protobuf import empty_pb2, json_format
from google.protobuf.message import Message as ProtoMessage

from parley.grpc import a2a_pb2 as pb
from parley.grpc import fast
from parley.protocol import v1_0
from parley.protocol.errors import InternalError, InvalidAgentResponseError, InvalidParamsError
from parley.protocol.operations import Operation

# The RPC of each operation (the 1.0 method names), and its request and response messages.
RPCS: dict[Operation, str] = v1_0.METHOD_OF

REQUESTS: dict[Operation, type[ProtoMessage]] = {
    Operation.SEND: pb.SendMessageRequest,
    Operation.STREAM: pb.SendMessageRequest,
    Operation.GET: pb.GetTaskRequest,
    Operation.LIST: pb.ListTasksRequest,
    Operation.CANCEL: pb.CancelTaskRequest,
    Operation.SUBSCRIBE: pb.SubscribeToTaskRequest,
    Operation.PUSH_SET: pb.TaskPushNotificationConfig,
    Operation.PUSH_GET: pb.GetTaskPushNotificationConfigRequest,
    Operation.PUSH_LIST: pb.ListTaskPushNotificationConfigsRequest,
    Operation.PUSH_DELETE: pb.DeleteTaskPushNotificationConfigRequest,
    Operation.EXTENDED_CARD: pb.GetExtendedAgentCardRequest,
}

RESPONSES: dict[Operation, type[ProtoMessage]] = {
    Operation.SEND: pb.SendMessageResponse,
    Operation.GET: pb.Task,
    Operation.LIST: pb.ListTasksResponse,
    Operation.CANCEL: pb.Task,
    Operation.PUSH_SET: pb.TaskPushNotificationConfig,
    Operation.PUSH_GET: pb.TaskPushNotificationConfig,
    Operation.PUSH_LIST: pb.ListTaskPushNotificationConfigsResponse,
    Operation.EXTENDED_CARD: pb.AgentCard,
}

# Zero values the canonical model needs present (ProtoJSON omits them).
_ZEROS: dict[str, dict[str, Any]] = {
    "lf.a2a.v1.Task": {"contextId": ""},
    "lf.a2a.v1.ListTasksResponse": {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0},
    "lf.a2a.v1.ListTaskPushNotificationConfigsResponse": {"configs": []},
    "lf.a2a.v1.AgentCard": {
        "supportedInterfaces": [],
        "defaultInputModes": [],
        "defaultOutputModes": [],
        "skills": [],
        "capabilities": {},
    },
}


def to_dict(message: ProtoMessage) -> dict[str, Any]:
    """A message as its ProtoJSON (A2A 1.0 JSON), with the zero values the canonical model requires."""
    data = json_format.MessageToDict(message)
    _fill(message.DESCRIPTOR, data)
    return data


def _fill(descriptor: Any, data: dict[str, Any]) -> None:
    for field in descriptor.fields:
        value = data.get(field.json_name)
        if value is None or field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        if field.message_type.full_name.startswith("google.protobuf."):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                _fill(field.message_type, item)
    for key, zero in _ZEROS.get(descriptor.full_name, {}).items():
        data.setdefault(key, zero.copy() if isinstance(zero, (list, dict)) else zero)


def from_dict(data: Any, cls: type[ProtoMessage]) -> ProtoMessage:
    """ProtoJSON into a message; raises json_format.ParseError."""
    return json_format.ParseDict(data, cls())


# --- server side -------------------------------------------------------------------


# Messages whose conversion has a fast path (parley.grpc.fast), which falls back to
# json_format for anything it does not handle exactly like json_format.
_FAST_REQUESTS = frozenset({Operation.SEND, Operation.STREAM, Operation.GET})
_FAST_RESULTS = frozenset({Operation.SEND, Operation.GET, Operation.CANCEL})


def decode_request(op: Operation, message: ProtoMessage, dialect: Any = v1_0) -> Any:
    """A request message as the canonical request of `op` (InvalidParamsError if it does not validate); the
    dialect :mod:`parley.protocol.v1_1` keeps the A2A 1.1 fields (generation)."""
    try:
        if op in _FAST_REQUESTS:
            try:
                data = fast.to_dict(message)
            except fast.Fallback:
                data = json_format.MessageToDict(message)
        else:
            data = json_format.MessageToDict(message)
    except (json_format.SerializeToJsonError, ValueError) as exc:  # NaN in a Struct, a timestamp out of range
        raise InvalidParamsError(unrepresentable(str(exc))) from None
    return dialect.decode(op, data)


def unrepresentable(text: str) -> str:
    """The message of a request field protobuf holds and JSON cannot (named in lowerCamel, as A2A does)."""
    found = re.match(r"Failed to serialize (\w+) field: (.*)", text, re.DOTALL)
    if found is None:
        return f"Invalid params: the request holds a value JSON cannot carry ({text})"
    head, *rest = found.group(1).split("_")
    field = head + "".join(w.title() for w in rest)
    return f"Invalid params: `{field}` holds a value JSON cannot carry ({found.group(2).rstrip('.')})"


def encode_result(op: Operation, result: Any, dialect: Any = v1_0) -> ProtoMessage:
    """The canonical result of a unary operation as its response message."""
    if op is Operation.PUSH_DELETE:
        return empty_pb2.Empty()
    return _encode(dialect.encode_result(op, result), RESPONSES[op], op in _FAST_RESULTS)


def encode_event(event: Any, dialect: Any = v1_0) -> pb.StreamResponse:
    """A streamed canonical event as a StreamResponse."""
    return _encode(dialect.encode_event(event), pb.StreamResponse, True)


def _encode(data: Any, cls: type[ProtoMessage], quick: bool = False) -> Any:
    if quick:
        try:
            return fast.parse(data, cls)
        except fast.Fallback:
            pass
    try:
        return from_dict(data, cls)
    except json_format.ParseError as exc:
        raise InternalError(f"Internal error: the result does not fit {cls.DESCRIPTOR.full_name}: {exc}") from None


# --- client side -------------------------------------------------------------------


def encode_request(op: Operation, request: Any, tenant: str | None = None) -> ProtoMessage:
    """A canonical request as the request message of `op`, with `tenant` unless the request names one."""
    data = v1_0.encode_request(op, request)
    if tenant and not data.get("tenant"):
        data["tenant"] = tenant
    try:
        return from_dict(data, REQUESTS[op])
    except json_format.ParseError as exc:
        raise InvalidParamsError(f"Invalid params: {exc}") from None


def decode_result(op: Operation, message: ProtoMessage) -> Any:
    """A unary response message as the canonical result (InvalidAgentResponseError if it does not validate)."""
    if op is Operation.PUSH_DELETE:
        return None
    return _checked(v1_0.decode_result, op, to_dict(message))


def decode_event(message: pb.StreamResponse) -> Any:
    """A StreamResponse as the canonical event it carries."""
    return _checked(v1_0.decode_stream_event, to_dict(message))


def _checked(decode: Any, *args: Any) -> Any:
    try:
        return decode(*args)
    except InvalidParamsError as exc:
        detail = exc.message.removeprefix("Invalid params: ").removeprefix("Invalid result: ")
        raise InvalidAgentResponseError(f"Invalid agent response: {detail}") from None
