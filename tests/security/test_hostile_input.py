"""Hostile input, one case at a time, on every binding where it applies: the precise answer, never a 500.

Each case names the status and the error a client gets: JSON-RPC -32700 (parse error), -32600 (invalid
request), -32602 (invalid params), -32001 (task not found) with HTTP 200, or 413 / 415 for transport
failures; HTTP+JSON 400 / 404 / 413 / 415 with a google.rpc.Status whose ErrorInfo names the reason;
gRPC INVALID_ARGUMENT / NOT_FOUND / RESOURCE_EXHAUSTED. Requests go over real HTTP and gRPC to a secured
server (tests/security/fuzzkit.py: principal P1 owns tasks, P2 sends the hostile requests) with explicit
input limits, so a change of the defaults does not change what is tested. A request without a valid
key gets 401, or the same precise answer (authentication first is allowed: A2A 1.0 section 7.4).

After every test the server's log holds no ERROR record, no traceback and no "unexpected"; at the end,
P1's tasks read exactly as before.

The known 500s of the issue: JSON nested 1,000+ deep (RecursionError), invalid UTF-8 inside a JSON
string (UnicodeDecodeError), a 0.3 `message.role` that is a list or an object (-32603 instead of
-32602), a client that disconnects mid-upload (logged as an unexpected error).
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from parley.protocol.codec import json_depth
from parley.settings import LimitSettings
from support import needs

from .fuzzkit import (
    ASK,
    HAVE_GRPC,
    HTTP_BINDINGS,
    KINDS,
    SECRET,
    V1,
    Secured,
    data_part,
    deep_list,
    deep_object,
    deep_send_bytes,
    error_of,
    expect,
    expect_or_unauthenticated,
    grpc_call,
    headers_for,
    p1_snapshot,
    result_of,
    secured_server,
    send_request,
    task_of,
    text_parts,
)

if HAVE_GRPC:
    from parley.grpc import a2a_pb2 as pb

LIMITS = LimitSettings(max_parts=64, max_text_bytes=1 << 20, max_file_bytes=1 << 20, max_metadata_bytes=64 * 1024,
                       max_metadata_depth=16, max_json_depth=64)
BODY_LIMIT = 4 << 20  # max_body_bytes: ids of a million characters fit, the 413 test sends more
MILLION = 1_000_000
needs_grpc = needs("grpc", "grpc")


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Secured, list[bytes]]]:
    with secured_server(limits=LIMITS, max_body_bytes=BODY_LIMIT) as srv:
        yield srv, p1_snapshot(srv)


@pytest.fixture(scope="module")
def srv(world: tuple[Secured, list[bytes]]) -> Secured:
    return world[0]


@pytest.fixture(scope="module")
def http(srv: Secured) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=srv.url, timeout=30) as client:
        yield client


@pytest.fixture(autouse=True)
def clean_log(request: pytest.FixtureRequest) -> Iterator[None]:
    """No test may leave an ERROR record, a traceback or "unexpected" in the server's log."""
    if "srv" not in request.fixturenames:
        yield
        return
    srv: Secured = request.getfixturevalue("srv")
    srv.log.clear()
    failed_before = request.session.testsfailed
    with srv.log.isolated():
        yield
    bad = srv.log.bad()
    if bad and request.session.testsfailed == failed_before:  # a failed test already says what went wrong
        pytest.fail(f"the server logged {len(bad)} errors:\n" + srv.log.describe(bad, 3))


@pytest.fixture(params=HTTP_BINDINGS)
def binding(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=[True, False], ids=["P2", "no-key"])
def auth(request: pytest.FixtureRequest) -> bool:
    return request.param


def post(http: httpx.Client, srv: Secured, binding: str, path: str, body: bytes, *, auth: bool = True,
         **headers: str) -> httpx.Response:
    return http.post(path, content=body, headers=headers_for(binding, srv.p2_key if auth else None, **headers))


def check(resp: httpx.Response, binding: str, auth: bool, kind: str, *fragments: str) -> str:
    if auth:
        return expect(resp, binding, kind, *fragments)
    return expect_or_unauthenticated(resp, binding, kind, *fragments)


# --- nesting ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
def test_json_nested_deeper_than_the_limit_is_invalid_request(http, srv, binding, auth, depth):
    """Known 500: JSON nested 1,000+ deep raised RecursionError. Refused before parsing, whatever the nesting."""
    nested = b"[" * depth + b"]" * depth
    path, body = send_request(binding, message_extra=b',"metadata":{"deep":' + nested + b"}")
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "invalid_request",
          "deeper than the limit of 64")


@pytest.mark.parametrize("shape", ["array-body", "object-body", "unterminated", "in-params"])
def test_deep_bodies_of_every_shape(http, srv, binding, auth, shape):
    depth = 5000
    path, body = send_request(binding)
    if shape == "array-body":
        body = b"[" * depth + b"]" * depth
    elif shape == "object-body":
        body = b'{"a":' * depth + b"1" + b"}" * depth
    elif shape == "unterminated":
        body = b"[" * depth
    else:
        body = body[:-1] + b',"extra":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "invalid_request", "deeper than the limit")


def test_nesting_at_the_limit_parses_and_then_meets_the_metadata_limit(http, srv, binding):
    """A body exactly max_json_depth deep parses; its 60-deep metadata is over max_metadata_depth (-32602)."""
    levels = metadata_levels_for(binding, LIMITS.max_json_depth)
    path, body = send_request(binding, message_extra=b',"metadata":' + json.dumps(deep_object(levels)).encode())
    assert json_depth(body) == LIMITS.max_json_depth
    expect(post(http, srv, binding, path, body), binding, "invalid_params", "max_metadata_depth", "metadata")


def metadata_levels_for(binding: str, depth: int) -> int:
    """How many levels a message's metadata needs for the whole body to nest `depth` levels (the metadata
    object sits in the envelope, the params and the message over JSON-RPC; in the message over HTTP+JSON)."""
    return depth - (3 if binding.startswith("JSONRPC") else 2)


def test_brackets_inside_strings_do_not_count(http, srv, binding):
    path, body = send_request(binding, text=json.dumps("[{" * 5000).encode())
    task = task_of(result_of(post(http, srv, binding, path, body), binding))
    assert task["id"]


def test_a_high_json_depth_limit_does_not_exhaust_the_stack(binding):
    """With max_json_depth at its allowed maximum (500), a body of that depth parses and every later step
    copes (the metadata limit refuses it), and one level more is refused before parsing."""
    limits = LimitSettings(max_json_depth=500, max_metadata_depth=16)
    with secured_server(limits=limits, grpc=False, p1_tasks=False) as srv2, httpx.Client(base_url=srv2.url,
                                                                                          timeout=30) as http2:
        for depth, kind in [(500, "invalid_params"), (501, "invalid_request")]:
            levels = metadata_levels_for(binding, depth)
            path, body = send_request(binding, message_extra=b',"metadata":{"a":' + json.dumps(
                deep_list(levels - 1)).encode() + b"}")
            assert json_depth(body) == depth
            expect(http2.post(path, content=body, headers=headers_for(binding, srv2.p2_key)), binding, kind)
        assert not srv2.log.bad(), srv2.log.describe(srv2.log.bad())


# --- encodings: invalid UTF-8, lone surrogates, NUL -------------------------------------------------------------

BAD_UTF8 = {
    "0xff": b"\xff",
    "lone-continuation": b"\x80",
    "truncated-2-byte": b"\xc3",
    "truncated-3-byte": b"\xe2\x82",
    "overlong-slash": b"\xc0\xaf",
    "overlong-nul": b"\xc0\x80",
    "cesu-surrogate": b"\xed\xa0\x80",
    "above-u10ffff": b"\xf4\x90\x80\x80",
    "5-byte-form": b"\xf8\x88\x80\x80\x80",
}


@pytest.mark.parametrize("junk", list(BAD_UTF8.values()), ids=list(BAD_UTF8))
def test_invalid_utf8_inside_a_string_is_a_parse_error(http, srv, binding, auth, junk):
    """Known 500: invalid UTF-8 inside a JSON string raised UnicodeDecodeError."""
    path, body = send_request(binding, text=b'"ab' + junk + b'cd"')
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "parse", "UTF-8")


@pytest.mark.parametrize("where", ["key", "message-id", "after-the-body", "before-the-body"])
def test_invalid_utf8_elsewhere_is_a_parse_error(http, srv, binding, where):
    path, body = send_request(binding)
    if where == "key":
        body = body[:-1] + b',"k\xff":1}'
    elif where == "message-id":
        body = body.replace(b'"messageId":"', b'"messageId":"\xfe', 1)
    elif where == "after-the-body":
        body = body + b"\xff"
    else:
        body = b"\xff" + body
    expect(post(http, srv, binding, path, body), binding, "parse")


@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udfff", b"\\udc00\\ud800", b"\\ud800x", b"\\uDBFF\\u0041"])
def test_lone_surrogate_escapes_are_a_parse_error(http, srv, binding, auth, escape):
    path, body = send_request(binding, text=b'"a' + escape + b'b"')
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "parse")


def test_a_surrogate_pair_escape_is_text(http, srv, binding):
    path, body = send_request(binding, text=b'"smile \\ud83d\\ude00"')
    task = task_of(result_of(post(http, srv, binding, path, body), binding))
    assert "smile \U0001f600" in json.dumps(task, ensure_ascii=False)


def test_raw_nul_bytes_are_a_parse_error(http, srv, binding, auth):
    """A raw control character inside a string (NUL) or between tokens is not JSON."""
    path, body = send_request(binding, text=b'"a\x00b"')
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "parse")
    path, body = send_request(binding)
    check(post(http, srv, binding, path, body[:1] + b"\x00" + body[1:], auth=auth), binding, auth, "parse")


def test_escaped_nul_is_ordinary_text(http, srv, binding):
    """`\\u0000` is a character like any other: stored and echoed back intact."""
    path, body = send_request(binding, text=b'"before\\u0000after"')
    task = task_of(result_of(post(http, srv, binding, path, body), binding))
    texts = [p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", a.get("content", []))]
    assert any(t.startswith("echo: before\x00after") for t in texts), task  # the agent got it intact


def test_nul_in_a_task_id_is_task_not_found(http, srv, binding):
    if binding.startswith("JSONRPC"):
        method = "GetTask" if binding.endswith("1.0") else "tasks/get"
        body = b'{"jsonrpc":"2.0","id":1,"method":"' + method.encode() + b'","params":{"id":"a\\u0000b"}}'
        resp = post(http, srv, binding, "/", body)
    else:
        prefix = "" if binding.endswith("1.0") else "/v1"
        resp = http.get(f"{prefix}/tasks/a%00b", headers=headers_for(binding, srv.p2_key))
    expect(resp, binding, "task_not_found")


# --- duplicate keys -------------------------------------------------------------------------------------------


def test_duplicate_keys_the_last_one_counts(http, srv, binding):
    """Duplicate members: the last value counts (as in JSON.parse and Python's json), everywhere in the body."""
    bad_message = b'{"messageId":"m","role":"nobody","parts":[]}'
    path, good = send_request(binding)
    # an invalid message first, then the valid one: accepted
    body = good.replace(b'{"message":', b'{"message":' + bad_message + b',"message":', 1)
    task = task_of(result_of(post(http, srv, binding, path, body), binding))
    assert task["id"]
    # the valid message first, then the invalid one: refused, naming the message
    body = good[:-1] + b',"message":' + bad_message + b"}"
    if binding.startswith("JSONRPC"):  # the params object ends one brace earlier
        body = good[:-2] + b',"message":' + bad_message + b"}}"
    expect(post(http, srv, binding, path, body), binding, "invalid_params", "message")


def test_duplicate_envelope_members_the_last_one_counts(http, srv):
    for binding in ("JSONRPC-1.0", "JSONRPC-0.3"):
        method = b"GetTask" if binding.endswith("1.0") else b"tasks/get"
        body = (b'{"jsonrpc":"2.0","id":1,"id":"second","method":"Bogus","method":"' + method
                + b'","params":{"id":"x"},"params":{"id":"y"}}')
        resp = post(http, srv, binding, "/", body)
        expect(resp, binding, "task_not_found", "'y'")
        assert resp.json()["id"] == "second"


# --- numbers --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("literal", [b"1e400", b"-1e400", b"1e999999", b"1E+2147483648"])
def test_numbers_out_of_the_double_range_are_a_parse_error(http, srv, binding, auth, literal):
    path, body = send_request(binding, params_extra=b',"configuration":{"historyLength":' + literal + b"}")
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "parse", "out of range")


def test_a_json_rpc_id_out_of_range_is_a_parse_error(http, srv):
    for binding in ("JSONRPC-1.0", "JSONRPC-0.3"):
        resp = post(http, srv, binding, "/", b'{"jsonrpc":"2.0","id":1e400,"method":"GetTask","params":{"id":"x"}}')
        expect(resp, binding, "parse", "out of range")


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"0x10", b"01", b"1.", b".5", b"+1"])
def test_numbers_json_does_not_have_are_a_parse_error(http, srv, binding, literal):
    path, body = send_request(binding, params_extra=b',"configuration":{"historyLength":' + literal + b"}")
    expect(post(http, srv, binding, path, body), binding, "parse")


@pytest.mark.parametrize("digits", [309, 400, 4000, 5000])
def test_integers_that_do_not_fit_a_double_are_invalid_params(http, srv, binding, digits):
    """Free-form values are carried as doubles (gRPC, ProtoJSON): a longer integer is refused, not stored.
    (Integers longer than the JSON parser takes at all, 4300 digits, are a parse error.)"""
    path, body = send_request(binding, message_extra=b',"metadata":{"n":' + b"9" * digits + b"}")
    resp = post(http, srv, binding, path, body)
    if digits <= 4300:
        expect(resp, binding, "invalid_params", "does not fit a double", "metadata")
    else:
        expect(resp, binding, "parse", "out of range")


@pytest.mark.parametrize("size", [2**31, 2**63, 2**64, 10**30])
def test_page_sizes_out_of_range_are_invalid_params(http, srv, binding, size):
    if binding.startswith("JSONRPC"):
        method = "ListTasks" if binding.endswith("1.0") else "tasks/list"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"pageSize": size}}).encode()
        resp = post(http, srv, binding, "/", body)
    else:
        prefix = "" if binding.endswith("1.0") else "/v1"
        resp = http.get(f"{prefix}/tasks", params={"pageSize": str(size)}, headers=headers_for(binding, srv.p2_key))
    expect(resp, binding, "invalid_params", "pageSize")


@pytest.mark.parametrize("value", [1.5, -1, "1", "one", True, [1]])
def test_history_lengths_that_are_not_counts_are_invalid_params(http, srv, binding, value):
    if binding == "HTTP+JSON-0.3" and value == "1":
        pytest.skip("ProtoJSON (the 0.3 HTTP+JSON bodies) takes integers as strings")
    path, body = send_request(binding, params_extra=b',"configuration":{"historyLength":' + json.dumps(value).encode()
                              + b"}")
    expect(post(http, srv, binding, path, body), binding, "invalid_params", "historyLength")


# --- wrong JSON types for every field -------------------------------------------------------------------------

WRONG = {"bool": True, "number": 7, "float": 1.5, "string": "s", "array": [1], "object": {"x": 1}}
FREE_FORM = {"metadata", "data"}  # any JSON value is valid below these
# Fields whose absence is valid (null = absent); every other field refuses null.
OPTIONAL = {"contextId", "taskId", "metadata", "extensions", "referenceTaskIds", "configuration",
            "acceptedOutputModes", "historyLength", "returnImmediately", "blocking", "pageSize", "pageToken",
            "status", "includeArtifacts", "statusTimestampAfter", "tenant", "mediaType", "filename",
            "pushNotificationConfig", "taskPushNotificationConfig", "pushNotificationConfigId"}
LENIENT_03 = {("message", "kind")}  # 0.3's constant `kind: "message"` is not read (a client's typo is harmless)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return "float"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def _fields(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Every field below `value` that the schema types (not inside free-form values)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key), item
            if key not in FREE_FORM:
                yield from _fields(item, (*path, key))
    elif isinstance(value, list) and value:
        yield (*path, 0), value[0]
        yield from _fields(value[0], (*path, 0))


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    copy = json.loads(json.dumps(value))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return copy


def _wrong_values(path: tuple, current: Any) -> Iterator[tuple[str, Any]]:
    current_type = _json_type(current)
    name = next((p for p in reversed(path) if isinstance(p, str)), "")
    for label, value in WRONG.items():
        if label == current_type or (label == "number" and current_type == "float"):
            continue
        if label == "float" and current_type != "number":
            continue  # 1.5 is only interesting where an integer is expected
        yield label, value
    if name not in OPTIONAL and not isinstance(path[-1], int):
        yield "null", None


MESSAGE_10 = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi", "metadata": {"a": 1}}],
              "contextId": "c", "metadata": {"k": "v"}, "extensions": ["u"], "referenceTaskIds": ["t"]}
MESSAGE_03 = {"kind": "message", "messageId": "m1", "role": "user",
              "parts": [{"kind": "text", "text": "hi", "metadata": {"a": 1}}], "contextId": "c",
              "metadata": {"k": "v"}}
MESSAGE_03_REST = {"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "hi", "metadata": {"a": 1}}],
                   "contextId": "c", "metadata": {"k": "v"}}
TYPED: dict[str, dict[str, dict[str, Any]]] = {
    "JSONRPC-1.0": {
        "SendMessage": {"message": MESSAGE_10, "configuration": {"acceptedOutputModes": ["text/plain"],
                        "historyLength": 1, "returnImmediately": False}, "metadata": {"k": 1}},
        "GetTask": {"id": "@TASK@", "historyLength": 1},
        "ListTasks": {"contextId": "c", "status": "TASK_STATE_COMPLETED", "pageSize": 10, "pageToken": "",
                      "historyLength": 1, "includeArtifacts": True, "statusTimestampAfter": "2020-01-01T00:00:00Z"},
        "CancelTask": {"id": "@TASK@"},
        "SubscribeToTask": {"id": "@TASK@"},
        "GetTaskPushNotificationConfig": {"taskId": "@TASK@", "id": "c"},
        "ListTaskPushNotificationConfigs": {"taskId": "@TASK@", "pageSize": 10},
    },
    "JSONRPC-0.3": {
        "message/send": {"message": MESSAGE_03, "configuration": {"acceptedOutputModes": ["text/plain"],
                         "historyLength": 1, "blocking": True}, "metadata": {"k": 1}},
        "tasks/get": {"id": "@TASK@", "historyLength": 1},
        "tasks/cancel": {"id": "@TASK@"},
        "tasks/resubscribe": {"id": "@TASK@"},
        "tasks/pushNotificationConfig/get": {"id": "@TASK@", "pushNotificationConfigId": "c"},
    },
    "HTTP+JSON-1.0": {"message:send": {"message": MESSAGE_10, "configuration": {
        "acceptedOutputModes": ["text/plain"], "historyLength": 1, "returnImmediately": False}, "metadata": {"k": 1}}},
    "HTTP+JSON-0.3": {"message:send": {"message": MESSAGE_03_REST, "configuration": {
        "acceptedOutputModes": ["text/plain"], "historyLength": 1, "blocking": True}, "metadata": {"k": 1}}},
}
TYPED_CASES = [(b, op) for b, ops in TYPED.items() for op in ops]


@pytest.mark.parametrize(("binding_", "op"), TYPED_CASES, ids=[f"{b}-{op}" for b, op in TYPED_CASES])
def test_a_wrong_json_type_in_any_field_is_invalid_params(http, srv, binding_, op):
    """Every typed field, given every JSON type it does not take (null where it is required): -32602 / 400
    INVALID_PARAMS naming the field; never -32603. Optional fields take null (absent); values below
    `metadata` and `data` are free-form."""
    params = json.loads(json.dumps(TYPED[binding_][op]).replace("@TASK@", srv.p2_task_ids[0]))
    failures, tried = [], 0
    for path, current in list(_fields(params)):
        for label, value in _wrong_values(path, current):
            tried += 1
            new = _replaced(params, path, value)
            if binding_.startswith("JSONRPC"):
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": op, "params": new}).encode()
                resp = post(http, srv, binding_, "/", body)
            else:
                prefix = "" if binding_.endswith("1.0") else "/v1"
                resp = post(http, srv, binding_, f"{prefix}/{op}", json.dumps(new).encode())
            where = ".".join(str(p) for p in path)
            try:
                if binding_ == "JSONRPC-0.3" and tuple(p for p in path if isinstance(p, str))[-2:] in LENIENT_03:
                    if resp.json().get("error"):
                        expect(resp, binding_, "invalid_params")
                    continue
                message = expect(resp, binding_, "invalid_params")
                named = "params" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
                parent = "params" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[:-1])
                # a required member set to null is a missing member: its object may be what is named
                assert named in message or (value is None and f"`{parent}`" in message), (
                    f"the message does not name `{named}`: {message}")
            except AssertionError as exc:
                failures.append(f"{where} = {label}: {exc}")
    assert tried >= 3
    assert not failures, f"{len(failures)} of {tried}:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize("role", [["user"], {"role": "user"}, ["ROLE_USER"], 7, True, None], ids=str)
def test_a_0_3_role_that_is_not_a_string_is_invalid_params(http, srv, role):
    """Known 500: a 0.3 message.role that is a list or an object answered -32603 (unhashable in a dict
    lookup); on 0.3 JSON-RPC and 0.3 HTTP+JSON it is -32602 / 400 naming `params.message.role`.
    (ProtoJSON takes an enum's number: role 1 is ROLE_USER over 0.3 HTTP+JSON, 7 is no role.)"""
    for binding in ("JSONRPC-0.3", "HTTP+JSON-0.3"):
        path, body = send_request(binding, message_extra=b',"role":' + json.dumps(role).encode())
        expect(post(http, srv, binding, path, body), binding, "invalid_params", "params.message.role")
        path, body = send_request(binding, message_extra=b',"role":' + json.dumps(role).encode())
        expect_or_unauthenticated(post(http, srv, binding, path, body, auth=False), binding, "invalid_params")


@pytest.mark.parametrize("value", [["text"], {"k": 1}, 7, None])
def test_other_0_3_discriminators_that_are_not_strings(http, srv, value):
    """The same unhashable-lookup shape elsewhere in 0.3: part kinds, task states, roles in REST."""
    raw = json.dumps(value).encode()
    path, body = send_request("JSONRPC-0.3", parts=b'[{"kind":' + raw + b',"text":"x"}]')
    expect(post(http, srv, "JSONRPC-0.3", path, body), "JSONRPC-0.3", "invalid_params", "kind")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/list", "params": {"status": value}}).encode()
    resp = post(http, srv, "JSONRPC-0.3", "/", body)
    if value is None:
        result_of(resp, "JSONRPC-0.3")  # no status filter
    else:
        expect(resp, "JSONRPC-0.3", "invalid_params", "status")


# --- sizes: ids, parts, metadata, text -------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["messageId", "taskId", "contextId"])
def test_message_ids_a_million_characters_long_are_invalid_params(http, srv, binding, auth, field):
    path, body = send_request(binding)
    huge = b'"' + b"i" * MILLION + b'"'
    if field == "messageId":
        body = body.replace(b'"messageId":"', b'"messageId":' + huge + b',"x":"', 1)
    else:
        body = body.replace(b'"role"', b'"' + field.encode() + b'":' + huge + b',"role"', 1)
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "invalid_params",
          f"an id of {MILLION} characters, over the limit of 1024", field)


def test_a_task_id_a_million_characters_long_is_task_not_found(http, srv, binding):
    huge = "t" * MILLION
    if binding.startswith("JSONRPC"):
        method = "GetTask" if binding.endswith("1.0") else "tasks/get"
        resp = post(http, srv, binding, "/", json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                                         "params": {"id": huge}}).encode())
        expect(resp, binding, "task_not_found")
    else:  # a million characters do not fit a request line: the HTTP server refuses it
        prefix = "" if binding.endswith("1.0") else "/v1"
        status, _ = raw_http(srv, f"GET {prefix}/tasks/{huge} HTTP/1.1\r\nHost: x\r\nX-API-Key: {srv.p2_key}\r\n"
                                  "A2A-Version: 1.0\r\nConnection: close\r\n\r\n".encode())
        assert status == 400
        resp = http.get(f"{prefix}/tasks/{'t' * 10_000}", headers=headers_for(binding, srv.p2_key))
        expect(resp, binding, "task_not_found")


def test_a_json_rpc_id_a_million_characters_long_is_echoed(http, srv):
    for binding, method in (("JSONRPC-1.0", "GetTask"), ("JSONRPC-0.3", "tasks/get")):
        rid = "r" * MILLION
        resp = post(http, srv, binding, "/", json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                                         "params": {"id": "nope"}}).encode())
        expect(resp, binding, "task_not_found")
        assert resp.json()["id"] == rid


def test_too_many_parts_is_invalid_params(http, srv, binding, auth):
    path, body = send_request(binding, parts=text_parts(binding, LIMITS.max_parts + 1))
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "invalid_params",
          f"{LIMITS.max_parts + 1} parts, over the limit of {LIMITS.max_parts} (limits.max_parts)")
    path, body = send_request(binding, parts=text_parts(binding, LIMITS.max_parts))
    if auth:
        assert task_of(result_of(post(http, srv, binding, path, body), binding))["id"]


def test_metadata_nested_too_deep_is_invalid_params(http, srv, binding, auth):
    too_deep = json.dumps(deep_object(LIMITS.max_metadata_depth + 1)).encode()
    path, body = send_request(binding, message_extra=b',"metadata":' + too_deep)
    check(post(http, srv, binding, path, body, auth=auth), binding, auth, "invalid_params",
          f"nesting of {LIMITS.max_metadata_depth + 1} levels, over the limit of {LIMITS.max_metadata_depth}",
          "limits.max_metadata_depth", "metadata")
    path, body = send_request(binding, message_extra=b',"metadata":' + json.dumps(
        deep_object(LIMITS.max_metadata_depth)).encode())
    if auth:
        assert task_of(result_of(post(http, srv, binding, path, body), binding))["id"]


def test_data_parts_nested_too_deep_are_invalid_params(http, srv, binding):
    path, body = send_request(binding, parts=data_part(binding, deep_object(LIMITS.max_metadata_depth + 3)))
    expect(post(http, srv, binding, path, body), binding, "invalid_params", "limits.max_metadata_depth")


def test_metadata_over_its_size_limit_is_invalid_params(http, srv, binding):
    path, body = send_request(binding, params_extra=b',"metadata":{"s":"' + b"m" * LIMITS.max_metadata_bytes + b'"}')
    expect(post(http, srv, binding, path, body), binding, "invalid_params", "limits.max_metadata_bytes")


def test_text_over_its_size_limit_is_invalid_params(http, srv, binding):
    path, body = send_request(binding, text=b'"' + b"t" * (LIMITS.max_text_bytes + 1) + b'"')
    expect(post(http, srv, binding, path, body), binding, "invalid_params", "limits.max_text_bytes")


# --- transport: Content-Type, body size, disconnects -----------------------------------------------------------


@pytest.mark.parametrize("ctype", ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=xyz", "application/xml",
                                   "application/json; charset=latin-1", "application/json; charset=utf-16", "(((",
                                   ""])
def test_bodies_that_are_not_declared_json_are_415(http, srv, binding, auth, ctype):
    path, body = send_request(binding)
    resp = post(http, srv, binding, path, body, auth=auth, **{"Content-Type": ctype})
    check(resp, binding, auth, "unsupported_media", "nsupported media type")


def test_a_body_without_a_content_type_is_415(http, srv, binding, auth):
    path, body = send_request(binding)
    headers = {k: v for k, v in headers_for(binding, srv.p2_key if auth else None).items() if k != "Content-Type"}
    check(http.post(path, content=body, headers=headers), binding, auth, "unsupported_media", "Content-Type")


@pytest.mark.parametrize("ctype", ["application/json", "application/a2a+json", "application/json; charset=UTF-8",
                                   "Application/JSON", "application/vnd.example+json"])
def test_json_media_types_are_accepted(http, srv, binding, ctype):
    path, body = send_request(binding)
    assert task_of(result_of(post(http, srv, binding, path, body, **{"Content-Type": ctype}), binding))["id"]


def test_rest_requests_without_a_body_need_no_content_type(http, srv):
    for binding, prefix in (("HTTP+JSON-1.0", ""), ("HTTP+JSON-0.3", "/v1")):
        headers = {k: v for k, v in headers_for(binding, srv.p2_key).items() if k != "Content-Type"}
        resp = http.post(f"{prefix}/tasks/{srv.p2_task_ids[0]}:cancel", headers=headers)
        assert resp.status_code == 400 and error_of(resp, binding)[0] == "TASK_NOT_CANCELABLE", resp.text


def test_a_body_over_max_body_bytes_is_413(srv, binding, auth):
    path, body = send_request(binding, text=b'"' + b"b" * BODY_LIMIT + b'"')
    with httpx.Client(base_url=srv.url, timeout=30) as own:  # the server may close a connection it did not read
        check(post(own, srv, binding, path, body, auth=auth), binding, auth, "too_large", f"{BODY_LIMIT} bytes")


def test_a_chunked_body_over_max_body_bytes_is_413(srv, binding):
    path, body = send_request(binding, text=b'"' + b"c" * BODY_LIMIT + b'"')

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(body), 256 * 1024):
            yield body[i:i + 256 * 1024]

    with httpx.Client(base_url=srv.url, timeout=30) as own:
        resp = own.post(path, content=chunks(), headers=headers_for(binding, srv.p2_key))
    assert "content-length" not in resp.request.headers
    expect(resp, binding, "too_large", f"{BODY_LIMIT} bytes")


def raw_http(srv: Secured, request: bytes, *, close_after: float | None = None) -> tuple[int | None, bytes]:
    """Send raw bytes on a new connection; the status and body of the answer (None: no answer read)."""
    with socket.create_connection(("127.0.0.1", srv.live.port), timeout=30) as sock:
        sock.sendall(request)
        if close_after is not None:
            time.sleep(close_after)
            return None, b""
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return (int(head.split(b" ")[1]) if head else None), body


@pytest.mark.parametrize("how", ["content-length", "chunked", "headers-only", "one-byte"])
def test_a_client_that_disconnects_mid_upload_is_not_a_server_error(srv, binding, how):
    """Known problem: a client that went away mid-upload was logged as an unexpected error. The server
    finishes with the request without an ERROR record, a traceback or "unexpected" in its log."""
    path, body = send_request(binding)
    probe = f"probe={uuid.uuid4().hex}"
    head = (f"POST {path}?{probe} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {srv.p2_key}\r\n"
            f"Content-Type: application/json\r\nA2A-Version: {'1.0' if binding.endswith('1.0') else '0.3'}\r\n")
    if how == "chunked":
        partial = head + "Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n"
        data = partial.encode() + body[: len(body) // 2]
    else:
        partial = head + f"Content-Length: {len(body) + 100_000}\r\n\r\n"
        data = partial.encode() + {"content-length": body, "headers-only": b"", "one-byte": body[:1]}[how]
    with socket.create_connection(("127.0.0.1", srv.live.port), timeout=30) as sock:
        sock.sendall(data)
        assert srv.observer.wait_started(probe), "the app was never called"  # it now waits for the rest
    done, raised = srv.observer.wait(probe)  # the socket is closed: the server must let go of the request
    assert done, "the server never finished the request whose client went away"
    assert raised is None, f"the app raised {raised}"
    bad = srv.log.bad()
    assert not bad, srv.log.describe(bad)


def test_a_client_that_disconnects_while_waiting_for_the_answer(srv, binding):
    """A complete request whose client leaves before reading the answer: no error either."""
    path, body = send_request(binding, text=json.dumps(f"{ASK} leaves early").encode())
    probe = f"probe={uuid.uuid4().hex}"
    request = (f"POST {path}?{probe} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {srv.p2_key}\r\n"
               f"Content-Type: application/json\r\nA2A-Version: {'1.0' if binding.endswith('1.0') else '0.3'}\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    raw_http(srv, request, close_after=0.0)
    done, raised = srv.observer.wait(probe)
    assert done and raised is None, raised


# --- the forwarded host a trusted proxy sends ----------------------------------------------------------------------


@pytest.mark.parametrize("header", ["X-Forwarded-Host", "Forwarded"])
@pytest.mark.parametrize("host", ["[::1", "a]b", "[not-an-ip]"])
def test_a_forwarded_host_that_is_not_a_host_is_not_a_500(srv, header, host):
    """The server trusts forwarded headers from 127.0.0.1 by default (forwarded_allow_ips): a malformed
    host there must not break the cards (the gRPC interface's address is derived from it)."""
    value = host if header == "X-Forwarded-Host" else f'host="{host}";proto=https'
    with httpx.Client(base_url=srv.url, timeout=30) as http:  # a 500 closes its connection: not the shared one
        check_forwarded(http, srv, header, value)


def check_forwarded(http: httpx.Client, srv: Secured, header: str, value: str) -> None:
    resp = http.get("/.well-known/agent-card.json", headers={header: value})
    assert resp.status_code in (200, 400), f"public card: {resp.status_code} {resp.text[:300]}"
    resp = http.get("/agents", headers={header: value, "X-API-Key": srv.p2_key})  # not public when secured
    assert resp.status_code in (200, 400), f"/agents: {resp.status_code} {resp.text[:300]}"
    resp = http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"},
                     headers={**V1, "X-API-Key": srv.p2_key, header: value})
    assert resp.status_code in (200, 400), resp.text[:300]
    body = resp.json()
    assert "result" in body or body["error"]["code"] in (-32600, -32602), f"extended card: {resp.text[:300]}"


# --- another principal's tasks -------------------------------------------------------------------------------------


def test_p1s_tasks_are_out_of_reach_on_every_http_binding(http, srv, binding, auth):
    """Read, cancel, subscribe, continue: P1's tasks do not exist for P2 (-32001 / 404) or a stranger (401)."""
    kind = "task_not_found" if auth else "unauthenticated"
    key = srv.p2_key if auth else None
    for tid in srv.p1_task_ids:
        if binding.startswith("JSONRPC"):
            v1 = binding.endswith("1.0")
            for method in (["GetTask", "CancelTask", "SubscribeToTask", "ListTaskPushNotificationConfigs"] if v1
                           else ["tasks/get", "tasks/cancel", "tasks/resubscribe", "tasks/pushNotificationConfig/list"]):
                params = {"taskId" if method == "ListTaskPushNotificationConfigs" else "id": tid}
                resp = http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                                 headers=headers_for(binding, key))
                if resp.json().get("error", {}).get("code") == -32003:  # push notifications are off: no config
                    continue
                expect(resp, binding, kind)
                assert SECRET not in resp.text
        else:
            prefix = "" if binding.endswith("1.0") else "/v1"
            for verb, path in (("GET", f"/tasks/{tid}"), ("POST", f"/tasks/{tid}:cancel"),
                               ("GET", f"/tasks/{tid}:subscribe")):
                resp = http.request(verb, prefix + path, headers=headers_for(binding, key))
                expect(resp, binding, kind)
                assert SECRET not in resp.text
        path, body = send_request(binding, message_extra=b',"taskId":"' + tid.encode() + b'"')
        resp = post(http, srv, binding, path, body, auth=auth)
        expect(resp, binding, kind)
        assert SECRET not in resp.text


# --- gRPC ------------------------------------------------------------------------------------------------------------


def grpc_md(srv: Secured, auth: bool) -> list[tuple[str, str]]:
    return [("x-api-key", srv.p2_key)] if auth else []


def expect_grpc(code: str, details: str, kind: str, auth: bool = True, *fragments: str) -> None:
    wanted = KINDS[kind][5]
    allowed = {wanted} if auth else {wanted, "UNAUTHENTICATED"}
    assert code in allowed, f"expected {wanted} ({kind}), got {code}: {details[:300]}"
    if code == wanted:
        for fragment in fragments:
            assert fragment in details, f"{fragment!r} not in {details[:300]!r}"


UNDECODABLE = {
    "random-bytes": b"\xe75\xc4\xdd\xd6?\xb0\xc3w!",
    "truncated": b"\x12\x50\x0a\x20abc",
    "invalid-utf8-string": b"\x12\x08\x0a\x02\xff\xfe\x20\x01",  # SendMessageRequest.message.message_id
    "bad-wire-type": b"\x13\x01",
    "overlong-length": b"\x12\xff\xff\xff\xff\x0f",
    "varint-too-long": b"\x18" + b"\xff" * 11,
}


@needs_grpc
@pytest.mark.parametrize("payload", list(UNDECODABLE.values()), ids=list(UNDECODABLE))
@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage", "GetTask"])
def test_grpc_bytes_that_are_not_the_request_message_are_invalid_argument(srv, auth, method, payload):
    """Bytes that do not decode as the method's request message are the client's error (INVALID_ARGUMENT),
    not UNKNOWN with a traceback of the gRPC runtime in the server's log."""
    code, details, _ = grpc_call(srv.grpc_target, method, payload, grpc_md(srv, auth))
    expect_grpc(code, details, "parse", auth)


@needs_grpc
@pytest.mark.parametrize("depth", [17, 99, 101, 1000])
def test_grpc_values_nested_too_deep_are_invalid_argument(srv, auth, depth):
    """A data part nested past max_metadata_depth, and past the protobuf parser's own limit (100)."""
    code, details, _ = grpc_call(srv.grpc_target, "SendMessage", deep_send_bytes(depth), grpc_md(srv, auth))
    expect_grpc(code, details, "invalid_params", auth)


def _send(**message: Any) -> Any:
    msg = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=[pb.Part(text="hi")])
    for key, value in message.items():
        if key == "parts":
            del msg.parts[:]
            msg.parts.extend(value)
        elif key == "metadata":
            msg.metadata.update(value)
        else:
            setattr(msg, key, value)
    return pb.SendMessageRequest(message=msg)


@needs_grpc
@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_grpc_numbers_json_cannot_carry_are_invalid_argument(srv, auth, number):
    """A Struct number that is NaN or infinite has no JSON form (the canonical model is JSON)."""
    code, details, _ = grpc_call(srv.grpc_target, "SendMessage", _send(metadata={"n": number}).SerializeToString(),
                                 grpc_md(srv, auth))
    expect_grpc(code, details, "invalid_params", auth)
    cancel = pb.CancelTaskRequest(id=srv.p2_task_ids[0])
    cancel.metadata.update({"n": number})
    code, details, _ = grpc_call(srv.grpc_target, "CancelTask", cancel.SerializeToString(), grpc_md(srv, auth))
    expect_grpc(code, details, "invalid_params", auth)


@needs_grpc
@pytest.mark.parametrize(("seconds", "nanos"), [(2**62, 0), (-(2**40), 0), (253402300800, 0), (0, -1),
                                                 (0, 10**9)])
def test_grpc_timestamps_out_of_range_are_invalid_argument(srv, auth, seconds, nanos):
    request = pb.ListTasksRequest()
    request.status_timestamp_after.seconds = seconds
    request.status_timestamp_after.nanos = nanos
    code, details, _ = grpc_call(srv.grpc_target, "ListTasks", request.SerializeToString(), grpc_md(srv, auth))
    expect_grpc(code, details, "invalid_params", auth, "statusTimestampAfter")


@needs_grpc
def test_grpc_enum_values_out_of_range_are_invalid_argument(srv, auth):
    code, details, _ = grpc_call(srv.grpc_target, "SendMessage", _send(role=77).SerializeToString(),
                                 grpc_md(srv, auth))
    expect_grpc(code, details, "invalid_params", auth, "role")
    code, details, _ = grpc_call(srv.grpc_target, "ListTasks", pb.ListTasksRequest(status=99).SerializeToString(),
                                 grpc_md(srv, auth))
    expect_grpc(code, details, "invalid_params", auth, "status")


@needs_grpc
def test_grpc_limits(srv, auth):
    """The same limits as over HTTP: parts, metadata nesting, ids; and the message size limit."""
    md = grpc_md(srv, auth)
    parts = [pb.Part(text="x")] * (LIMITS.max_parts + 1)
    code, details, _ = grpc_call(srv.grpc_target, "SendMessage", _send(parts=parts).SerializeToString(), md)
    expect_grpc(code, details, "invalid_params", auth, "limits.max_parts")
    code, details, _ = grpc_call(srv.grpc_target, "SendMessage",
                                 _send(metadata=deep_object(LIMITS.max_metadata_depth + 1)).SerializeToString(), md)
    expect_grpc(code, details, "invalid_params", auth, "limits.max_metadata_depth")
    code, details, _ = grpc_call(srv.grpc_target, "SendMessage",
                                 _send(message_id="i" * MILLION).SerializeToString(), md)
    expect_grpc(code, details, "invalid_params", auth, "over the limit of 1024")
    code, details, _ = grpc_call(srv.grpc_target, "GetTask", pb.GetTaskRequest(id="t" * MILLION).SerializeToString(),
                                 md)
    expect_grpc(code, details, "task_not_found", auth)
    code, details, _ = grpc_call(srv.grpc_target, "SendMessage",
                                 _send(parts=[pb.Part(text="b" * BODY_LIMIT)]).SerializeToString(), md)
    expect_grpc(code, details, "too_large", auth)


@needs_grpc
def test_p1s_tasks_are_out_of_reach_over_grpc(srv, auth):
    md = grpc_md(srv, auth)
    kind = "task_not_found" if auth else "unauthenticated"
    for tid in srv.p1_task_ids:
        for method, request in (("GetTask", pb.GetTaskRequest(id=tid)), ("CancelTask", pb.CancelTaskRequest(id=tid)),
                                ("SubscribeToTask", pb.SubscribeToTaskRequest(id=tid)),
                                ("SendMessage", _send(task_id=tid))):
            code, details, messages = grpc_call(srv.grpc_target, method, request.SerializeToString(), md)
            expect_grpc(code, details, kind)
            assert not messages and SECRET not in details


# --- at the end: nothing of P1's changed ------------------------------------------------------------------------


def test_p1s_tasks_read_exactly_as_before(world):
    srv, before = world
    assert p1_snapshot(srv) == before
