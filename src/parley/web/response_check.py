"""The inspector's response check: a JSON-RPC response or SSE frame from any agent, checked against the
schema of its protocol version, so that the console can mark what is wrong and why.

1.0 (A2A 1.0 sections 9.4 and 3.2): the JSON-RPC 2.0 envelope (`jsonrpc` "2.0", the request's `id`, exactly one
of `result` and `error`, an error's integer `code` and string `message`), then the result as the a2a.proto
message its method returns (SendMessage: SendMessageResponse, a stream's frames: StreamResponse, GetTask and
CancelTask: Task, ListTasks: ListTasksResponse), parsed by ProtoJSON, every REQUIRED field present and the
`payload` oneof set (parley.web.card_check.proto_checks).

HTTP+JSON (1.0, section 11): no envelope; a success is the same a2a.proto message, an error google.rpc.Status.

gRPC (1.0, section 10): a response (or stream message) is read as its ProtoJSON and checked as HTTP+JSON's; a
failed call's status must carry a google.rpc.ErrorInfo of domain `a2a-protocol.org` with a reason (10.6).

0.3 HTTP+JSON: the ProtoJSON of the 0.3 a2a.proto (`content` parts, `TASK_STATE_*`), read by Parley's 0.3
HTTP+JSON dialect (parley.protocol.v0_3_rest), which names the field path of the first thing wrong.

0.3: the same envelope, then the result as the 0.3 JSON schema's kind-tagged objects (`kind` one of task,
message, status-update, artifact-update where the method allows it), read by Parley's 0.3 dialect (required
properties and types; the field path of the first one wrong).
"""

from __future__ import annotations

from typing import Any

from parley.protocol import v0_3, v0_3_rest, v1_0
from parley.protocol.errors import A2AError
from parley.protocol.operations import Operation
from parley.web.card_check import Check, proto_checks

# what each method's result is, in a2a.proto (1.0)
V1_RESULTS = {"SendMessage": "SendMessageResponse", "SendStreamingMessage": "StreamResponse",
              "SubscribeToTask": "StreamResponse", "GetTask": "Task", "CancelTask": "Task",
              "ListTasks": "ListTasksResponse"}
# the kinds a 0.3 result may have, per method (specification/json/a2a.json, the *SuccessResponse types)
V03_KINDS = {"message/send": {"task", "message"},
             "message/stream": {"task", "message", "status-update", "artifact-update"},
             "tasks/resubscribe": {"task", "message", "status-update", "artifact-update"},
             "tasks/get": {"task"}, "tasks/cancel": {"task"}}


def method_names(version: str) -> list[str]:
    """The methods the inspector can call in `version` ("1.0" or "0.3")."""
    return list(V1_RESULTS) if version == "1.0" else [*V03_KINDS, "tasks/list"]


def check_response(version: str, method: str, request_id: Any, body: Any) -> list[Check]:
    """Every statement about one JSON-RPC response (or one SSE frame's data) of `method`, true or not."""
    if not isinstance(body, dict):
        return [Check(False, "the response is not a JSON object (JSON-RPC 2.0 section 5)")]
    checks = [Check(body.get("jsonrpc") == "2.0", f"`jsonrpc` is \"2.0\" (got {body.get('jsonrpc')!r})"),
              Check("id" in body and body["id"] == request_id,
                    f"`id` is the request's ({request_id!r}; got {body.get('id', '<missing>')!r})")]
    has_result, has_error = "result" in body, "error" in body
    if has_result == has_error:
        checks.append(Check(False, "exactly one of `result` and `error` is present"))
        return checks
    if has_error:
        error = body["error"]
        ok = isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
        checks.append(Check(ok, "`error` has an integer `code` and a string `message`"))
        return checks
    result = body["result"]
    if version == "1.0":
        return checks + _v1_result(method, result)
    return checks + _v03_result(method, result)


def check_rest(method: str, status: int, body: Any) -> list[Check]:
    """One HTTP+JSON answer (A2A 1.0 section 11) of `method` (its JSON-RPC name), or one SSE frame's data
    (status 200): a success is the bare a2a.proto result; an error the google.rpc.Status JSON of section 11.6
    (`error.code` the HTTP status, a string `message`, each of `details` with an `@type`)."""
    if 200 <= status < 300:
        return _v1_result(method, body)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return [Check(False, f"an HTTP {status} answer's body is {{\"error\": google.rpc.Status}} (section 11.6)")]
    details = error.get("details", [])
    return [Check(error.get("code") == status, f"`error.code` is the HTTP status ({status}; got {error.get('code')!r})"),
            Check(isinstance(error.get("message"), str), "`error.message` is a string"),
            Check(isinstance(details, list) and all(isinstance(d, dict) and "@type" in d for d in details),
                  "`error.details` is a list of objects with an `@type`")]


def check_grpc(method: str, status: str, body: Any) -> list[Check]:
    """One gRPC answer (A2A 1.0 section 10) of `method`: status "OK" and the response's ProtoJSON, checked as
    an HTTP+JSON result; or another status and the error as parley.web.inspector_grpc.error_json reads it."""
    if status == "OK":
        return _v1_result(method, body)
    error = body.get("error") if isinstance(body, dict) else None
    rich = error.get("richStatus") if isinstance(error, dict) else None
    if not isinstance(rich, dict):
        return [Check(False, f"the {status} status carries a google.rpc.Status in `grpc-status-details-bin` "
                             "(A2A 1.0 section 10.6: an A2A error MUST carry a google.rpc.ErrorInfo there)")]
    infos = [d for d in rich.get("details", []) if str(d.get("@type", "")).endswith("/google.rpc.ErrorInfo")]
    return [Check(rich.get("code") == error.get("code"),
                  f"the google.rpc.Status's code is the call's ({error.get('code')}; got {rich.get('code')!r})"),
            Check(any(i.get("domain") == "a2a-protocol.org" and i.get("reason") for i in infos),
                  "a google.rpc.ErrorInfo with domain `a2a-protocol.org` and a reason is in the details "
                  "(A2A 1.0 section 10.6)")]


def check_rest_v03(method: str, status: int, body: Any) -> list[Check]:
    """One A2A 0.3 HTTP+JSON answer of `method` (its 0.3 JSON-RPC name), or one SSE frame's data (status 200):
    a success is the ProtoJSON of the 0.3 a2a.proto result; an error a JSON object."""
    op = v0_3.METHODS.get(method)
    if op is None:
        return [Check(False, f"{method!r} is not an A2A 0.3 method")]
    if not 200 <= status < 300:
        return [Check(isinstance(body, dict), f"the HTTP {status} answer's body is a JSON object")]
    checks = []
    if op in (Operation.SEND, Operation.STREAM, Operation.SUBSCRIBE) and isinstance(body, dict):
        keys = [k for k in ("task", "msg", "message", "statusUpdate", "artifactUpdate") if k in body]
        allowed = "task, message" if op is Operation.SEND else "task, message, statusUpdate, artifactUpdate"
        checks.append(Check(len(keys) == 1 and (op is not Operation.SEND or keys[0] in ("task", "msg", "message")),
                            f"exactly one of {allowed} is set (got {', '.join(keys) or 'none'})"))
    try:
        v0_3_rest.decode_result(op, body)
    except A2AError as exc:
        return [*checks, Check(False, f"the answer is not an A2A 0.3 HTTP+JSON result: {exc.message}")]
    return [*checks, Check(True, "the answer reads as the A2A 0.3 a2a.proto result (ProtoJSON): every required "
                                 "field present, with the right types")]


def _v1_result(method: str, result: Any) -> list[Check]:
    name = V1_RESULTS.get(method)
    if name is None:
        return [Check(False, f"{method!r} is not a method the inspector knows the result of")]
    found = proto_checks(result, name, strict=False)
    if found is not None:
        return found
    op = v1_0.METHODS[method]
    try:
        if op in (Operation.STREAM, Operation.SUBSCRIBE):
            v1_0.decode_stream_event(result)
        else:
            v1_0.decode_result(op, result)
    except A2AError as exc:
        return [Check(False, f"`result` is not an A2A 1.0 {name}: {exc.message}")]
    return [Check(True, f"`result` decodes as an A2A 1.0 {name} (Parley's model; install the grpc extra for "
                        "the a2a.proto check)")]


def _v03_result(method: str, result: Any) -> list[Check]:
    op = v0_3.METHODS.get(method)
    if op is None:
        return [Check(False, f"{method!r} is not an A2A 0.3 method")]
    checks = []
    kinds = V03_KINDS.get(method)
    if kinds is not None:
        kind = result.get("kind") if isinstance(result, dict) else None
        checks.append(Check(kind in kinds, f"`result.kind` is one of {', '.join(sorted(kinds))} (got {kind!r})"))
    try:
        v0_3.decode_result(op, result)
    except A2AError as exc:
        return [*checks, Check(False, f"`result` does not match the A2A 0.3 schema: {exc.message}")]
    return [*checks, Check(True, "`result` has every property the A2A 0.3 schema requires, with the right types")]


__all__ = ["V03_KINDS", "V1_RESULTS", "check_grpc", "check_response", "check_rest", "check_rest_v03", "method_names"]
