"""Bad input on both HTTP+JSON bindings: always a precise 4xx with a google.rpc.Status body, never a 500.

Malformed bodies, wrong paths (404), wrong verbs (405 with `Allow`), unknown ids
(404 TASK_NOT_FOUND), bad query parameters and bad fields (400 naming the field),
version mismatches, oversized bodies (413).
"""

from __future__ import annotations

import pytest
from rest_support import BINDINGS, error_reason, http, message_body, slow_app

from parley.agents.builtin import builtin_agents
from parley.app import Parley, Settings


@pytest.fixture(params=list(BINDINGS))
def binding(request: pytest.FixtureRequest) -> str:
    return request.param


def url(srv, binding: str, path: str) -> str:
    return srv.url + BINDINGS[binding]["prefix"] + path


def hdrs(binding: str, **extra: str) -> dict[str, str]:
    """The binding's headers, with the JSON Content-Type every body needs (415 otherwise)."""
    return {"Content-Type": "application/json", **BINDINGS[binding]["headers"], **extra}


def assert_error(resp, status: int, reason: str, *fragments: str) -> None:
    assert resp.status_code == status, f"{resp.status_code} {resp.text}"
    assert error_reason(resp) == reason, resp.text
    message = resp.json()["error"]["message"]
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


# --- malformed bodies ------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/message:send", "/message:stream"])
def test_malformed_json_body(server, binding, path):
    resp = http.post(url(server, binding, path), content=b'{"message": {', headers=hdrs(binding))
    assert_error(resp, 400, "PARSE_ERROR", "Parse error")


@pytest.mark.parametrize("body", [b"[]", b'"text"', b"42", b"null", b"true"])
def test_body_that_is_not_an_object(server, binding, body):
    resp = http.post(url(server, binding, "/message:send"), content=body, headers=hdrs(binding))
    assert_error(resp, 400, "INVALID_REQUEST", "JSON object")


def test_empty_body_names_the_missing_message(server, binding):
    resp = http.post(url(server, binding, "/message:send"), headers=hdrs(binding))
    assert_error(resp, 400, "INVALID_PARAMS", "message")


def test_malformed_body_on_cancel_and_push(server, binding):
    for path in ("/tasks/x:cancel", "/tasks/x/pushNotificationConfigs"):
        resp = http.post(url(server, binding, path), content=b"{oops", headers=hdrs(binding))
        assert_error(resp, 400, "PARSE_ERROR")


# --- bad fields: 400 naming the field -----------------------------------------------------------

BAD_MESSAGES_10 = [
    ({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": 5}]}, "params.message.parts[0].text"),
    ({"messageId": "m", "role": "USER", "parts": [{"text": "x"}]}, "params.message.role"),
    ({"role": "ROLE_USER", "parts": [{"text": "x"}]}, "messageId"),
    ({"messageId": "m", "role": "ROLE_USER", "parts": []}, "params.message.parts"),
    ({"messageId": "m", "role": "ROLE_USER", "parts": [{}]}, "exactly one"),
    ({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], "metadata": []}, "params.message.metadata"),
]
BAD_MESSAGES_03 = [
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"text": 5}]}, "params.message.content[0].text"),
    ({"messageId": "m", "role": "user", "content": [{"text": "x"}]}, "params.message.role"),
    ({"messageId": "m", "role": "ROLE_UNSPECIFIED", "content": [{"text": "x"}]}, "params.message.role"),
    ({"role": "ROLE_USER", "content": [{"text": "x"}]}, "params.message.messageId"),
    ({"messageId": "m", "role": "ROLE_USER", "content": []}, "params.message.content"),
    ({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "`content`, not `parts`"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{}]}, "params.message.content[0]"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"kind": "text", "text": "x"}, {"kind": "text"}]},
     "params.message.content[1].kind"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x", "data": {"data": {}}}]}, "exactly one"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"file": {"fileWithUri": "u", "fileWithBytes": "AA=="}}]},
     "params.message.content[0].file"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"file": {"fileWithBytes": "%%%"}}]},
     "params.message.content[0].file.fileWithBytes"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"file": {}}]}, "params.message.content[0].file"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"data": {"data": [1, 2]}}]},
     "params.message.content[0].data.data"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"data": {}}]}, "params.message.content[0].data.data"),
    ({"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x", "metadata": "no"}]},
     "params.message.content[0].metadata"),
    ({"messageId": "m", "role": "ROLE_USER", "content": "x"}, "params.message.content"),
    ({"messageId": 7, "role": "ROLE_USER", "content": [{"text": "x"}]}, "params.message.messageId"),
]


MESSAGE_CASES = [("1.0", *c) for c in BAD_MESSAGES_10] + [("0.3", *c) for c in BAD_MESSAGES_03]


@pytest.mark.parametrize(("binding_", "msg", "fragment"), MESSAGE_CASES, ids=[f"{c[0]}-{c[2]}" for c in MESSAGE_CASES])
def test_bad_message_fields_are_named(server, binding_, msg, fragment):
    resp = http.post(url(server, binding_, "/message:send"), json={"message": msg}, headers=hdrs(binding_))
    assert_error(resp, 400, "INVALID_PARAMS", fragment)


BAD_CONFIGURATIONS = [
    ("1.0", {"returnImmediately": "yes"}, "params.configuration.returnImmediately"),
    ("1.0", {"historyLength": "x"}, "params.configuration.historyLength"),
    ("1.0", {"acceptedOutputModes": "text/plain"}, "params.configuration.acceptedOutputModes"),
    ("0.3", {"blocking": "yes"}, "params.configuration.blocking"),
    ("0.3", {"historyLength": "x"}, "params.configuration.historyLength"),
    ("0.3", {"historyLength": 1.5}, "params.configuration.historyLength"),
    ("0.3", {"historyLength": -1}, "params.configuration.historyLength"),
    ("0.3", {"acceptedOutputModes": "text/plain"}, "params.configuration.acceptedOutputModes"),
    ("0.3", {"acceptedOutputModes": [1]}, "params.configuration.acceptedOutputModes[0]"),
    ("0.3", {"pushNotification": {"token": "t"}}, "params.configuration.pushNotification.url"),
    ("0.3", "not an object", "params.configuration"),
]


@pytest.mark.parametrize(("binding_", "conf", "fragment"), BAD_CONFIGURATIONS,
                         ids=[f"{c[0]}-{c[2]}" for c in BAD_CONFIGURATIONS])
def test_bad_configuration_fields_are_named(server, binding_, conf, fragment):
    body = message_body(binding_, "x", configuration=conf)
    resp = http.post(url(server, binding_, "/message:send"), json=body, headers=hdrs(binding_))
    assert_error(resp, 400, "INVALID_PARAMS", fragment)


def test_negative_history_length_in_a_1_0_send(server):
    resp = http.post(url(server, "1.0", "/message:send"),
                     json=message_body("1.0", "x", configuration={"historyLength": -1}), headers=hdrs("1.0"))
    assert_error(resp, 400, "INVALID_PARAMS", "historyLength")


# Odd bodies a fuzzer would try: every one is a 4xx, none a 500.
ODD_BODIES = [
    {"message": None}, {"message": []}, {"message": "hi"}, {"message": {}}, {"message": {"content": None}},
    {"request": {"messageId": "m", "role": 99, "content": [{"text": "x"}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"file": {"fileWithUri": 3}}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "%%%"}]}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": None, "text": None}]}},
    {"message": {"messageId": "m" * 10, "role": "ROLE_USER", "content": [{"text": "x"}], "taskId": 5}},
    {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x"}]}, "metadata": [1]},
    {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x"}]}, "configuration": []},
    {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x"}], "parts": [{"text": 1}]},
     "configuration": {"blocking": None, "historyLength": "1e3"}},
]


@pytest.mark.parametrize("body", ODD_BODIES)
def test_odd_bodies_are_client_errors(server, binding, body):
    for path in ("/message:send", "/message:stream"):
        resp = http.post(url(server, binding, path), json=body, headers=hdrs(binding))
        assert 400 <= resp.status_code < 500, f"{path}: {resp.status_code} {resp.text}"
        error_reason(resp)


# --- wrong paths and verbs ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/message:sned", "/messages:send", "/tasks/x/y", "/tasks/x:bogus",
                                  "/tasks/x/pushNotificationConfigs/a/b", "/card/x", "/nope"])
def test_unknown_paths_are_404(server, binding, path):
    resp = http.get(url(server, binding, path), headers=hdrs(binding))
    assert_error(resp, 404, "METHOD_NOT_FOUND")


@pytest.mark.parametrize("path", ["/v1", "/v1/", "/v1/message", "/v1/v1/message:send", "/v2/message:send"])
def test_unknown_0_3_and_other_prefix_paths_are_404(server, path):
    resp = http.post(server.url + path, json={})
    assert resp.status_code == 404, resp.text
    assert error_reason(resp) == "METHOD_NOT_FOUND"


WRONG_VERBS = [
    ("GET", "/message:send", "POST"),
    ("PUT", "/message:stream", "POST"),
    ("DELETE", "/tasks/x", "GET"),
    ("POST", "/tasks/x", "GET"),
    ("GET", "/tasks/x:cancel", "POST"),
    ("DELETE", "/tasks/x:subscribe", "GET, POST"),
    ("PATCH", "/tasks", "GET"),
    ("DELETE", "/tasks/x/pushNotificationConfigs", "GET, POST"),
    ("POST", "/tasks/x/pushNotificationConfigs/c", "DELETE, GET"),
]


@pytest.mark.parametrize(("verb", "path", "allow"), WRONG_VERBS)
def test_wrong_verbs_are_405_with_allow(server, binding, verb, path, allow):
    resp = http.request(verb, url(server, binding, path), headers=hdrs(binding))
    assert resp.status_code == 405, resp.text
    assert resp.headers["allow"] == allow
    assert error_reason(resp) == "METHOD_NOT_ALLOWED"


def test_wrong_verbs_on_card_routes(server):
    resp = http.post(f"{server.url}/v1/card")
    assert resp.status_code == 405 and resp.headers["allow"] == "GET"
    resp = http.delete(f"{server.url}/extendedAgentCard", headers={"A2A-Version": "1.0"})
    assert resp.status_code == 405 and resp.headers["allow"] == "GET"


# --- unknown ids ---------------------------------------------------------------------------------


def test_unknown_task_ids_are_404_task_not_found(server, binding):
    for verb, path in [("GET", "/tasks/nope"), ("POST", "/tasks/nope:cancel"), ("GET", "/tasks/nope:subscribe"),
                       ("POST", "/tasks/nope:subscribe")]:
        resp = http.request(verb, url(server, binding, path), headers=hdrs(binding))
        assert_error(resp, 404, "TASK_NOT_FOUND", "nope")
    resp = http.post(url(server, binding, "/message:send"), json=message_body(binding, "x", task_id="nope"),
                     headers=hdrs(binding))
    assert_error(resp, 404, "TASK_NOT_FOUND")
    resp = http.post(url(server, binding, "/message:stream"), json=message_body(binding, "x", task_id="nope"),
                     headers=hdrs(binding))
    assert_error(resp, 404, "TASK_NOT_FOUND")


def test_unknown_task_for_push_configs(serve, binding):
    from rest_support import push_app

    srv = serve(push_app())
    base = url(srv, binding, "/tasks/nope/pushNotificationConfigs")
    resp = http.get(base, headers=hdrs(binding))
    assert_error(resp, 404, "TASK_NOT_FOUND")
    resp = http.get(f"{base}/c", headers=hdrs(binding))
    assert_error(resp, 404, "TASK_NOT_FOUND")


def test_ids_in_the_body_must_match_the_url(server, binding):
    body = {"id": "other"} if binding == "1.0" else {"name": "tasks/other"}
    resp = http.post(url(server, binding, "/tasks/mine:cancel"), json=body, headers=hdrs(binding))
    assert_error(resp, 400, "INVALID_PARAMS")


def test_0_3_push_config_names_must_match_the_url(serve):
    from rest_support import push_app

    srv = serve(push_app())
    base = f"{srv.url}/v1/tasks/t1/pushNotificationConfigs"
    for body, fragment in [
        ({"name": "tasks/t2/pushNotificationConfigs/c", "pushNotificationConfig": {"url": "u"}}, "params.name"),
        ({"name": "bogus", "pushNotificationConfig": {"url": "u"}}, "params.name"),
        ({"parent": "tasks/t2", "config": {"pushNotificationConfig": {"url": "u"}}}, "params.parent"),
        ({"config": {"pushNotificationConfig": {"url": "u", "id": "a"}}, "configId": "b"}, "params.configId"),
        ({"config": {"pushNotificationConfig": {"url": "u", "authentication": {"schemes": []}}}},
         "params.config.pushNotificationConfig.authentication.schemes"),
        ({"pushNotificationConfig": {}}, "params.pushNotificationConfig.url"),
    ]:
        resp = http.post(base, json=body)
        assert_error(resp, 400, "INVALID_PARAMS", fragment)


# --- bad query parameters -----------------------------------------------------------------------

BAD_QUERIES = [
    ("/tasks/x", {"historyLength": "abc"}, "historyLength"),
    ("/tasks/x", {"historyLength": "-1"}, "historyLength"),
    ("/tasks", {"pageSize": "abc"}, "pageSize"),
    ("/tasks", {"pageSize": "0"}, "pageSize"),
    ("/tasks", {"pageSize": "1000"}, "pageSize"),
    ("/tasks", {"historyLength": "-2"}, "historyLength"),
    ("/tasks", {"includeArtifacts": "maybe"}, "includeArtifacts"),
    ("/tasks", {"status": "TASK_STATE_BOGUS"}, "status"),
    ("/tasks", {"statusTimestampAfter": "yesterday"}, "statusTimestampAfter"),
    ("/tasks", {"pageToken": "not-a-token"}, ""),
]


@pytest.mark.parametrize(("path", "query", "fragment"), BAD_QUERIES)
def test_bad_query_parameters_are_400(server, binding, path, query, fragment):
    if path == "/tasks/x":  # a real task, so the query is what fails
        created = http.post(url(server, binding, "/message:send"), json=message_body(binding, "x"),
                            headers=hdrs(binding)).json()["task"]
        path = f"/tasks/{created['id']}"
    resp = http.get(url(server, binding, path), params=query, headers=hdrs(binding))
    assert_error(resp, 400, "INVALID_PARAMS", fragment)


def test_status_spelling_of_the_other_binding_is_refused(server, binding):
    other = "TASK_STATE_CANCELLED" if binding == "1.0" else "TASK_STATE_CANCELED"
    resp = http.get(url(server, binding, "/tasks"), params={"status": other}, headers=hdrs(binding))
    assert_error(resp, 400, "INVALID_PARAMS", "status")


# --- headers: versions, Last-Event-ID ---------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.0", "0.2", "abc", "1.x"])
def test_unsupported_versions(server, binding, version):
    resp = http.post(url(server, binding, "/message:send"), json=message_body(binding, "x"),
                     headers={"A2A-Version": version})
    assert_error(resp, 400, "VERSION_NOT_SUPPORTED")


def test_bad_last_event_id(server, binding):
    task = http.post(url(server, binding, "/message:send"), json=message_body(binding, "x"),
                     headers=hdrs(binding)).json()["task"]
    resp = http.get(url(server, binding, f"/tasks/{task['id']}:subscribe"),
                    headers=hdrs(binding, **{"Last-Event-ID": "abc"}))
    assert_error(resp, 400, "INVALID_REQUEST", "Last-Event-ID")


def test_body_over_the_limit_is_413(serve, binding):
    app = Parley(settings=Settings(max_body_bytes=512))
    for agent in builtin_agents():
        app.add_agent(agent)
    srv = serve(app)
    body = message_body(binding, "x" * 2000)
    resp = http.post(url(srv, binding, "/message:send"), json=body, headers=hdrs(binding))
    assert resp.status_code == 413
    assert error_reason(resp) == "INVALID_REQUEST"


def test_no_request_in_this_module_produced_a_500(serve, binding):
    """A catch-all sweep: every verb on every route with junk, on a server with a slow agent."""
    srv = serve(slow_app())
    paths = ["/message:send", "/message:stream", "/tasks", "/tasks/x", "/tasks/x:cancel", "/tasks/x:subscribe",
             "/tasks/x/pushNotificationConfigs", "/tasks/x/pushNotificationConfigs/y",
             "/card" if binding == "0.3" else "/extendedAgentCard"]
    for path in paths:
        for verb in ("GET", "POST", "DELETE", "PUT", "PATCH"):
            for content in (b"", b"{", b"[1]", b'{"message": 1, "id": 2, "name": 3, "config": 4}'):
                resp = http.request(verb, url(srv, binding, path), content=content,
                                    params={"historyLength": "x", "pageSize": "-1"}, headers=hdrs(binding))
                assert resp.status_code < 500, f"{verb} {path} {content!r}: {resp.status_code} {resp.text}"
