"""A2A 1.0 section 11.1: HTTP+JSON uses `application/a2a+json` for responses.

1.0 HTTP+JSON answers and error bodies are `application/a2a+json` unless the request's Accept
prefers `application/json`; streams stay `text/event-stream`; the 0.3 binding under `/v1/` keeps
answering `application/json`. Everything over HTTP runs against a live server on 127.0.0.1.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from parley.server.rest_base import A2A_JSON, JSON, negotiate_json

V1 = {"A2A-Version": "1.0"}
ONLY_JSON = {"Accept": "application/json"}


def _ctype(resp: httpx.Response) -> str:
    return resp.headers["content-type"].split(";")[0].strip()


def _body(text: str) -> dict:
    return {"message": {"messageId": f"m-{uuid.uuid4().hex[:10]}", "role": "ROLE_USER", "parts": [{"text": text}]}}


@pytest.mark.parametrize("accept,expected", [
    (None, A2A_JSON),
    ("", A2A_JSON),
    ("*/*", A2A_JSON),
    ("application/*", A2A_JSON),
    ("application/a2a+json", A2A_JSON),
    ("application/json", JSON),
    ("Application/JSON; charset=utf-8", JSON),
    ("application/json, */*;q=0.1", JSON),
    ("application/json, application/a2a+json", A2A_JSON),
    ("application/json;q=0.5, application/a2a+json", A2A_JSON),
    ("application/json, application/a2a+json;q=0", JSON),
    ("text/event-stream", A2A_JSON),
])
def test_negotiation(accept, expected):
    """§11.1: a2a+json SHOULD be used; application/json only when the client prefers it."""
    assert negotiate_json(accept) == expected


def test_1_0_answers_are_a2a_json_by_default(server):
    sent = httpx.post(f"{server.url}/message:send", headers=V1, json=_body("x"))
    assert sent.status_code == 200 and _ctype(sent) == A2A_JSON
    task_id = sent.json()["task"]["id"]
    for resp in (httpx.get(f"{server.url}/tasks/{task_id}", headers=V1),
                 httpx.get(f"{server.url}/tasks", headers=V1),
                 httpx.get(f"{server.url}/a2a/echo/tasks/{task_id}", headers=V1)):
        assert resp.status_code == 200 and _ctype(resp) == A2A_JSON, resp.headers


def test_1_0_answers_application_json_when_only_that_is_accepted(server):
    sent = httpx.post(f"{server.url}/message:send", headers={**V1, **ONLY_JSON}, json=_body("y"))
    assert sent.status_code == 200 and _ctype(sent) == JSON
    got = httpx.get(f"{server.url}/tasks/{sent.json()['task']['id']}", headers={**V1, **ONLY_JSON})
    assert _ctype(got) == JSON and got.json()["id"] == sent.json()["task"]["id"]


def test_1_0_error_bodies_are_a2a_json_too(server):
    """Errors of every kind: an A2A error, no route, a wrong verb, a bad version, an unknown agent."""
    cases = [
        ("GET", f"{server.url}/tasks/nope", 404),
        ("GET", f"{server.url}/no-such-operation", 404),
        ("DELETE", f"{server.url}/message:send", 405),
        ("GET", f"{server.url}/a2a/nobody/tasks", 404),
    ]
    for method, url, status in cases:
        resp = httpx.request(method, url, headers=V1)
        assert resp.status_code == status and _ctype(resp) == A2A_JSON, (url, resp.headers)
        assert "error" in resp.json()
        again = httpx.request(method, url, headers={**V1, **ONLY_JSON})
        assert again.status_code == status and _ctype(again) == JSON, (url, again.headers)
    versionless = httpx.post(f"{server.url}/message:send", json=_body("z"))  # 1.0 route without A2A-Version
    assert versionless.status_code == 400 and _ctype(versionless) == A2A_JSON


def test_streams_stay_event_streams(server):
    with httpx.stream("POST", f"{server.url}/message:stream", headers=V1, json=_body("s")) as resp:
        assert resp.status_code == 200 and _ctype(resp) == "text/event-stream"
        resp.read()


def test_0_3_http_json_is_unchanged(server):
    """The 0.3 binding (under /v1/) answers application/json, errors included."""
    body = {"message": {"messageId": f"m-{uuid.uuid4().hex[:10]}", "role": "ROLE_USER", "content": [{"text": "x"}]}}
    sent = httpx.post(f"{server.url}/v1/message:send", json=body)
    assert sent.status_code == 200 and _ctype(sent) == JSON
    missing = httpx.get(f"{server.url}/v1/tasks/nope")
    assert missing.status_code == 404 and _ctype(missing) == JSON
    unknown_agent = httpx.get(f"{server.url}/a2a/nobody/v1/tasks/nope")
    assert unknown_agent.status_code == 404 and _ctype(unknown_agent) == JSON
