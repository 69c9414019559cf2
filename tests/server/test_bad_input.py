"""Malformed and invalid requests: precise errors, and nothing stored changes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from srvkit import D03, D10, Lab, http, lab_app, live, post, uid

from parley.app import Settings


@pytest.fixture(scope="module")
def ref(lab_server):
    """Reference tasks whose stored state every test checks before and after."""
    echo = D10.send(lab_server.url, "reference task")
    asking = D10.send(lab_server.agent("interviewer"), "reference question")
    assert asking["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return {"echo": echo, "asking": asking}


def _world(lab_server, ref) -> Any:
    """Everything a client can read about stored tasks."""
    out = {}
    for agent in ("echo", "interviewer", "slow", "counter"):
        out[agent] = D10.list(lab_server.agent(agent), includeArtifacts=True, pageSize=100)
    out["echo-task"] = D10.get(lab_server.url, ref["echo"]["id"])
    out["asking-task"] = D10.get(lab_server.agent("interviewer"), ref["asking"]["id"])
    return out


@pytest.fixture
def unchanged(lab_server, ref):
    """Asserts after the test that the server still serves and no stored task changed."""
    before = _world(lab_server, ref)
    yield
    assert _world(lab_server, ref) == before
    assert before["echo-task"] == ref["echo"]
    probe = D03.send(lab_server.agent("counter"), "still serving")
    assert probe["status"]["state"] == "completed"


def _check(r: httpx.Response, code: int, *, rid: Any = None, status: int = 200) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["jsonrpc"] == "2.0"
    assert "id" in body and body["id"] == rid, body
    assert "result" not in body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def _env(method: str = "message/send", params: Any = None, rid: Any = 1, **extra) -> dict:
    body = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    body.update(extra)
    return body


def _send_params(d, **overrides) -> dict:
    msg = d.message("hello")
    msg.update(overrides)
    return {"message": msg}


# --- envelope -------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"{", b"not json", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe", b"",
                                 b'{"jsonrpc":"2.0","id":1,"method":"tasks/get"} trailing'],
                         ids=["brace", "words", "truncated", "binary", "empty", "trailing"])
def test_malformed_json_is_parse_error(lab_server, unchanged, raw):
    _check(post(lab_server.url, None, raw=raw), -32700)
    _check(post(lab_server.url, None, raw=raw, version="1.0"), -32700)


@pytest.mark.parametrize("body", [[], [_env("tasks/get", {"id": "x"})]], ids=["empty", "one"])
def test_batch_is_invalid_request(lab_server, unchanged, body):
    _check(post(lab_server.url, body), -32600)


@pytest.mark.parametrize("body", ["a string", 42, None, True, 1.5], ids=["str", "int", "null", "bool", "float"])
def test_non_object_body_is_invalid_request(lab_server, unchanged, body):
    _check(post(lab_server.url, body), -32600)


@pytest.mark.parametrize("jsonrpc", [None, "1.0", 2.0, "2"], ids=["missing", "1.0", "number", "2"])
def test_missing_or_wrong_jsonrpc(lab_server, unchanged, jsonrpc):
    body = _env("tasks/get", {"id": "x"}, rid=5)
    if jsonrpc is None:
        del body["jsonrpc"]
    else:
        body["jsonrpc"] = jsonrpc
    _check(post(lab_server.url, body), -32600, rid=5)


def test_missing_id_is_invalid_request(lab_server, unchanged):
    body = _env("message/send", {"message": D03.message("no id")})
    del body["id"]
    _check(post(lab_server.url, body), -32600, rid=None)


@pytest.mark.parametrize("rid", [True, False, 1.5, [1], {"a": 1}], ids=["true", "false", "float", "list", "obj"])
def test_bad_id_type_is_invalid_request(lab_server, unchanged, rid):
    _check(post(lab_server.url, _env("message/send", {"message": D03.message("x")}, rid=rid)), -32600, rid=None)


@pytest.mark.parametrize("rid", ["abc", 0, -7, None], ids=["str", "zero", "neg", "null"])
def test_valid_ids_are_echoed(lab_server, unchanged, rid):
    _check(post(lab_server.url, _env("tasks/get", {"id": uid("none-")}, rid=rid)), -32001, rid=rid)


@pytest.mark.parametrize("method", [None, "", 5, ["tasks/get"]], ids=["missing", "empty", "int", "list"])
def test_missing_empty_or_non_string_method(lab_server, unchanged, method):
    body = _env("x", {"id": "y"}, rid=3)
    if method is None:
        del body["method"]
    else:
        body["method"] = method
    _check(post(lab_server.url, body), -32600, rid=3)


@pytest.mark.parametrize("method", ["tasks/unknown", "message/sendd", "sendMessage", "rpc.discover", "GetTasks"])
def test_unknown_method(lab_server, unchanged, method):
    _check(post(lab_server.url, _env(method, {}, rid=9)), -32601, rid=9)
    _check(post(lab_server.url, _env(method, {}, rid=9), version="1.0"), -32601, rid=9)


@pytest.mark.parametrize("params", [[1, 2], "str", 7, True], ids=["array", "str", "int", "bool"])
def test_params_not_an_object(lab_server, unchanged, params):
    _check(post(lab_server.url, _env("message/send", params)), -32602, rid=1)
    _check(post(lab_server.url, _env("SendMessage", params), version="1.0"), -32602, rid=1)


# --- params -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [D03, D10], ids=["v0.3", "v1.0"])
@pytest.mark.parametrize("params", [{}, {"message": None}, {"message": "hi"}, {"message": []}],
                         ids=["missing", "null", "str", "array"])
def test_missing_or_bad_message(lab_server, unchanged, d, params):
    _check(post(lab_server.url, _env(d.method("send"), params), version=d.version), -32602, rid=1)
    _check(post(lab_server.url, _env(d.method("stream"), params), version=d.version), -32602, rid=1)


@pytest.mark.parametrize("d", [D03, D10], ids=["v0.3", "v1.0"])
@pytest.mark.parametrize(
    "field,value",
    [("parts", "hello"), ("parts", {"text": "x"}), ("parts", []), ("parts", None), ("messageId", None),
     ("messageId", ""), ("messageId", 5), ("role", "robot"), ("role", None), ("taskId", 12), ("contextId", [])],
    ids=["parts-str", "parts-obj", "parts-empty", "parts-null", "mid-null", "mid-empty", "mid-int", "role-bad",
         "role-null", "taskid-int", "ctx-list"],
)
def test_wrong_message_field_types(lab_server, unchanged, d, field, value):
    params = _send_params(d, **{field: value})
    if value is None:
        del params["message"][field]
    _check(post(lab_server.url, _env(d.method("send"), params), version=d.version), -32602, rid=1)


@pytest.mark.parametrize("d", [D03, D10], ids=["v0.3", "v1.0"])
@pytest.mark.parametrize("text", [5, None, ["a"], {"t": 1}, True], ids=["int", "null", "list", "obj", "bool"])
def test_text_not_a_string(lab_server, unchanged, d, text):
    part = {"kind": "text", "text": text} if not d.v1 else {"text": text}
    _check(post(lab_server.url, _env(d.method("send"), _send_params(d, parts=[part])), version=d.version),
           -32602, rid=1)


@pytest.mark.parametrize("part", [{"kind": "image", "text": "x"}, {"text": "no kind"}, {"kind": 3},
                                  {"kind": "file", "file": {}}, {"kind": "file", "file": {"bytes": "eA==",
                                                                                         "uri": "http://x"}},
                                  {"kind": "data"}, "just a string"],
                         ids=["unknown-kind", "no-kind", "int-kind", "file-empty", "file-both", "data-missing",
                              "str"])
def test_v03_bad_parts(lab_server, unchanged, part):
    _check(post(lab_server.url, _env("message/send", _send_params(D03, parts=[part]))), -32602, rid=1)


@pytest.mark.parametrize("part", [{"text": "a", "url": "http://x"}, {"text": "a", "data": {"k": 1}},
                                  {"raw": "eA==", "url": "http://x"}, {}, {"metadata": {"a": 1}},
                                  {"raw": "***not base64***"}],
                         ids=["text+url", "text+data", "raw+url", "empty", "only-metadata", "bad-base64"])
def test_v10_part_needs_exactly_one_content(lab_server, unchanged, part):
    _check(post(lab_server.url, _env("SendMessage", _send_params(D10, parts=[part])), version="1.0"), -32602, rid=1)


@pytest.mark.parametrize("d", [D03, D10], ids=["v0.3", "v1.0"])
def test_message_from_the_agent_role_is_refused(lab_server, unchanged, d):
    params = {"message": d.message("I am the agent", role="agent")}
    _check(post(lab_server.url, _env(d.method("send"), params), version=d.version), -32602, rid=1)
    _check(post(lab_server.url, _env(d.method("stream"), params), version=d.version), -32602, rid=1)


@pytest.mark.parametrize("d", [D03, D10], ids=["v0.3", "v1.0"])
@pytest.mark.parametrize("conf", [{"blocking": "yes"}, {"historyLength": "all"}, "conf", {"acceptedOutputModes": 3}],
                         ids=["blocking-str", "hist-str", "conf-str", "modes-int"])
def test_bad_configuration(lab_server, unchanged, d, conf):
    if d.v1 and isinstance(conf, dict) and "blocking" in conf:
        conf = {"returnImmediately": "yes"}
    params = {"message": d.message("x"), "configuration": conf}
    _check(post(lab_server.url, _env(d.method("send"), params), version=d.version), -32602, rid=1)


@pytest.mark.parametrize("d", [D03, D10], ids=["v0.3", "v1.0"])
@pytest.mark.parametrize("op", ["get", "cancel", "subscribe"])
@pytest.mark.parametrize("params", [{}, {"id": ""}, {"id": 5}, {"id": None}], ids=["missing", "empty", "int", "null"])
def test_bad_task_id_params(lab_server, unchanged, d, op, params):
    _check(post(lab_server.url, _env(d.method(op), params), version=d.version), -32602, rid=1)


@pytest.mark.parametrize("d", [D03, D10], ids=["v0.3", "v1.0"])
@pytest.mark.parametrize("op", ["get", "cancel", "subscribe"])
def test_unknown_task_ids(lab_server, unchanged, d, op):
    r = post(lab_server.url, _env(d.method(op), {"id": uid("ghost-")}), version=d.version)
    _check(r, -32001, rid=1)


# --- versions -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("method,params", [("SendMessage", {"message": D10.message("x")}), ("GetTask", {"id": "x"}),
                                           ("ListTasks", {}), ("SubscribeToTask", {"id": "x"})])
def test_v10_method_without_version_header(lab_server, unchanged, method, params):
    err = _check(post(lab_server.url, _env(method, params)), -32009, rid=1)
    assert "1.0" in err["message"]


@pytest.mark.parametrize("version", ["9.9", "2.0", "abc", "0.2"])
def test_unsupported_version_header(lab_server, unchanged, version):
    _check(post(lab_server.url, _env("SendMessage", {"message": D10.message("x")}), version=version), -32009, rid=1)
    _check(post(lab_server.url, _env("GetTask", {"id": "x"}), version=version), -32009, rid=1)


def test_v10_errors_carry_error_info(lab_server, unchanged):
    err = _check(post(lab_server.url, _env("GetTask", {"id": uid("ghost-")}), version="1.0"), -32001, rid=1)
    assert err["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert err["data"][0]["reason"] == "TASK_NOT_FOUND"


# --- optional features ----------------------------------------------------------------------------------


PUSH_03 = [
    ("tasks/pushNotificationConfig/set", lambda t: {"taskId": t, "pushNotificationConfig": {"url": "http://h/x"}}),
    ("tasks/pushNotificationConfig/get", lambda t: {"id": t}),
    ("tasks/pushNotificationConfig/list", lambda t: {"id": t}),
    ("tasks/pushNotificationConfig/delete", lambda t: {"id": t, "pushNotificationConfigId": "c1"}),
]
PUSH_10 = [
    ("CreateTaskPushNotificationConfig", lambda t: {"taskId": t, "url": "http://h/x"}),
    ("GetTaskPushNotificationConfig", lambda t: {"taskId": t, "id": "c1"}),
    ("ListTaskPushNotificationConfigs", lambda t: {"taskId": t}),
    ("DeleteTaskPushNotificationConfig", lambda t: {"taskId": t, "id": "c1"}),
]


@pytest.fixture(scope="module")
def nopush_server():
    """A server with push notifications turned off (`[push] enabled = false`)."""
    from parley.settings import PushSettings

    with live(lab_app(Lab(), settings=Settings(push=PushSettings(enabled=False)))) as srv:
        yield srv


@pytest.mark.parametrize("method,params", PUSH_03, ids=[m for m, _ in PUSH_03])
def test_v03_push_config_not_supported(nopush_server, method, params):
    """Spec 3.3.2 / 5.4: PushNotificationNotSupported (-32003) when the agent does not offer push."""
    _check(post(nopush_server.url, _env(method, params("any-task"))), -32003, rid=1)


@pytest.mark.parametrize("method,params", PUSH_10, ids=[m for m, _ in PUSH_10])
def test_v10_push_config_not_supported(nopush_server, method, params):
    _check(post(nopush_server.url, _env(method, params("any-task")), version="1.0"), -32003, rid=1)


def test_push_config_in_send_is_refused_when_push_is_off_without_creating_a_task(nopush_server):
    params = {"message": D10.message("with push"),
              "configuration": {"taskPushNotificationConfig": {"url": "https://hooks.example.com/x"}}}
    _check(post(nopush_server.url, _env("SendMessage", params), version="1.0"), -32003, rid=1)
    listed = post(nopush_server.url, _env("ListTasks", {}), version="1.0").json()["result"]
    assert listed["tasks"] == []


@pytest.mark.parametrize("method,params", [PUSH_03[0], PUSH_10[0]], ids=["0.3", "1.0"])
def test_a_malformed_webhook_url_is_refused_at_registration(lab_server, ref, unchanged, method, params):
    """Spec 13.2: webhook URLs are validated; one whose port is not a port is -32602 at once, naming it."""
    bad = params(ref["echo"]["id"])
    target = bad["pushNotificationConfig"] if "pushNotificationConfig" in bad else bad
    target["url"] = "http://h:99999/x"
    body = post(lab_server.url, _env(method, bad), version="1.0" if method[0].isupper() else None).json()
    assert body["error"]["code"] == -32602 and "not a valid URL" in body["error"]["message"], body


@pytest.mark.parametrize("method,params", [PUSH_03[0], PUSH_10[0]], ids=["0.3", "1.0"])
def test_an_unresolvable_webhook_host_is_accepted_at_registration(lab_server, ref, unchanged, method, params):
    """Spec 13.2 and issue 27, item 8 (docs/push.md, "SSRF-safe by default"): a host name that does not
    resolve now (`h`) is not bad input: a passing DNS failure must not refuse a legitimate webhook, so it is
    registered and checked at every delivery instead (where it resolves, or fails and is retried). The task
    is unchanged; the config is deleted again."""
    v1 = method[0].isupper()
    task_id = ref["echo"]["id"]
    body = post(lab_server.url, _env(method, params(task_id)), version="1.0" if v1 else None).json()
    assert "result" in body, body
    if v1:
        gone = post(lab_server.url, _env("DeleteTaskPushNotificationConfig",
                                         {"taskId": task_id, "id": body["result"]["id"]}), version="1.0").json()
    else:
        gone = post(lab_server.url, _env("tasks/pushNotificationConfig/delete", {
            "id": task_id, "pushNotificationConfigId": body["result"]["pushNotificationConfig"]["id"]})).json()
    assert "error" not in gone, gone


def test_push_config_in_send_with_an_unsafe_url_is_refused_without_creating_a_task(lab_server):
    context = uid("ctx")
    params = {"message": {**D10.message("with push"), "contextId": context},
              "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/x"}}}
    body = post(lab_server.url, _env("SendMessage", params), version="1.0").json()
    assert body["error"]["code"] == -32602 and "127.0.0.1, a loopback address" in body["error"]["message"], body
    listed = post(lab_server.url, _env("ListTasks", {"contextId": context}), version="1.0").json()["result"]
    assert listed["tasks"] == []


def test_extended_card(lab_server, unchanged):
    _check(post(lab_server.url, _env("GetExtendedAgentCard", {}), version="1.0"), -32004, rid=1)
    _check(post(lab_server.url, _env("GetExtendedAgentCard")), -32009, rid=1)
    _check(post(lab_server.url, _env("agent/getAuthenticatedExtendedCard", {})), -32007, rid=1)
    _check(post(lab_server.url, _env("agent/getAuthenticatedExtendedCard")), -32007, rid=1)


# --- transport ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_server():
    lab = Lab()
    with live(lab_app(lab, settings=Settings(max_body_bytes=1024))) as srv:
        yield srv


def test_oversized_body_is_413(small_server):
    ok = D03.send(small_server.url, "small")
    big = _env("message/send", {"message": D03.message("x" * 2000)})
    r = post(small_server.url, big)
    assert r.status_code == 413
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32600 and body["id"] is None
    # streamed without Content-Length: still refused
    data = json.dumps(big).encode()

    def chunks():
        for i in range(0, len(data), 100):
            yield data[i : i + 100]

    r = http.post(small_server.url, content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == -32600
    # nothing was created, and the server still serves
    page = D03.list(small_server.url)
    assert [t["id"] for t in page["tasks"]] == [ok["id"]]
    assert D03.send(small_server.url, "small again")["status"]["state"] == "completed"


def test_body_at_the_limit_is_accepted(small_server):
    body = _env("tasks/get", {"id": "x"})
    raw = json.dumps(body).encode()
    pad = 1024 - len(raw)
    raw = raw[:-1] + b" " * pad + b"}"
    assert len(raw) == 1024
    _check(post(small_server.url, None, raw=raw), -32001, rid=1)
