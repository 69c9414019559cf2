"""The a2a-itk kit's `Instruction` messages (package `itk`), declared here with protobuf descriptors.

The kit (github.com/a2aproject/a2a-itk, `protos/instruction.proto`) sends each agent a nested instruction as
protobuf bytes: call another agent (card URL, transport, streaming, behaviour) with a nested instruction,
return a response (optionally holding the task in `working`), or a series of steps whose responses are
concatenated. The field names and numbers below are that wire format; nothing is generated or copied.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
_STRING, _BOOL, _MESSAGE, _ENUM = F.TYPE_STRING, F.TYPE_BOOL, F.TYPE_MESSAGE, F.TYPE_ENUM
_OPTIONAL, _REPEATED = F.LABEL_OPTIONAL, F.LABEL_REPEATED

# message -> [(field, number, type, type name or None, label, oneof index or None)], oneof names
_MESSAGES: dict[str, tuple[list[tuple[str, int, int, str | None, int, int | None]], list[str]]] = {
    "Instruction": ([
        ("call_agent", 1, _MESSAGE, ".itk.CallAgent", _OPTIONAL, 0),
        ("return_response", 2, _MESSAGE, ".itk.ReturnResponse", _OPTIONAL, 0),
        ("steps", 3, _MESSAGE, ".itk.SeriesOfSteps", _OPTIONAL, 0),
    ], ["step"]),
    "SendMessageBehavior": ([], []),
    "PushNotificationBehavior": ([("url", 1, _STRING, None, _OPTIONAL, None)], []),
    "ResubscribeBehavior": ([], []),
    "CallAgent": ([
        ("transport", 1, _STRING, None, _OPTIONAL, None),
        ("agent_card_uri", 2, _STRING, None, _OPTIONAL, None),
        ("instruction", 3, _MESSAGE, ".itk.Instruction", _OPTIONAL, None),
        ("streaming", 4, _BOOL, None, _OPTIONAL, None),
        ("send_message", 5, _MESSAGE, ".itk.SendMessageBehavior", _OPTIONAL, 0),
        ("push_notification", 6, _MESSAGE, ".itk.PushNotificationBehavior", _OPTIONAL, 0),
        ("resubscribe", 7, _MESSAGE, ".itk.ResubscribeBehavior", _OPTIONAL, 0),
    ], ["behavior"]),
    "ReturnResponse": ([
        ("response", 1, _STRING, None, _OPTIONAL, None),
        ("hold_task", 2, _BOOL, None, _OPTIONAL, None),
    ], []),
    "SeriesOfSteps": ([
        ("instructions", 1, _MESSAGE, ".itk.Instruction", _REPEATED, None),
        ("response_generator", 2, _ENUM, ".itk.SeriesOfSteps.ResponseGenerator", _OPTIONAL, None),
    ], []),
}
CONCAT = 1  # SeriesOfSteps.ResponseGenerator.RESPONSE_GENERATOR_CONCAT


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="parley_itk_instruction.proto", package="itk", syntax="proto3")
    for name, (fields, oneofs) in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for oneof in oneofs:
            message.oneof_decl.add(name=oneof)
        for field, number, kind, type_name, label, oneof_index in fields:
            spec = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                spec.type_name = type_name
            if oneof_index is not None:
                spec.oneof_index = oneof_index
        if name == "SeriesOfSteps":
            enum = message.enum_type.add(name="ResponseGenerator")
            enum.value.add(name="RESPONSE_GENERATOR_UNSPECIFIED", number=0)
            enum.value.add(name="RESPONSE_GENERATOR_CONCAT", number=CONCAT)
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _class(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"itk.{name}"))


Instruction = _class("Instruction")
CallAgent = _class("CallAgent")
ReturnResponse = _class("ReturnResponse")
SeriesOfSteps = _class("SeriesOfSteps")
PushNotificationBehavior = _class("PushNotificationBehavior")
