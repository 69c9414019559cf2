"""A2A 1.0 section 5.5 (JSON field naming, ProtoJSON): proto field names are read like their JSON names.

A2A 1.0 JSON is the ProtoJSON of `lf.a2a.v1`, written in lowerCamel; ProtoJSON parsers also accept
the proto (snake_case) names. These tests prove Parley reads them on JSON-RPC params, HTTP+JSON
bodies and HTTP+JSON query parameters, at any depth, writes lowerCamel only, and refuses an object
that names one field both ways (-32602 naming both).
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from parley.protocol import models as m
from parley.protocol import v0_3_rest, v1_0
from parley.protocol.errors import InvalidParamsError
from parley.protocol.names import accept_proto_names, proto_name
from parley.protocol.operations import Operation
from parley.server.rest import RestEndpoint
from support import require, rpc

V1 = {"A2A-Version": "1.0"}


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --- sans-IO: the 1.0 dialect ------------------------------------------------------------------------


def test_send_message_reads_proto_names_at_every_depth():
    """§5.5: `message_id`, `context_id`, `task_id`, `reference_task_ids`, a part's `media_type`, and the
    configuration's `accepted_output_modes`, `history_length`, `return_immediately`,
    `task_push_notification_config.task_id` decode exactly like their lowerCamel forms."""
    camel = {
        "message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c1", "taskId": "t1",
                    "referenceTaskIds": ["r1"], "parts": [{"text": "hi", "mediaType": "text/plain"}]},
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3, "returnImmediately": True,
                          "taskPushNotificationConfig": {"url": "https://example.com/hook", "taskId": "t1"}},
    }
    snake = {
        "message": {"message_id": "m1", "role": "ROLE_USER", "context_id": "c1", "task_id": "t1",
                    "reference_task_ids": ["r1"], "parts": [{"text": "hi", "media_type": "text/plain"}]},
        "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 3, "return_immediately": True,
                          "task_push_notification_config": {"url": "https://example.com/hook", "task_id": "t1"}},
    }
    expected = v1_0.decode(Operation.SEND, camel)
    assert expected.configuration.return_immediately is True  # the camel form itself is understood
    assert v1_0.decode(Operation.SEND, snake) == expected


@pytest.mark.parametrize("op,snake,camel", [
    (Operation.GET, {"id": "t", "history_length": 2}, {"id": "t", "historyLength": 2}),
    (Operation.LIST, {"context_id": "c", "page_size": 5, "page_token": "p", "history_length": 1,
                      "status_timestamp_after": "2025-01-01T00:00:00Z", "include_artifacts": True},
     {"contextId": "c", "pageSize": 5, "pageToken": "p", "historyLength": 1,
      "statusTimestampAfter": "2025-01-01T00:00:00Z", "includeArtifacts": True}),
    (Operation.PUSH_GET, {"task_id": "t", "id": "c"}, {"taskId": "t", "id": "c"}),
    (Operation.PUSH_LIST, {"task_id": "t", "page_size": 2, "page_token": "x"}, {"taskId": "t", "pageSize": 2,
                                                                               "pageToken": "x"}),
])
def test_request_params_read_proto_names(op, snake, camel):
    """§5.5: each request's proto-named fields land where the lowerCamel ones do (not silently dropped)."""
    assert v1_0.decode(op, snake) == v1_0.decode(op, camel)  # every value differs from its field's default


def test_every_proto_field_name_of_the_request_messages_is_read():
    """§5.5 against the proto itself: for every field of the lf.a2a.v1 request messages (and the messages
    nested in them) whose proto name differs from its JSON name, the proto name is renamed to the JSON
    name protobuf gives it. A model field named unlike the proto would fail here."""
    pb = require("google.protobuf", "grpc") and __import__("parley.grpc.a2a_pb2", fromlist=["DESCRIPTOR"])
    proto_of = {m.TaskPushConfigRef: "GetTaskPushNotificationConfigRequest",
                m.ListTaskPushConfigsRequest: "ListTaskPushNotificationConfigsRequest"}
    seen = 0
    todo = list(set(v1_0.REQUEST_TYPES.values()))
    done: set[type] = set()
    while todo:
        cls = todo.pop()
        if cls in done:
            continue
        done.add(cls)
        desc = pb.DESCRIPTOR.message_types_by_name[proto_of.get(cls, cls.__name__)]
        for field in desc.fields:
            if field.message_type is not None and field.message_type.full_name.startswith("lf.a2a.v1."):
                todo.append(getattr(m, field.message_type.name))
            if field.name == field.json_name:
                continue
            assert accept_proto_names({field.name: "v"}, cls) == {field.json_name: "v"}, (desc.name, field.name)
            assert proto_name(field.json_name) == field.name
            seen += 1
    assert seen >= 20  # message_id, context_id, task_id, media_type, history_length, page_size, ...


def test_both_spellings_of_one_field_are_refused_naming_both():
    """One object with `historyLength` and `history_length`: -32602, and the message names both."""
    with pytest.raises(InvalidParamsError) as caught:
        v1_0.decode(Operation.GET, {"id": "t", "historyLength": 1, "history_length": 2})
    assert caught.value.code == -32602
    assert "`params.historyLength`" in caught.value.message and "`params.history_length`" in caught.value.message
    nested = {"message": {"messageId": "a", "message_id": "b", "role": "ROLE_USER", "parts": [{"text": "x"}]}}
    with pytest.raises(InvalidParamsError) as caught:
        v1_0.decode(Operation.SEND, nested)
    assert "`params.message.messageId`" in caught.value.message
    assert "`params.message.message_id`" in caught.value.message


def test_free_form_members_keep_their_keys_and_input_is_not_changed():
    """`metadata` and a data part's `data` are not proto messages: snake_case keys there stay as sent;
    the caller's dict is not modified (copy on write)."""
    params = {"message": {"message_id": "m", "role": "ROLE_USER", "parts": [{"data": {"page_size": 1}}],
                          "metadata": {"context_id": "kept"}}, "metadata": {"task_id": "kept"}}
    req = v1_0.decode(Operation.SEND, params)
    assert req.message.message_id == "m"
    assert req.message.metadata == {"context_id": "kept"} and req.metadata == {"task_id": "kept"}
    assert req.message.parts[0].data == {"page_size": 1}
    assert "message_id" in params["message"] and "messageId" not in params["message"]


def test_0_3_http_json_reads_proto_names_and_refuses_both():
    """0.3 HTTP+JSON bodies are the 0.3 proto's ProtoJSON: proto names read (already so), both refused."""
    body = {"request": {"message_id": "m", "context_id": "c", "role": "ROLE_USER", "content": [{"text": "x"}]}}
    req = v0_3_rest.decode(Operation.SEND, body)
    assert req.message.message_id == "m" and req.message.context_id == "c"
    body["request"]["messageId"] = "other"
    with pytest.raises(InvalidParamsError) as caught:
        v0_3_rest.decode(Operation.SEND, body)
    assert "`messageId`" in caught.value.message and "`message_id`" in caught.value.message


def test_rest_query_parameters_are_typed_under_both_names():
    """§11.5 + §5.5: integer and boolean query parameters are typed whichever name they come under."""
    assert {"historyLength", "history_length", "pageSize", "page_size"} <= RestEndpoint.int_params
    assert {"includeArtifacts", "include_artifacts"} <= RestEndpoint.bool_params


# --- live: JSON-RPC and HTTP+JSON on 127.0.0.1 --------------------------------------------------------


def _send(url: str, text: str, context_id: str) -> dict:
    body = rpc(url, "SendMessage", {"message": {"messageId": _uid("m"), "role": "ROLE_USER", "contextId": context_id,
                                                "parts": [{"text": text}]}}, version="1.0").json()
    return body["result"]["task"]


def test_jsonrpc_list_tasks_honours_context_id_and_page_size(server):
    """Before: JSON-RPC ListTasks silently ignored `context_id` and `page_size` (every task came back)."""
    ctx, other = _uid("ctx"), _uid("ctx")
    for text in ("one", "two"):
        _send(server.url, text, ctx)
    _send(server.url, "elsewhere", other)
    result = rpc(server.url, "ListTasks", {"context_id": ctx, "page_size": 1}, version="1.0").json()["result"]
    assert result["pageSize"] == 1 and len(result["tasks"]) == 1 and result["totalSize"] == 2
    assert result["tasks"][0]["contextId"] == ctx
    assert result["nextPageToken"]  # a second page exists
    nxt = rpc(server.url, "ListTasks", {"context_id": ctx, "page_size": 1, "page_token": result["nextPageToken"]},
              version="1.0").json()["result"]
    assert [t["contextId"] for t in nxt["tasks"]] == [ctx]
    assert nxt["tasks"][0]["id"] != result["tasks"][0]["id"]


def test_jsonrpc_get_task_honours_history_length_and_answers_in_camel_case(server):
    """Before: GetTask ignored `history_length`. Output stays lowerCamel whatever the input used."""
    task = _send(server.url, "hello", _uid("ctx"))
    assert task["history"]
    got = rpc(server.url, "GetTask", {"id": task["id"], "history_length": 0}, version="1.0").json()["result"]
    assert "history" not in got and got["contextId"] == task["contextId"]
    sent = rpc(server.url, "SendMessage", {"message": {"message_id": _uid("m"), "role": "ROLE_USER",
                                                       "context_id": "ctx-snake", "parts": [{"text": "x"}]}},
               version="1.0").json()["result"]["task"]
    assert sent["contextId"] == "ctx-snake" and "context_id" not in sent
    assert all("_" not in key for key in sent["history"][0])


def test_jsonrpc_both_spellings_get_invalid_params(server):
    body = rpc(server.url, "ListTasks", {"pageSize": 1, "page_size": 2}, version="1.0").json()
    assert body["error"]["code"] == -32602
    assert "params.pageSize" in body["error"]["message"] and "params.page_size" in body["error"]["message"]


def test_rest_body_and_query_read_proto_names(server):
    """HTTP+JSON 1.0: a body with proto names, and `context_id` / `page_size` / `history_length` query params."""
    ctx = _uid("ctx")
    for text in ("a", "b"):
        sent = httpx.post(f"{server.url}/message:send", headers=V1, json={
            "message": {"message_id": _uid("m"), "context_id": ctx, "role": "ROLE_USER", "parts": [{"text": text}]}})
        assert sent.status_code == 200, sent.text
        assert sent.json()["task"]["contextId"] == ctx
    listed = httpx.get(f"{server.url}/tasks", headers=V1, params={"context_id": ctx, "page_size": "1"}).json()
    assert listed["pageSize"] == 1 and listed["totalSize"] == 2 and listed["tasks"][0]["contextId"] == ctx
    task_id = listed["tasks"][0]["id"]
    full = httpx.get(f"{server.url}/tasks/{task_id}", headers=V1).json()
    short = httpx.get(f"{server.url}/tasks/{task_id}", headers=V1, params={"history_length": "0"}).json()
    assert full["history"] and "history" not in short
    bad = httpx.get(f"{server.url}/tasks", headers=V1, params={"page_size": "many"})
    assert bad.status_code == 400 and "page_size" in bad.json()["error"]["message"]


def test_rest_both_spellings_and_path_parameters(server):
    """Both names in one body: 400 INVALID_PARAMS naming both. A body's `task_id` is the path's `taskId`:
    the same value is fine, another value is refused as not matching the URL."""
    clash = httpx.get(f"{server.url}/tasks", headers=V1, params={"contextId": "a", "context_id": "b"})
    assert clash.status_code == 400
    err = clash.json()["error"]
    assert err["details"][0]["reason"] == "INVALID_PARAMS"
    assert "params.contextId" in err["message"] and "params.context_id" in err["message"]
    url = f"{server.url}/tasks/t-1/pushNotificationConfigs"
    other = httpx.post(url, headers=V1, json={"task_id": "t-2", "url": "https://example.com/hook"})
    assert other.status_code == 400 and "`task_id`" in other.json()["error"]["message"]
    same = httpx.post(url, headers=V1, json={"task_id": "t-1", "url": "https://example.com/hook"})
    assert same.json()["error"]["details"][0]["reason"] != "INVALID_PARAMS", same.text  # decoded; fails later


def test_jsonrpc_reads_proto_names_written_with_json_escapes(server):
    """§5.5: a key is its decoded text. `message\\u005fid` is `message_id`, read like `messageId`, though no key
    of the body holds an underscore byte; spelled both ways (one escaped) it is still refused."""
    mid = _uid("m")
    escaped = ('{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"message\\u005fid":"' + mid +
               '","role":"ROLE_USER","context\\u005Fid":"ctx-escaped","parts":[{"text":"x"}]}}}')
    sent = httpx.post(server.url, content=escaped, headers={**V1, "Content-Type": "application/json"}).json()
    task = sent["result"]["task"]
    assert task["contextId"] == "ctx-escaped" and task["history"][0]["messageId"] == mid
    both = ('{"jsonrpc":"2.0","id":8,"method":"ListTasks","params":{"pageSize":1,"page\\u005fsize":2}}')
    refused = httpx.post(server.url, content=both, headers={**V1, "Content-Type": "application/json"}).json()
    assert refused["error"]["code"] == -32602 and "params.page_size" in refused["error"]["message"]


def test_bodies_that_may_hold_proto_names():
    """What lets the JSON-RPC binding skip the proto-name walk: no key with an underscore, and no JSON escape."""
    assert not v1_0.may_hold_proto_names(b'{"message":{"messageId":"m_1","role":"ROLE_USER","parts":[{"text":"a"}]}}')
    assert v1_0.may_hold_proto_names(b'{"message":{"message_id" : "m-1"}}')
    assert v1_0.may_hold_proto_names(b'{"message":{"message_id":"m-1"}}')
    assert v1_0.may_hold_proto_names(b'{"message":{"message\\u005fid":"m-1"}}')
