"""Fast ProtoJSON <-> protobuf conversion for the hot `lf.a2a.v1` messages.

`json_format.ParseDict` / `MessageToDict` are pure Python and generic; the
functions here do the same work for the message types Parley sends and
receives on every request (Task, Message, the stream events and their
SendMessageResponse / StreamResponse wrappers; SendMessageRequest and
GetTaskRequest), driven by a plan built once from each descriptor.

They mirror json_format step by step (the same setters, in the same order,
for the same inputs) and refuse anything they do not handle exactly like it:
an unknown key, a value of an unexpected type, an unsupported field kind,
deep nesting, an unknown enum value or any exception raise :class:`Fallback`,
and the caller then runs the json_format path, which gives its own result or
error. The tests in tests/grpc/test_grpc_convert_fast.py check that both paths
agree.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

# json_format's default max_recursion_depth is 100 (counted per message, Value
# and Struct included); stop well short of it and let json_format decide.
_MAX_DEPTH = 80

# Field kinds.
_STR, _BYTES, _ENUM, _BOOL, _INT32, _MSG, _STRUCT, _VALUE, _TIMESTAMP, _UNSUPPORTED = range(10)

_T = FieldDescriptor


class Fallback(Exception):
    """The fast path does not handle this input; use json_format."""


class _Field:
    __slots__ = ("enum_by_name", "enum_by_number", "json_name", "kind", "name", "oneof", "plan", "repeated")

    def __init__(self, field: FieldDescriptor) -> None:
        self.name = field.name
        self.json_name = field.json_name
        self.repeated = field.is_repeated
        self.oneof = field.containing_oneof.name if field.containing_oneof is not None else None
        self.enum_by_name: dict[str, int] = {}
        self.enum_by_number: dict[int, str] = {}
        self.plan: _Plan | None = None
        kind = _UNSUPPORTED
        if field.is_extension:
            pass
        elif field.type == _T.TYPE_STRING:
            kind = _STR
        elif field.type == _T.TYPE_BYTES:
            kind = _BYTES
        elif field.type == _T.TYPE_BOOL:
            kind = _BOOL
        elif field.type == _T.TYPE_INT32:
            kind = _INT32
        elif field.type == _T.TYPE_ENUM:
            enum = field.enum_type
            # Custom JSON enum names (an extension option) are not handled.
            if enum.full_name != "google.protobuf.NullValue" and all(
                not v.GetOptions().ListFields() for v in enum.values
            ):
                kind = _ENUM
                self.enum_by_name = {v.name: v.number for v in enum.values}
                self.enum_by_number = {v.number: v.name for v in enum.values}
        elif field.type == _T.TYPE_MESSAGE:
            sub = field.message_type
            if sub.GetOptions().map_entry:
                pass
            elif sub.full_name == "google.protobuf.Struct":
                kind = _STRUCT
            elif sub.full_name == "google.protobuf.Value":
                kind = _VALUE
            elif sub.full_name == "google.protobuf.Timestamp":
                kind = _TIMESTAMP
            elif not sub.full_name.startswith("google.protobuf.") and sub.file.name != "google/protobuf/wrappers.proto":
                kind = _MSG
        self.kind = kind
        if self.repeated and kind in (_STRUCT, _VALUE, _TIMESTAMP, _BYTES, _ENUM, _BOOL, _INT32):
            self.kind = _UNSUPPORTED  # not needed by the hot messages


class _Plan:
    __slots__ = ("by_json", "by_number")

    def __init__(self) -> None:
        self.by_json: dict[str, _Field] = {}
        self.by_number: dict[int, _Field] = {}


_PLANS: dict[str, _Plan] = {}


def plan_for(descriptor: Descriptor) -> _Plan:
    """The (cached) conversion plan of a message type."""
    plan = _PLANS.get(descriptor.full_name)
    if plan is not None:
        return plan
    plan = _PLANS[descriptor.full_name] = _Plan()  # registered first: recursive types
    for field in descriptor.fields:
        entry = _Field(field)
        if entry.kind == _MSG:
            entry.plan = plan_for(field.message_type)
        plan.by_json[entry.json_name] = entry
        plan.by_number[field.number] = entry
    return plan


# --- ProtoJSON dict -> message (mirrors json_format.ParseDict) ----------------------


def parse(data: Any, cls: type[ProtoMessage]) -> ProtoMessage:
    """`json_format.ParseDict(data, cls())`, or Fallback."""
    message = cls()
    try:
        _fill(message, data, plan_for(cls.DESCRIPTOR), 1)
    except Fallback:
        raise
    except Exception as exc:  # noqa: BLE001 - anything json_format might report differently
        raise Fallback(str(exc)) from None
    return message


def _fill(message: Any, data: Any, plan: _Plan, depth: int) -> None:
    if depth > _MAX_DEPTH or not isinstance(data, dict):
        raise Fallback("depth or shape")
    by_json = plan.by_json
    oneofs: set[str] | None = None
    for key, value in data.items():
        field = by_json.get(key)
        if field is None:
            raise Fallback(f"unknown key {key!r}")
        kind = field.kind
        if kind == _UNSUPPORTED:
            raise Fallback(f"unsupported field {key!r}")
        name = field.name
        if field.oneof is not None and value is not None:
            if oneofs is None:
                oneofs = set()
            if field.oneof in oneofs:
                raise Fallback("two members of a oneof")
            oneofs.add(field.oneof)
        if value is None:
            if kind == _VALUE:
                getattr(message, name).null_value = 0
            else:
                message.ClearField(name)
            continue
        if field.repeated:
            if not isinstance(value, (list, tuple)):
                raise Fallback("repeated field is not a list")
            message.ClearField(name)
            target = getattr(message, name)
            if kind == _STR:
                for item in value:
                    if type(item) is not str:
                        raise Fallback("not a string")
                    target.append(item)
            elif kind == _MSG:
                sub_plan = field.plan
                for item in value:
                    if item is None:
                        raise Fallback("null item")
                    _fill(target.add(), item, sub_plan, depth + 1)  # type: ignore[arg-type]
            else:
                raise Fallback("unsupported repeated field")
        elif kind == _STR:
            if type(value) is not str:
                raise Fallback("not a string")
            setattr(message, name, value)
        elif kind == _MSG:
            sub = getattr(message, name)
            sub.SetInParent()
            _fill(sub, value, field.plan, depth + 1)  # type: ignore[arg-type]
        elif kind == _ENUM:
            number = field.enum_by_name.get(value) if type(value) is str else None
            if number is None:
                raise Fallback("enum value")
            setattr(message, name, number)
        elif kind == _BOOL:
            if type(value) is not bool:
                raise Fallback("not a bool")
            setattr(message, name, value)
        elif kind == _STRUCT:
            sub = getattr(message, name)
            sub.SetInParent()
            _struct(sub, value, depth + 1)
        elif kind == _VALUE:
            sub = getattr(message, name)
            sub.SetInParent()
            _value(sub, value, depth + 1)
        elif kind == _TIMESTAMP:
            if type(value) is not str:
                raise Fallback("timestamp is not a string")
            sub = getattr(message, name)
            sub.SetInParent()
            sub.FromJsonString(value)
        elif kind == _BYTES:
            if type(value) is not str:
                raise Fallback("bytes are not a string")
            encoded = value.encode("utf-8")
            setattr(message, name, base64.urlsafe_b64decode(encoded + b"=" * (4 - len(encoded) % 4)))
        else:  # _INT32: not needed on the encoding side
            raise Fallback("unsupported field kind")


def _struct(struct: Any, value: Any, depth: int) -> None:
    if depth > _MAX_DEPTH or not isinstance(value, dict):
        raise Fallback("depth or shape")
    struct.Clear()
    fields = struct.fields
    for key in value:
        _value(fields[key], value[key], depth + 1)


def _value(message: Any, value: Any, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise Fallback("depth")
    if isinstance(value, dict):
        _struct(message.struct_value, value, depth + 1)
    elif isinstance(value, (list, tuple)):
        items = message.list_value
        items.ClearField("values")
        values = items.values
        for item in value:
            _value(values.add(), item, depth + 2)
    elif value is None:
        message.null_value = 0
    elif isinstance(value, bool):
        message.bool_value = value
    elif isinstance(value, str):
        message.string_value = value
    elif isinstance(value, (int, float)):
        message.number_value = value
    else:
        raise Fallback("not a JSON value")


# --- message -> ProtoJSON dict (mirrors json_format.MessageToDict) ------------------


def to_dict(message: ProtoMessage) -> dict[str, Any]:
    """`json_format.MessageToDict(message)`, or Fallback."""
    try:
        return _dict(message, plan_for(message.DESCRIPTOR))
    except Fallback:
        raise
    except Exception as exc:  # noqa: BLE001 - MessageToDict reports it its own way
        raise Fallback(str(exc)) from None


def _dict(message: Any, plan: _Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    by_number = plan.by_number
    for descriptor, value in message.ListFields():
        field = by_number.get(descriptor.number)
        if field is None or descriptor.is_extension:
            raise Fallback("unknown field")
        kind = field.kind
        if field.repeated:
            if kind == _STR:
                out[field.json_name] = [str(item) for item in value]
            elif kind == _MSG:
                sub_plan = field.plan
                out[field.json_name] = [_dict(item, sub_plan) for item in value]  # type: ignore[arg-type]
            else:
                raise Fallback("unsupported repeated field")
        elif kind == _STR:
            out[field.json_name] = str(value)
        elif kind == _MSG:
            out[field.json_name] = _dict(value, field.plan)  # type: ignore[arg-type]
        elif kind == _ENUM:
            name = field.enum_by_number.get(value)
            if name is None:
                raise Fallback("enum value")
            out[field.json_name] = name
        elif kind == _BOOL:
            out[field.json_name] = bool(value)
        elif kind == _INT32:
            out[field.json_name] = value
        elif kind == _STRUCT:
            out[field.json_name] = _struct_dict(value)
        elif kind == _VALUE:
            out[field.json_name] = _value_json(value)
        elif kind == _TIMESTAMP:
            out[field.json_name] = value.ToJsonString()
        elif kind == _BYTES:
            out[field.json_name] = base64.b64encode(value).decode("utf-8")
        else:
            raise Fallback("unsupported field kind")
    return out


def _struct_dict(struct: Any) -> dict[str, Any]:
    fields = struct.fields
    return {key: _value_json(fields[key]) for key in fields}


def _value_json(message: Any) -> Any:
    which = message.WhichOneof("kind")
    if which is None or which == "null_value":
        return None
    if which == "string_value":
        return str(message.string_value)
    if which == "number_value":
        number = message.number_value
        if math.isnan(number) or math.isinf(number):
            raise Fallback("NaN or infinity")
        return number
    if which == "bool_value":
        return bool(message.bool_value)
    if which == "struct_value":
        return _struct_dict(message.struct_value)
    if which == "list_value":
        return [_value_json(item) for item in message.list_value.values]
    raise Fallback("unknown Value kind")
