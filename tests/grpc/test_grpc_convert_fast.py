"""The fast protobuf conversion (parley.grpc.fast) against json_format.

For many generated canonical objects, `convert.encode_event` / `encode_result` /
`decode_request` (which take the fast path) must give exactly what the
json_format path gives: the same protobuf bytes, the same canonical objects,
or the same error. The fast path must also really be taken for every valid
input (no silent fallback hiding a difference).
"""

from __future__ import annotations

import importlib.util
import math
import pathlib
from typing import Any

import pytest

from support import require

require("parley.grpc.convert", "grpc")  # protobuf and the generated code: skipped without them (failed under CI=true)

# isort: split
from google.protobuf import json_format
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from parley.grpc import a2a_pb2 as pb
from parley.grpc import convert, fast
from parley.protocol import models as m
from parley.protocol import v1_0
from parley.protocol.errors import InternalError, InvalidParamsError
from parley.protocol.operations import Operation

# The canonical-object strategies of the round-trip tests, loaded by path (tests/ is not a package).
_spec = importlib.util.spec_from_file_location(
    "_parley_roundtrip_strategies", pathlib.Path(__file__).parents[1] / "unit" / "test_roundtrip.py"
)
assert _spec and _spec.loader
rt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rt)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Valid RFC 3339 timestamps of several shapes (the generated ones are mostly arbitrary text).
valid_timestamps = st.one_of(
    st.sampled_from(
        [
            "1970-01-01T00:00:00Z",
            "2026-11-25T23:50:00Z",
            "2026-11-25T23:50:00.123Z",
            "2026-11-25T23:50:00.123456789Z",
            "2026-11-25T23:50:00+02:00",
            "2026-11-25T23:50:00.5-05:30",
            "0001-01-01T00:00:00Z",
            "not a timestamp",
            "",
        ]
    ),
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")),
)


def _with_timestamps(draw: st.DrawFn, obj: Any) -> Any:
    """Give some of the statuses inside `obj` a valid timestamp."""
    status = getattr(obj, "status", None)
    if status is not None and draw(st.booleans()):
        status.timestamp = draw(valid_timestamps)
    return obj


@st.composite
def events(draw: st.DrawFn) -> Any:
    return _with_timestamps(draw, draw(rt.events()))


@st.composite
def send_results(draw: st.DrawFn) -> Any:
    return _with_timestamps(draw, draw(st.one_of(rt.tasks(), rt.messages())))


@st.composite
def tasks(draw: st.DrawFn) -> m.Task:
    return _with_timestamps(draw, draw(rt.tasks()))


# --- reference (json_format) paths ---------------------------------------------------


def _reference_encode(data: Any, cls: type) -> Any:
    try:
        return json_format.ParseDict(data, cls())
    except json_format.ParseError as exc:
        raise InternalError(f"Internal error: the result does not fit {cls.DESCRIPTOR.full_name}: {exc}") from None


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001 - compared below
        return "error", (type(exc), str(exc))


def _same_message(fast_msg: Any, ref_msg: Any) -> None:
    assert type(fast_msg) is type(ref_msg)
    assert fast_msg.SerializeToString(deterministic=True) == ref_msg.SerializeToString(deterministic=True)
    assert fast_msg == ref_msg


def _check_encode(data: Any, cls: type, actual: tuple[str, Any]) -> None:
    expected = _outcome(_reference_encode, data, cls)
    assert actual[0] == expected[0], (actual, expected)
    if expected[0] == "ok":
        _same_message(actual[1], expected[1])
        # The fast path itself (not a fallback) produced it.
        _same_message(fast.parse(data, cls), expected[1])
    else:
        assert actual[1] == expected[1]


def _ordered(value: Any) -> Any:
    """A dict tree as nested item lists, so that key order counts in comparisons."""
    if isinstance(value, dict):
        return [(k, _ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return (type(value).__name__, value)


def _check_to_dict(message: Any, *, falls_back: bool = False) -> None:
    """fast.to_dict gives MessageToDict's dict, key order included; where MessageToDict fails, it falls back.

    `falls_back`: the message is one the fast path hands to MessageToDict even though it succeeds (an enum
    number the proto does not name)."""
    expected = _outcome(json_format.MessageToDict, message)
    fast_out = _outcome(fast.to_dict, message)
    if falls_back:
        assert expected[0] == "ok", expected
        assert fast_out[0] == "error" and fast_out[1][0] is fast.Fallback, fast_out
    elif expected[0] == "ok":
        assert fast_out[0] == "ok", fast_out
        assert _ordered(fast_out[1]) == _ordered(expected[1])
    else:
        assert fast_out[0] == "error" and fast_out[1][0] is fast.Fallback, fast_out


# --- encoding ------------------------------------------------------------------------


@SETTINGS
@given(event=events())
def test_encode_event_matches_json_format(event: Any) -> None:
    data = v1_0.encode_event(event)
    _check_encode(data, pb.StreamResponse, _outcome(convert.encode_event, event))


@SETTINGS
@given(result=send_results())
def test_encode_send_result_matches_json_format(result: Any) -> None:
    data = v1_0.encode_result(Operation.SEND, result)
    _check_encode(data, pb.SendMessageResponse, _outcome(convert.encode_result, Operation.SEND, result))


@SETTINGS
@given(task=tasks(), op=st.sampled_from([Operation.GET, Operation.CANCEL]))
def test_encode_task_result_matches_json_format(task: m.Task, op: Operation) -> None:
    data = v1_0.encode_result(op, task)
    _check_encode(data, pb.Task, _outcome(convert.encode_result, op, task))


# --- decoding ------------------------------------------------------------------------


def _reference_decode(op: Operation, message: Any) -> Any:
    """What decode_request promises, from json_format alone: a value JSON cannot carry is InvalidParams."""
    try:
        data = json_format.MessageToDict(message)
    except (json_format.SerializeToJsonError, ValueError) as exc:
        raise InvalidParamsError(convert.unrepresentable(str(exc))) from None
    return v1_0.decode(op, data)


def _check_decode(op: Operation, message: Any, *, falls_back: bool = False) -> None:
    _check_to_dict(message, falls_back=falls_back)
    expected = _outcome(_reference_decode, op, message)
    actual = _outcome(convert.decode_request, op, message)
    assert actual == expected


@SETTINGS
@given(req=rt.send_requests(), op=st.sampled_from([Operation.SEND, Operation.STREAM]))
def test_decode_send_request_matches_json_format(req: m.SendMessageRequest, op: Operation) -> None:
    message = json_format.ParseDict(v1_0.encode_request(op, req), pb.SendMessageRequest())
    _check_decode(op, message)


@SETTINGS
@given(
    task_id=st.text(max_size=10),
    history=st.one_of(st.none(), st.integers(min_value=-(2**31), max_value=2**31 - 1)),
    tenant=st.one_of(st.none(), st.text(max_size=8)),
)
def test_decode_get_task_request_matches_json_format(task_id: str, history: int | None, tenant: str | None) -> None:
    message = pb.GetTaskRequest(id=task_id, tenant=tenant or "")
    if history is not None:
        message.history_length = history
    _check_decode(Operation.GET, message)


@SETTINGS
@given(event=events())
def test_to_dict_of_responses_matches_json_format(event: Any) -> None:
    """The dict side on the response messages too (a wider check of the Part / Value / Timestamp handling)."""
    encoded = _outcome(_reference_encode, v1_0.encode_event(event), pb.StreamResponse)
    assume(encoded[0] == "ok")  # an event that does not fit a StreamResponse has no message to convert back
    _check_to_dict(encoded[1])


# --- explicit edge cases -------------------------------------------------------------


def _deep(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(levels):
        value = {"k": value} if i % 2 else [value]
    return value


EDGE_DATA = [
    None,
    {},
    [],
    [None, [], {}],
    {"": None, "a": {"b": []}},
    True,
    False,
    0,
    -0.0,
    2**53,
    2**70,
    10**400,
    1.5e308,
    float("nan"),
    float("inf"),
    "",
    "\u00e9\u4e2d\U0001f600",
    "lone \ud800 surrogate",
    ("a", "tuple"),
    _deep(20),
    _deep(60),
    _deep(120),
]


@pytest.mark.parametrize("data", EDGE_DATA, ids=[repr(d)[:30] for d in EDGE_DATA])
def test_data_part_edge_cases(data: Any) -> None:
    msg = m.Message(message_id="m", role=m.Role.AGENT, parts=[m.Part(data=data, metadata={"x": data})])
    wire = v1_0.encode_event(msg)
    _check_encode(wire, pb.StreamResponse, _outcome(convert.encode_event, msg))


@pytest.mark.parametrize(
    "part",
    [
        m.Part(text=""),
        m.Part(text="t", filename="", media_type=""),
        m.Part(raw=b""),
        m.Part(raw=b"\x00\xff\xfe binary"),
        m.Part(url="", metadata={}),
        m.Part(data={"a": 1}, metadata={}, filename="f", media_type="application/json"),
        m.Part(text="lone \udfff"),
    ],
)
def test_part_edge_cases(part: m.Part) -> None:
    task = m.Task(
        id="",
        context_id="",
        status=m.TaskStatus(state=m.TaskState.COMPLETED, timestamp="1970-01-01T00:00:00Z"),
        artifacts=[m.Artifact(artifact_id="a", parts=[part]), m.Artifact(artifact_id="b", parts=[])],
        history=[],
        metadata={},
    )
    for op in (Operation.GET, Operation.SEND):
        wire = v1_0.encode_result(op, task)
        cls = pb.Task if op is Operation.GET else pb.SendMessageResponse
        _check_encode(wire, cls, _outcome(convert.encode_result, op, task))


# (wire data, message class, whether the fast path hands it to json_format)
UNUSUAL_WIRE_SHAPES: list[tuple[Any, type, bool]] = [
    ({"task": {"id": "t", "unknownField": 1}}, pb.StreamResponse, True),
    ({"task": {"id": "t", "context_id": "snake"}}, pb.StreamResponse, True),
    ({"task": {"id": 5}}, pb.StreamResponse, True),
    ({"task": {"id": None, "status": None}}, pb.StreamResponse, False),
    ({"message": {"role": 1, "parts": []}}, pb.StreamResponse, True),
    ({"message": {"role": "ROLE_NOPE"}}, pb.StreamResponse, True),
    ({"message": {"parts": [{"text": "a", "url": "b"}]}}, pb.StreamResponse, True),
    ({"message": {"parts": [{"text": "a", "data": None}]}}, pb.StreamResponse, False),
    ({"message": {"parts": [None]}}, pb.StreamResponse, True),
    ({"message": {"parts": [{"raw": "not base64!"}]}}, pb.StreamResponse, True),
    ({"message": {"parts": [{"raw": "-_8"}]}}, pb.StreamResponse, False),
    ({"message": {"extensions": ["a", None]}}, pb.StreamResponse, True),
    ({"message": {"metadata": [1]}}, pb.StreamResponse, True),
    ({"task": {"status": {"timestamp": 0}}}, pb.StreamResponse, True),
    ({"artifactUpdate": {"append": "true"}}, pb.StreamResponse, True),
    ({"artifactUpdate": {"append": True, "lastChunk": False}}, pb.StreamResponse, False),
    ({"task": {}, "message": {}}, pb.StreamResponse, True),
    ([], pb.StreamResponse, True),
]


@pytest.mark.parametrize("data, cls, falls_back", UNUSUAL_WIRE_SHAPES,
                         ids=[repr(case[0])[:40] for case in UNUSUAL_WIRE_SHAPES])
def test_unusual_wire_shapes(data: Any, cls: type, falls_back: bool) -> None:
    """Inputs the fast path does not handle fall back, and the server's encoding (fast path, then json_format)
    gives json_format's message or its error; the inputs it does handle give json_format's message directly."""
    quick = _outcome(fast.parse, data, cls)
    if falls_back:
        assert quick[0] == "error" and quick[1][0] is fast.Fallback, quick
    else:
        assert quick[0] == "ok", quick
    expected = _outcome(_reference_encode, data, cls)
    served = _outcome(convert._encode, data, cls, True)  # what encode_event / encode_result do with the wire data
    assert served[0] == expected[0], (served, expected)
    if expected[0] == "ok":
        _same_message(served[1], expected[1])
        if not falls_back:
            _same_message(quick[1], expected[1])
    else:
        assert served[1] == expected[1]
        assert served[1][0] is InternalError


def _unusual_request(role: int = pb.ROLE_USER) -> Any:
    req = pb.SendMessageRequest()
    req.message.message_id = "m"
    req.message.role = role
    return req


def test_decode_unknown_enum_number_falls_back_and_is_invalid_params() -> None:
    req = _unusual_request(role=99)  # not a Role
    req.message.parts.add().text = "hi"
    _check_decode(Operation.SEND, req, falls_back=True)
    with pytest.raises(InvalidParamsError) as info:
        convert.decode_request(Operation.SEND, req)
    assert "params.message.role" in info.value.message


@pytest.mark.parametrize("number", [math.inf, -math.inf, math.nan])
def test_decode_non_finite_numbers_fall_back_and_are_invalid_params(number: float) -> None:
    req = _unusual_request()
    req.message.parts.add().data.number_value = number
    _check_decode(Operation.SEND, req)  # MessageToDict fails: so does the fast path, with Fallback
    with pytest.raises(InvalidParamsError) as info:
        convert.decode_request(Operation.SEND, req)
    assert info.value.message.startswith("Invalid params: `data` holds a value JSON cannot carry (")


def test_decode_unset_and_empty_values() -> None:
    """An unset Value in the Part oneof is JSON null; empty lists and messages stay present and empty."""
    req = _unusual_request()
    req.message.parts.add().data.Clear()  # the oneof names `data`, whose Value has no kind
    _check_decode(Operation.SEND, req)
    assert fast.to_dict(req) == {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": None}]}}
    decoded = convert.decode_request(Operation.SEND, req)
    assert decoded.message.parts == [m.Part(data=None)]

    req.message.parts[0].data.list_value.SetInParent()
    req.metadata.SetInParent()
    req.configuration.SetInParent()
    _check_decode(Operation.SEND, req)
    assert fast.to_dict(req) == {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": []}]},
                                 "configuration": {}, "metadata": {}}
    decoded = convert.decode_request(Operation.SEND, req)
    assert decoded.message.parts == [m.Part(data=[])]
    assert decoded.metadata == {} and decoded.configuration is not None
