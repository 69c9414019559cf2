"""The committed proto and generated code, protobuf <-> canonical conversion, client error mapping."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from grpc_support import WAIT  # noqa: F401

from support import require

# isort: split
# (grpc_support first: without grpcio it skips this module, or fails it under CI=true)
import grpc
import grpc.aio
from google.protobuf import any_pb2, descriptor_pb2, json_format
from google.rpc import error_details_pb2, status_pb2

from parley.client.errors import ClientError
from parley.client.grpc import error_from_rpc, parse_target
from parley.grpc import a2a_pb2 as pb
from parley.grpc import a2a_pb2_grpc, convert
from parley.protocol import models as m
from parley.protocol.errors import (
    A2AError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from parley.protocol.operations import Operation
from parley.server.grpc_server import status_details

REPO = Path(__file__).resolve().parents[2]
PROTO = REPO / "proto" / "lf" / "a2a" / "v1" / "a2a.proto"
GEN_SCRIPT = REPO / "scripts" / "gen_grpc.sh"


def _file_proto(serialized: bytes) -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto.FromString(serialized)
    for msg in fd.message_type:
        _strip_json_names(msg)
    return fd


def _strip_json_names(msg: descriptor_pb2.DescriptorProto) -> None:
    for field in msg.field:
        field.ClearField("json_name")
    for nested in msg.nested_type:
        _strip_json_names(nested)


def _compile(tmp_path: Path) -> descriptor_pb2.FileDescriptorProto:
    protoc = require("grpc_tools.protoc", "dev")  # grpcio-tools
    import google.api

    googleapis = Path(google.api.__path__[0]).parents[1]
    well_known = Path(protoc.__file__).parent / "_proto"
    out = tmp_path / "a2a.pb"
    args = ["protoc", f"-I{REPO / 'proto'}", f"-I{googleapis}", f"-I{well_known}",
            f"--descriptor_set_out={out}", "lf/a2a/v1/a2a.proto"]
    assert protoc.main(args) == 0
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return _file_proto(fds.file[-1].SerializeToString())


def test_generated_code_is_the_committed_proto(tmp_path):
    """src/parley/grpc/a2a_pb2.py was generated from proto/lf/a2a/v1/a2a.proto as it is now."""
    assert _compile(tmp_path) == _file_proto(pb.DESCRIPTOR.serialized_pb)


def test_generated_versions_match_the_script():
    pinned = re.search(r"^TOOLS_VERSION=(\S+)$", GEN_SCRIPT.read_text(), re.MULTILINE).group(1)
    assert a2a_pb2_grpc.GRPC_GENERATED_VERSION == pinned
    header = Path(pb.__file__).read_text().splitlines()[:5]
    assert "# Protobuf Python Version: 5.26.1" in header  # so that protobuf>=5 is enough at run time
    assert "ValidateProtobufRuntimeVersion" not in Path(pb.__file__).read_text()


def test_the_proto_declares_its_origin_and_license():
    head = PROTO.read_text()[:2000]
    assert "github.com/a2aproject/A2A" in head and "Apache License, Version 2.0" in head
    assert "package lf.a2a.v1;" in PROTO.read_text()
    assert "rpc QuerySkill" not in PROTO.read_text()  # a post-1.0 addition


@pytest.mark.interop
def test_same_schema_as_a2a_sdk_1_3():
    """Every message, field, enum, RPC and option of a2a-sdk 1.3's a2a.proto, except file-level language options;
    Parley's adds exactly the A2A 1.1 (dev-1.1, 28491879) generation fields, at the dev-1.1 field numbers."""
    sdk_pb = require("a2a.types.a2a_pb2", "dev")  # a2a-sdk 1.3
    ours = _file_proto(pb.DESCRIPTOR.serialized_pb)
    theirs = _file_proto(sdk_pb.DESCRIPTOR.serialized_pb)
    for fd in (ours, theirs):
        fd.ClearField("name")
        fd.ClearField("options")
    removed = set()
    for message in ours.message_type:
        for field in list(message.field):
            if (message.name, field.name, field.number) in A2A_1_1_FIELDS:
                removed.add((message.name, field.name, field.number))
                message.field.remove(field)
                if field.proto3_optional:  # its synthetic oneof, the message's last
                    assert message.oneof_decl[-1].name == f"_{field.name}"
                    del message.oneof_decl[-1]
    assert removed == A2A_1_1_FIELDS
    assert ours == theirs


A2A_1_1_FIELDS = {("Task", "generation", 7), ("TaskStatusUpdateEvent", "generation", 5),
                  ("TaskArtifactUpdateEvent", "generation", 7), ("SendMessageConfiguration", "if_generation_match", 5),
                  ("GetTaskRequest", "current_generation", 4)}


@pytest.mark.interop
def test_lives_alongside_a2a_sdk_types():
    """Both sets of lf.a2a.v1 classes load in one process (Parley's sit in a private pool) and share the wire."""
    sdk_pb = require("a2a.types.a2a_pb2", "dev")  # a2a-sdk 1.3
    assert sdk_pb.Task is not pb.Task
    ours = json_format.ParseDict({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"},
                                  "metadata": {"a": [1, "x"]}}, pb.Task())
    theirs = sdk_pb.Task.FromString(ours.SerializeToString())
    assert json_format.MessageToDict(theirs) == json_format.MessageToDict(ours)


# --- conversion ---------------------------------------------------------------------------


def _task() -> m.Task:
    msg = m.Message(message_id="m1", role=m.Role.USER, parts=[
        m.Part(text="hi", metadata={"k": "v"}),
        m.Part(raw=b"\x00\xff", media_type="application/octet-stream", filename="f.bin"),
        m.Part(url="https://example.com/x", media_type="image/png"),
        m.Part(data={"a": [True, None, "s"]}),
    ], context_id="c1", task_id="t1", extensions=["urn:e"], reference_task_ids=["t0"])
    return m.Task(
        id="t1", context_id="c1",
        status=m.TaskStatus(state=m.TaskState.WORKING, timestamp="2025-01-02T03:04:05.678Z"),
        artifacts=[m.Artifact(artifact_id="a1", parts=[m.Part(text="out")], name="n", description="d")],
        history=[msg], metadata={"x": {"y": "z"}},
    )


@pytest.mark.parametrize("event", [
    _task(),
    _task().history[0],
    m.TaskStatusUpdateEvent(task_id="t1", context_id="c1", status=m.TaskStatus(state=m.TaskState.COMPLETED),
                            metadata={"m": "n"}),
    m.TaskArtifactUpdateEvent(task_id="t1", context_id="c1", artifact=m.Artifact(artifact_id="a", parts=[
        m.Part(text="chunk")]), append=True, last_chunk=True),
], ids=["task", "message", "status", "artifact"])
def test_events_round_trip(event):
    response = convert.encode_event(event)
    assert isinstance(response, pb.StreamResponse)
    assert convert.decode_event(pb.StreamResponse.FromString(response.SerializeToString())) == event


def test_requests_round_trip():
    req = m.SendMessageRequest(
        message=_task().history[0],
        configuration=m.SendMessageConfiguration(accepted_output_modes=["text/plain"], history_length=0,
                                                 return_immediately=True),
        metadata={"k": 1.5},
    )
    message = convert.encode_request(Operation.SEND, req, tenant="echo")
    assert message.tenant == "echo" and message.configuration.HasField("history_length")
    back = convert.decode_request(Operation.SEND, message)
    assert back.tenant == "echo"
    back.tenant = None
    assert back == req
    listing = m.ListTasksRequest(context_id="c", status=m.TaskState.INPUT_REQUIRED, page_size=5,
                                 status_timestamp_after="2025-01-01T00:00:00Z", include_artifacts=True)
    assert convert.decode_request(Operation.LIST, convert.encode_request(Operation.LIST, listing)) == listing


def test_the_request_tenant_wins_over_the_transport_tenant():
    req = m.GetTaskRequest(id="t", tenant="other")
    assert convert.encode_request(Operation.GET, req, tenant="echo").tenant == "other"


def test_zero_values_the_canonical_model_requires_are_restored():
    empty = convert.decode_result(Operation.LIST, pb.ListTasksResponse())
    assert empty == m.ListTasksResponse(tasks=[], next_page_token="", page_size=0, total_size=0)
    no_context = pb.SendMessageResponse(task=pb.Task(id="t", status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED)))
    assert convert.decode_result(Operation.SEND, no_context).context_id == ""
    card = convert.decode_result(Operation.EXTENDED_CARD, pb.AgentCard(name="n", description="d", version="1"))
    assert card.skills == [] and card.supported_interfaces == []
    assert convert.decode_result(Operation.PUSH_LIST, pb.ListTaskPushNotificationConfigsResponse()).configs == []


def test_invalid_responses_are_invalid_agent_response():
    with pytest.raises(InvalidAgentResponseError):
        convert.decode_result(Operation.SEND, pb.SendMessageResponse())
    with pytest.raises(InvalidAgentResponseError, match="role"):
        convert.decode_event(pb.StreamResponse(message=pb.Message(message_id="m", parts=[pb.Part(text="x")])))


def test_invalid_requests_name_the_field():
    with pytest.raises(InvalidParamsError, match="messageId"):
        convert.decode_request(Operation.SEND, pb.SendMessageRequest(
            message=pb.Message(role=pb.ROLE_USER, parts=[pb.Part(text="x")])))
    with pytest.raises(InvalidParamsError, match="statusTimestampAfter|Timestamp|timestamp"):
        convert.encode_request(Operation.LIST, m.ListTasksRequest(status_timestamp_after="yesterday"))


# --- client error mapping and targets ---------------------------------------------------------


def _rpc_error(code: grpc.StatusCode, details: str, trailer: bytes | None = None) -> grpc.aio.AioRpcError:
    trailing = grpc.aio.Metadata(("grpc-status-details-bin", trailer)) if trailer is not None else grpc.aio.Metadata()
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details)


def test_errors_map_by_error_info_reason():
    err = VersionNotSupportedError("too new")
    mapped = error_from_rpc(_rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "too new", status_details(err)), "x")
    assert type(mapped) is VersionNotSupportedError and mapped.message == "too new"
    mapped = error_from_rpc(_rpc_error(grpc.StatusCode.NOT_FOUND, "gone", status_details(TaskNotFoundError("gone"))),
                            "x")
    assert type(mapped) is TaskNotFoundError


def test_errors_without_a2a_details_map_by_status_code():
    foreign = status_pb2.Status(code=5, message="m")
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason="TASK_NOT_FOUND", domain="example.com"))
    foreign.details.append(detail)
    mapped = error_from_rpc(_rpc_error(grpc.StatusCode.NOT_FOUND, "m", foreign.SerializeToString()), "x")
    assert type(mapped) is A2AError and mapped.grpc_status == "NOT_FOUND"
    assert type(error_from_rpc(_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "bad"), "x")) is InvalidParamsError
    assert type(error_from_rpc(_rpc_error(grpc.StatusCode.UNIMPLEMENTED, "no"), "x")) is UnsupportedOperationError
    assert type(error_from_rpc(_rpc_error(grpc.StatusCode.INTERNAL, "boom"), "x")) is InternalError
    assert type(error_from_rpc(_rpc_error(grpc.StatusCode.INTERNAL, "boom", b"\xff\xff"), "x")) is InternalError
    unreachable = error_from_rpc(_rpc_error(grpc.StatusCode.UNAVAILABLE, "refused"), "h:1")
    assert isinstance(unreachable, ClientError) and "cannot reach h:1" in str(unreachable)


@pytest.mark.parametrize(("url", "target", "secure"), [
    ("127.0.0.1:50051", "127.0.0.1:50051", False),
    ("grpc://agents.example.com:7000", "agents.example.com:7000", False),
    ("http://localhost:8080/a2a", "localhost:8080", False),
    ("grpcs://agents.example.com", "agents.example.com:443", True),
    ("https://agents.example.com:8443/a2a/echo", "agents.example.com:8443", True),
    ("grpc://[::1]:9000", "[::1]:9000", False),
])
def test_interface_urls_become_targets(url, target, secure):
    assert parse_target(url) == (target, secure)


def test_non_grpc_urls_are_refused():
    with pytest.raises(ClientError):
        parse_target("ftp://example.com")


def test_the_binding_is_registered():
    from parley.client import transports

    assert transports.supported("GRPC", "1.0") and not transports.supported("GRPC", "0.3")
    assert "parley.client.grpc" in sys.modules
