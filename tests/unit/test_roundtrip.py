"""Round trips through the version adapters (1.0 is the canonical shape, 0.3 converts at the edge).

Property tests build random canonical objects and check that

* canonical -> 1.0 wire (`codec.to_wire`, through JSON bytes) -> `codec.from_wire` is the identity, and
* canonical -> 0.3 wire (`v0_3.encode_event` / `encode_result` / `encode_request`, through JSON bytes)
  -> the 0.3 decoders (`v0_3.decode` for requests, `v0_3.decode_result` for results) is the identity,

for everything the 0.3 format can carry. The documented lossy spots (no `mediaType`/`filename` on text and
data parts in 0.3, `historyLength: 0` meaning "unset" in 0.3, no `tenant` in 0.3, ...) are left out of the 0.3
strategies and pinned down by explicit examples below, as is the exact 0.3 JSON of each kind of object.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parley.protocol import codec, v0_3, v1_0
from parley.protocol import models as m
from parley.protocol.errors import InvalidParamsError
from parley.protocol.operations import Operation

# Local settings (not a global profile, so other test modules keep their own).
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

COMPAT = v0_3.DATA_COMPAT_KEY

# --- strategies --------------------------------------------------------------------------------------------

short_text = st.text(max_size=12)
ids = st.text(min_size=1, max_size=10)
keys = st.text(max_size=8).filter(lambda k: k != COMPAT)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    short_text,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(keys, children, max_size=3),
    ),
    max_leaves=8,
)
# Metadata: absent or a non-empty object (an empty object is a separate, explicit case).
metadata = st.one_of(st.none(), st.dictionaries(keys, json_values, min_size=1, max_size=3))
opt_text = st.one_of(st.none(), short_text)
opt_ids = st.one_of(st.none(), st.lists(ids, max_size=3))
states = st.sampled_from(list(m.TaskState))
roles = st.sampled_from(list(m.Role))


@st.composite
def parts(draw: st.DrawFn, *, v03: bool = False) -> m.Part:
    """A part with one content field; with v03=True, only what 0.3 can carry."""
    kind = draw(st.sampled_from(["text", "raw", "url", "data"]))
    meta = draw(metadata)
    file_like = kind in ("raw", "url")
    filename = draw(opt_text) if (file_like or not v03) else None
    media_type = draw(opt_text) if (file_like or not v03) else None
    if kind == "text":
        return m.Part(text=draw(short_text), metadata=meta, filename=filename, media_type=media_type)
    if kind == "raw":
        return m.Part(raw=draw(st.binary(max_size=16)), metadata=meta, filename=filename, media_type=media_type)
    if kind == "url":
        return m.Part(url=draw(short_text), metadata=meta, filename=filename, media_type=media_type)
    # data: objects and non-objects (arrays, scalars, null) alike
    return m.Part(data=draw(json_values), metadata=meta, filename=filename, media_type=media_type)


@st.composite
def messages(draw: st.DrawFn, *, v03: bool = False, role: m.Role | None = None) -> m.Message:
    return m.Message(
        message_id=draw(ids),
        role=role or draw(roles),
        parts=draw(st.lists(parts(v03=v03), min_size=1, max_size=3)),
        context_id=draw(st.one_of(st.none(), ids)),
        task_id=draw(st.one_of(st.none(), ids)),
        metadata=draw(metadata),
        extensions=draw(opt_ids),
        reference_task_ids=draw(opt_ids),
    )


@st.composite
def statuses(draw: st.DrawFn, *, v03: bool = False) -> m.TaskStatus:
    return m.TaskStatus(
        state=draw(states),
        message=draw(st.one_of(st.none(), messages(v03=v03, role=m.Role.AGENT))),
        timestamp=draw(opt_text),
    )


@st.composite
def artifacts(draw: st.DrawFn, *, v03: bool = False) -> m.Artifact:
    return m.Artifact(
        artifact_id=draw(ids),
        parts=draw(st.lists(parts(v03=v03), max_size=3)),
        name=draw(opt_text),
        description=draw(opt_text),
        metadata=draw(metadata),
        extensions=draw(opt_ids),
    )


@st.composite
def tasks(draw: st.DrawFn, *, v03: bool = False) -> m.Task:
    return m.Task(
        id=draw(ids),
        context_id=draw(ids),
        status=draw(statuses(v03=v03)),
        artifacts=draw(st.one_of(st.none(), st.lists(artifacts(v03=v03), max_size=2))),
        history=draw(st.one_of(st.none(), st.lists(messages(v03=v03), max_size=3))),
        metadata=draw(metadata),
    )


@st.composite
def status_updates(draw: st.DrawFn, *, v03: bool = False) -> m.TaskStatusUpdateEvent:
    return m.TaskStatusUpdateEvent(
        task_id=draw(ids), context_id=draw(ids), status=draw(statuses(v03=v03)), metadata=draw(metadata)
    )


@st.composite
def artifact_updates(draw: st.DrawFn, *, v03: bool = False) -> m.TaskArtifactUpdateEvent:
    return m.TaskArtifactUpdateEvent(
        task_id=draw(ids),
        context_id=draw(ids),
        artifact=draw(artifacts(v03=v03)),
        append=draw(st.booleans()),
        last_chunk=draw(st.booleans()),
        metadata=draw(metadata),
    )


def events(*, v03: bool = False) -> st.SearchStrategy[Any]:
    return st.one_of(tasks(v03=v03), messages(v03=v03), status_updates(v03=v03), artifact_updates(v03=v03))


@st.composite
def auth_infos(draw: st.DrawFn) -> m.AuthenticationInfo | None:
    if not draw(st.booleans()):
        return None
    return m.AuthenticationInfo(scheme=draw(ids), credentials=draw(opt_text))


@st.composite
def push_configs(draw: st.DrawFn, *, v03: bool = False, task_id: str | None = None) -> m.TaskPushNotificationConfig:
    return m.TaskPushNotificationConfig(
        url=draw(ids),
        task_id=task_id if task_id is not None else draw(ids),
        id=draw(st.one_of(st.just(""), ids)),
        tenant=None if v03 else draw(opt_text),
        token=draw(opt_text),
        authentication=draw(auth_infos()),
    )


@st.composite
def send_requests(draw: st.DrawFn, *, v03: bool = False) -> m.SendMessageRequest:
    conf = None
    if draw(st.booleans()):
        history = (
            st.one_of(st.none(), st.integers(min_value=1, max_value=1000))  # 0 means "unset" in 0.3
            if v03
            else st.one_of(st.none(), st.integers(min_value=0, max_value=1000))
        )
        conf = m.SendMessageConfiguration(
            accepted_output_modes=draw(st.one_of(st.none(), st.lists(short_text, max_size=3))),
            # Inline push configs carry no task id (the task does not exist yet).
            task_push_notification_config=draw(
                st.one_of(st.none(), push_configs(v03=v03, task_id="" if v03 else None))
            ),
            history_length=draw(history),
            return_immediately=draw(st.booleans()),
        )
    return m.SendMessageRequest(
        message=draw(messages(v03=v03, role=m.Role.USER)),
        configuration=conf,
        metadata=draw(metadata),
        tenant=None if v03 else draw(opt_text),
    )


@st.composite
def list_requests(draw: st.DrawFn) -> m.ListTasksRequest:
    return m.ListTasksRequest(
        context_id=draw(opt_text),
        status=draw(st.one_of(st.none(), states)),
        page_size=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=200))),
        page_token=draw(opt_text),
        history_length=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=50))),
        status_timestamp_after=draw(opt_text),
        include_artifacts=draw(st.booleans()),
        tenant=draw(opt_text),
    )


def via_json(data: Any) -> Any:
    """What the other side of the wire sees: the data serialised to JSON bytes and parsed back."""
    return codec.loads(codec.dumps(data))


# --- 1.0: the canonical model is the wire shape ---------------------------------------------------------------

ONE_ZERO_CASES = [
    (m.Part, parts()),
    (m.Message, messages()),
    (m.Task, tasks()),
    (m.TaskStatusUpdateEvent, status_updates()),
    (m.TaskArtifactUpdateEvent, artifact_updates()),
    (m.TaskPushNotificationConfig, push_configs()),
    (m.SendMessageRequest, send_requests()),
    (m.ListTasksRequest, list_requests()),
]


@pytest.mark.parametrize(("cls", "strategy"), ONE_ZERO_CASES, ids=[c.__name__ for c, _ in ONE_ZERO_CASES])
@SETTINGS
@given(data=st.data())
def test_v1_to_wire_from_wire_is_identity(cls: type, strategy: st.SearchStrategy[Any], data: st.DataObject) -> None:
    obj = data.draw(strategy)
    wire = via_json(codec.to_wire(obj))
    assert codec.from_wire(wire, cls) == obj


@SETTINGS
@given(event=events())
def test_v1_stream_events_round_trip(event: Any) -> None:
    wire = via_json(v1_0.encode_event(event))
    assert len(wire) == 1
    assert v1_0.decode_stream_event(wire) == event


@SETTINGS
@given(event=events(), generation=st.one_of(st.none(), st.integers(min_value=1, max_value=2**40)))
def test_v1_events_encoded_straight_to_json_are_the_same_bytes(event: Any, generation: int | None) -> None:
    """The SSE writer's `encode_event_json` (the struct straight to JSON) writes what `encode_event` + JSON writes,
    the A2A 1.1 generation left out the same way."""
    if hasattr(event, "generation"):
        event.generation = generation
    assert v1_0.encode_event_json(event) == codec.dumps(v1_0.encode_event(event))


@SETTINGS
@given(result=st.one_of(tasks(), messages()))
def test_v1_send_result_round_trip(result: Any) -> None:
    wire = via_json(v1_0.encode_result(Operation.SEND, result))
    assert list(wire) == ["task" if isinstance(result, m.Task) else "message"]
    assert v1_0.decode_result(Operation.SEND, wire) == result


@SETTINGS
@given(req=send_requests())
def test_v1_send_request_round_trip(req: m.SendMessageRequest) -> None:
    params = via_json(v1_0.encode_request(Operation.SEND, req))
    assert v1_0.decode(Operation.SEND, params) == req


# --- 0.3: canonical -> 0.3 -> canonical ---------------------------------------------------------------------


@SETTINGS
@given(event=events(v03=True))
def test_v03_stream_events_round_trip(event: Any) -> None:
    wire = via_json(v0_3.encode_event(event))
    assert wire["kind"] in ("task", "message", "status-update", "artifact-update")
    assert v0_3.decode_result(Operation.STREAM, wire) == event
    assert v0_3.decode_result(Operation.SUBSCRIBE, wire) == event


@SETTINGS
@given(result=st.one_of(tasks(v03=True), messages(v03=True)))
def test_v03_send_result_round_trip(result: Any) -> None:
    wire = via_json(v0_3.encode_result(Operation.SEND, result))
    assert wire["kind"] == ("task" if isinstance(result, m.Task) else "message")
    assert v0_3.decode_result(Operation.SEND, wire) == result


@SETTINGS
@given(task=tasks(v03=True))
def test_v03_get_and_cancel_results_round_trip(task: m.Task) -> None:
    for op in (Operation.GET, Operation.CANCEL):
        wire = via_json(v0_3.encode_result(op, task))
        assert v0_3.decode_result(op, wire) == task


@SETTINGS
@given(event=events(v03=True))
def test_v03_to_canonical_dict_gives_the_v1_stream_response(event: Any) -> None:
    canonical = v0_3.to_canonical_dict(via_json(v0_3.encode_event(event)))
    assert canonical == via_json(v1_0.encode_event(event))


@SETTINGS
@given(
    page=st.builds(
        m.ListTasksResponse,
        tasks=st.lists(tasks(v03=True), max_size=3),
        next_page_token=short_text,
        page_size=st.integers(min_value=1, max_value=100),
        total_size=st.integers(min_value=0, max_value=1000),
    )
)
def test_v03_list_result_round_trip(page: m.ListTasksResponse) -> None:
    wire = via_json(v0_3.encode_result(Operation.LIST, page))
    assert all(t["kind"] == "task" for t in wire["tasks"])
    assert v0_3.decode_result(Operation.LIST, wire) == page


@SETTINGS
@given(cfg=push_configs(v03=True))
def test_v03_push_config_results_round_trip(cfg: m.TaskPushNotificationConfig) -> None:
    for op in (Operation.PUSH_SET, Operation.PUSH_GET):
        wire = via_json(v0_3.encode_result(op, cfg))
        assert v0_3.decode_result(op, wire) == cfg
    listed = m.ListTaskPushConfigsResponse(configs=[cfg, cfg])
    wire = via_json(v0_3.encode_result(Operation.PUSH_LIST, listed))
    assert isinstance(wire, list)
    assert v0_3.decode_result(Operation.PUSH_LIST, wire) == listed


@SETTINGS
@given(req=send_requests(v03=True))
def test_v03_send_request_round_trip(req: m.SendMessageRequest) -> None:
    for op in (Operation.SEND, Operation.STREAM):
        params = via_json(v0_3.encode_request(op, req))
        assert params["message"]["kind"] == "message"
        assert v0_3.decode(op, params) == req


@SETTINGS
@given(cfg=push_configs(v03=True, task_id=None).filter(lambda c: c.task_id != ""))
def test_v03_push_set_request_round_trip(cfg: m.TaskPushNotificationConfig) -> None:
    params = via_json(v0_3.encode_request(Operation.PUSH_SET, cfg))
    assert v0_3.decode(Operation.PUSH_SET, params) == cfg


@SETTINGS
@given(task_id=ids, cfg_id=ids)
def test_v03_push_ref_requests_round_trip(task_id: str, cfg_id: str) -> None:
    ref = m.TaskPushConfigRef(task_id=task_id, id=cfg_id)
    for op in (Operation.PUSH_GET, Operation.PUSH_DELETE):
        params = via_json(v0_3.encode_request(op, ref))
        assert params == {"id": task_id, "pushNotificationConfigId": cfg_id}
        assert v0_3.decode(op, params) == ref
    params = via_json(v0_3.encode_request(Operation.PUSH_LIST, m.ListTaskPushConfigsRequest(task_id=task_id)))
    assert v0_3.decode(Operation.PUSH_LIST, params) == m.ListTaskPushConfigsRequest(task_id=task_id)


@SETTINGS
@given(
    task_id=ids,
    history=st.one_of(st.none(), st.integers(min_value=0, max_value=100)),
    meta=metadata,
)
def test_v03_get_cancel_subscribe_requests_round_trip(task_id: str, history: int | None, meta: Any) -> None:
    get = m.GetTaskRequest(id=task_id, history_length=history)
    assert v0_3.decode(Operation.GET, via_json(v0_3.encode_request(Operation.GET, get))) == get
    cancel = m.CancelTaskRequest(id=task_id, metadata=meta)
    assert v0_3.decode(Operation.CANCEL, via_json(v0_3.encode_request(Operation.CANCEL, cancel))) == cancel
    sub = m.SubscribeToTaskRequest(id=task_id)
    assert v0_3.decode(Operation.SUBSCRIBE, via_json(v0_3.encode_request(Operation.SUBSCRIBE, sub))) == sub


@SETTINGS
@given(req=list_requests())
def test_v03_list_request_round_trip(req: m.ListTasksRequest) -> None:
    params = via_json(v0_3.encode_request(Operation.LIST, req))
    if req.status is not None:
        assert params["status"] == v0_3.STATE_TO_V03[req.status]
    assert v0_3.decode(Operation.LIST, params) == req


# --- exact 0.3 JSON -----------------------------------------------------------------------------------------


def _msg(*parts: m.Part, role: m.Role = m.Role.AGENT, **kw: Any) -> m.Message:
    return m.Message(message_id="m1", role=role, parts=list(parts), **kw)


def test_v03_message_json() -> None:
    msg = _msg(m.Part(text="hi"), role=m.Role.USER, context_id="c1", task_id="t1", reference_task_ids=["t0"],
               metadata={"k": 1}, extensions=["urn:x"])
    assert v0_3.encode_event(msg) == {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
        "contextId": "c1",
        "taskId": "t1",
        "referenceTaskIds": ["t0"],
        "metadata": {"k": 1},
        "extensions": ["urn:x"],
    }
    assert v0_3.encode_event(_msg(m.Part(text="x")))["role"] == "agent"


def test_v03_file_parts_json() -> None:
    raw = m.Part(raw=b"\x00\x01hello", filename="a.bin", media_type="application/octet-stream", metadata={"a": 1})
    assert v0_3.part_to_v03(codec.to_wire(raw)) == {
        "kind": "file",
        "file": {"bytes": base64.b64encode(b"\x00\x01hello").decode(), "name": "a.bin",
                 "mimeType": "application/octet-stream"},
        "metadata": {"a": 1},
    }
    url = m.Part(url="https://example.com/x.png", media_type="image/png")
    assert v0_3.part_to_v03(codec.to_wire(url)) == {
        "kind": "file", "file": {"uri": "https://example.com/x.png", "mimeType": "image/png"},
    }
    assert v0_3.part_to_v03(codec.to_wire(m.Part(url="u"))) == {"kind": "file", "file": {"uri": "u"}}


def test_v03_data_parts_json() -> None:
    obj = m.Part(data={"a": [1, 2]}, metadata={"m": True})
    assert v0_3.part_to_v03(codec.to_wire(obj)) == {"kind": "data", "data": {"a": [1, 2]}, "metadata": {"m": True}}
    for value in ([1, "two"], "text", 3, 2.5, True, None):
        part = m.Part(data=value)
        assert v0_3.part_to_v03(codec.to_wire(part)) == {
            "kind": "data", "data": {"value": value}, "metadata": {COMPAT: True},
        }, value
    with_meta = m.Part(data=[1], metadata={"m": 1})
    assert v0_3.part_to_v03(codec.to_wire(with_meta)) == {
        "kind": "data", "data": {"value": [1]}, "metadata": {"m": 1, COMPAT: True},
    }
    # The wrapping must not leak into the caller's part metadata.
    assert with_meta.metadata == {"m": 1}


def test_v03_data_compat_is_unwrapped_on_the_way_in() -> None:
    part = v0_3.part_from_v03({"kind": "data", "data": {"value": [1, 2]}, "metadata": {COMPAT: True, "x": 1}}, "p")
    assert part == {"data": [1, 2], "metadata": {"x": 1}}
    part = v0_3.part_from_v03({"kind": "data", "data": {"value": None}, "metadata": {COMPAT: True}}, "p")
    assert part == {"data": None}
    # Without the marker an object with a `value` key is just an object.
    assert v0_3.part_from_v03({"kind": "data", "data": {"value": 1}}, "p") == {"data": {"value": 1}}


def test_v03_task_json() -> None:
    task = m.Task(
        id="t1",
        context_id="c1",
        status=m.TaskStatus(state=m.TaskState.INPUT_REQUIRED, message=_msg(m.Part(text="why?")), timestamp="ts"),
        artifacts=[m.Artifact(artifact_id="a1", name="response", parts=[m.Part(text="x"), m.Part(data=[1])])],
        history=[_msg(m.Part(text="hello"), role=m.Role.USER)],
    )
    assert v0_3.encode_result(Operation.GET, task) == {
        "kind": "task",
        "id": "t1",
        "contextId": "c1",
        "status": {
            "state": "input-required",
            "message": {"kind": "message", "messageId": "m1", "role": "agent", "parts": [{"kind": "text", "text": "why?"}]},
            "timestamp": "ts",
        },
        "artifacts": [
            {
                "artifactId": "a1",
                "name": "response",
                "parts": [
                    {"kind": "text", "text": "x"},
                    {"kind": "data", "data": {"value": [1]}, "metadata": {COMPAT: True}},
                ],
            }
        ],
        "history": [{"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hello"}]}],
    }
    assert v0_3.encode_result(Operation.SEND, task) == v0_3.encode_result(Operation.GET, task)


@pytest.mark.parametrize("state", list(m.TaskState), ids=lambda s: s.name)
def test_v03_states_are_lowercase_and_final_flag(state: m.TaskState) -> None:
    ev = m.TaskStatusUpdateEvent(task_id="t", context_id="c", status=m.TaskStatus(state=state))
    wire = v0_3.encode_event(ev)
    expected_state = state.name.lower().replace("_", "-")
    # The 0.3 stream ends with the task's last event: terminal, or interrupted (the server closes the stream).
    final = state in {m.TaskState.COMPLETED, m.TaskState.FAILED, m.TaskState.CANCELED, m.TaskState.REJECTED,
                      m.TaskState.INPUT_REQUIRED, m.TaskState.AUTH_REQUIRED}
    assert wire == {"kind": "status-update", "taskId": "t", "contextId": "c",
                    "status": {"state": expected_state}, "final": final}
    assert v0_3.STATE_FROM_V03[expected_state] == state.value


def test_v03_artifact_update_json() -> None:
    ev = m.TaskArtifactUpdateEvent(
        task_id="t", context_id="c", artifact=m.Artifact(artifact_id="a", parts=[m.Part(text="chunk")]),
        append=True, last_chunk=True,
    )
    assert v0_3.encode_event(ev) == {
        "kind": "artifact-update", "taskId": "t", "contextId": "c",
        "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "chunk"}]},
        "append": True, "lastChunk": True,
    }
    first = v0_3.encode_event(m.TaskArtifactUpdateEvent(task_id="t", context_id="c",
                                                        artifact=m.Artifact(artifact_id="a", parts=[])))
    assert first["kind"] == "artifact-update"
    assert first.get("append", False) is False and first.get("lastChunk", False) is False


def test_v03_push_config_json() -> None:
    cfg = m.TaskPushNotificationConfig(url="https://hook", task_id="t1", id="p1", token="tok",
                                       authentication=m.AuthenticationInfo(scheme="Bearer", credentials="s3cret"))
    expected = {"taskId": "t1", "pushNotificationConfig": {
        "id": "p1", "url": "https://hook", "token": "tok",
        "authentication": {"schemes": ["Bearer"], "credentials": "s3cret"},
    }}
    assert v0_3.encode_result(Operation.PUSH_SET, cfg) == expected
    assert v0_3.encode_result(Operation.PUSH_LIST, m.ListTaskPushConfigsResponse(configs=[cfg])) == [expected]
    assert v0_3.encode_result(Operation.PUSH_DELETE, None) is None


def test_v03_send_request_json() -> None:
    req = m.SendMessageRequest(
        message=_msg(m.Part(text="hi"), role=m.Role.USER),
        configuration=m.SendMessageConfiguration(accepted_output_modes=["text/plain"], history_length=3,
                                                 return_immediately=True),
        metadata={"x": 1},
    )
    assert v0_3.encode_request(Operation.SEND, req) == {
        "message": {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]},
        "configuration": {"blocking": False, "historyLength": 3, "acceptedOutputModes": ["text/plain"]},
        "metadata": {"x": 1},
    }
    plain = m.SendMessageRequest(message=_msg(m.Part(text="hi"), role=m.Role.USER),
                                 configuration=m.SendMessageConfiguration())
    assert v0_3.encode_request(Operation.SEND, plain)["configuration"] == {"blocking": True}


def test_v03_list_request_uses_lowercase_state() -> None:
    req = m.ListTasksRequest(status=m.TaskState.INPUT_REQUIRED, page_size=5)
    assert v0_3.encode_request(Operation.LIST, req) == {"status": "input-required", "pageSize": 5}
    with pytest.raises(InvalidParamsError):
        v0_3.decode(Operation.LIST, {"status": "TASK_STATE_WORKING"})


# --- the documented lossy spots ------------------------------------------------------------------------------


def test_v03_drops_filename_and_media_type_on_text_and_data_parts() -> None:
    for part in (m.Part(text="t", filename="f.txt", media_type="text/plain"),
                 m.Part(data={"a": 1}, filename="f.json", media_type="application/json")):
        wire = v0_3.part_to_v03(codec.to_wire(part))
        assert "filename" not in str(wire) and "mediaType" not in wire and "mimeType" not in str(wire)
        back = codec.from_wire(v0_3.part_from_v03(wire, "p"), m.Part)
        assert back.filename is None and back.media_type is None
        assert back.content_kind == part.content_kind


def test_v03_history_length_zero_means_unset() -> None:
    req = m.SendMessageRequest(message=_msg(m.Part(text="hi"), role=m.Role.USER),
                               configuration=m.SendMessageConfiguration(history_length=0))
    params = v0_3.encode_request(Operation.SEND, req)
    assert params["configuration"]["historyLength"] == 0
    assert v0_3.decode(Operation.SEND, params).configuration.history_length is None
    # A positive value passes through.
    params["configuration"]["historyLength"] = 2
    assert v0_3.decode(Operation.SEND, params).configuration.history_length == 2


def test_v03_has_no_tenant() -> None:
    req = m.SendMessageRequest(message=_msg(m.Part(text="hi"), role=m.Role.USER), tenant="acme")
    assert "tenant" not in v0_3.encode_request(Operation.SEND, req)
    cfg = m.TaskPushNotificationConfig(url="u", task_id="t", id="p", tenant="acme")
    assert "tenant" not in str(v0_3.encode_result(Operation.PUSH_GET, cfg))
    assert "tenant" not in v0_3.encode_request(Operation.GET, m.GetTaskRequest(id="t", tenant="acme"))


def test_v03_empty_metadata_on_a_wrapped_data_part_comes_back_unset() -> None:
    # Non-object data is wrapped with {"data_part_compat": true}; unwrapping cannot tell `{}` from no metadata.
    part = m.Part(data=[1], metadata={})
    back = codec.from_wire(v0_3.part_from_v03(v0_3.part_to_v03(codec.to_wire(part)), "p"), m.Part)
    assert back.data == [1] and not back.metadata


def test_v03_push_list_has_no_page_token() -> None:
    listed = m.ListTaskPushConfigsResponse(configs=[], next_page_token="more")
    assert v0_3.encode_result(Operation.PUSH_LIST, listed) == []
    assert v0_3.decode_result(Operation.PUSH_LIST, []) == m.ListTaskPushConfigsResponse(configs=[])


# --- 0.3 decoding errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "where"),
    [
        ({"text": "no kind"}, "kind"),
        ({"kind": "image"}, "kind"),
        ({"kind": "text", "text": 3}, "text"),
        ({"kind": "file", "file": {}}, "file"),
        ({"kind": "file", "file": {"bytes": "AA==", "uri": "u"}}, "file"),
        ({"kind": "file", "file": "u"}, "file"),
        ({"kind": "data"}, "data"),
        ("text", "parts[0]"),
    ],
)
def test_v03_bad_parts_are_invalid_params_with_a_path(part: Any, where: str) -> None:
    params = {"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [part]}}
    with pytest.raises(InvalidParamsError) as info:
        v0_3.decode(Operation.SEND, params)
    assert info.value.code == -32602
    assert "params.message.parts[0]" in info.value.message and where in info.value.message


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}, "params.message.role"),
        ({"message": {"messageId": "m", "role": "user", "parts": {}}}, "params.message.parts"),
        ({"message": "hi"}, "params.message"),
        ({"message": {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]},
          "configuration": {"blocking": "yes"}}, "params.configuration.blocking"),
        ({"message": {"messageId": "", "role": "user", "parts": [{"kind": "text", "text": "x"}]}}, "messageId"),
        ({"message": {"messageId": "m", "role": "user", "parts": []}}, "parts"),
    ],
)
def test_v03_bad_send_params(params: Any, where: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        v0_3.decode(Operation.SEND, params)
    assert where in info.value.message


def test_v03_decode_result_rejects_unknown_kind_and_state() -> None:
    with pytest.raises(InvalidParamsError, match="kind"):
        v0_3.decode_result(Operation.STREAM, {"kind": "surprise"})
    with pytest.raises(InvalidParamsError, match="state"):
        v0_3.decode_result(Operation.GET, {"kind": "task", "id": "t", "contextId": "c",
                                           "status": {"state": "TASK_STATE_WORKING"}})
