"""0.3 HTTP+JSON error bodies carry the A2A error's numeric `code`; Parley's REST client reads it.

A2A 1.0 section 3.3.2 / 5.4 give every A2A error a numeric code (TaskNotFoundError -32001, ...). 0.3-era
REST clients read error bodies differently: the a2a-js 0.3 client (`LegacyRestTransport`) maps a body
with a numeric top-level `code` and a string `message`; the a2a-sdk 1.x compat client maps the
top-level `type`; the 0.3.26 SDK client reads only the HTTP status. Parley's 0.3 error body carries all
of them, and Parley's own client, given a known numeric code, reports that error instead of guessing one
from the HTTP status.
"""

from __future__ import annotations

import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from parley.client.rest import RestTransport, error_from_response
from parley.protocol import errors as e
from parley.protocol import models as m
from parley.protocol.operations import Operation
from parley.server.rest_v03 import error_body
from support import LiveServer


@pytest.mark.parametrize("cls", [*e.ALL_ERRORS, *e.ACCESS_ERRORS])
def test_every_error_body_carries_its_code_and_message(cls):
    body = json.loads(error_body(cls("why")))
    assert body["code"] == cls.code and isinstance(body["code"], int)
    assert body["message"] == "why" == body["error"]["message"]
    assert body["error"]["code"] == cls.http_status  # the google.rpc.Status keeps the HTTP status


def test_live_0_3_errors_carry_the_numeric_code(server):
    """TaskNotFound on a 0.3 route: `"code": -32001` at the top level, beside the Status and `type`."""
    resp = httpx.get(f"{server.url}/v1/tasks/nope")
    body = resp.json()
    assert resp.status_code == 404 and body["code"] == -32001 and isinstance(body["message"], str)
    assert body["type"] == "TaskNotFoundError" and body["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
    cancel = httpx.post(f"{server.url}/v1/tasks/nope:cancel", json={})
    assert cancel.json()["code"] == -32001
    unknown_agent = httpx.get(f"{server.url}/a2a/nobody/v1/tasks/x")  # the 0.3 body for 0.3 paths here too
    assert unknown_agent.status_code == 404 and unknown_agent.json()["code"] == -32601


def test_1_0_error_bodies_stay_plain_status(server):
    """1.0 HTTP+JSON errors are the google.rpc.Status of section 11.6 only."""
    body = httpx.get(f"{server.url}/tasks/nope", headers={"A2A-Version": "1.0"}).json()
    assert set(body) == {"error"}


@pytest.mark.parametrize("status,body,expected", [
    (400, {"code": -32004, "message": "finished"}, e.UnsupportedOperationError),  # was -32600 from HTTP 400
    (400, {"code": -32002, "message": "no"}, e.TaskNotCancelableError),
    (404, {"code": -32001, "message": "gone"}, e.TaskNotFoundError),
    (400, {"code": -32099, "message": "?"}, e.InvalidRequestError),  # unknown code: the HTTP status decides
    (400, {"code": "-32004", "message": "?"}, e.InvalidRequestError),  # not a number
    (400, {"code": True, "message": "?"}, e.InvalidRequestError),  # a bool is no code
])
def test_client_maps_a_known_numeric_code(status, body, expected):
    err = error_from_response(status, body, Operation.GET, "http://x")
    assert type(err) is expected
    assert err.message == body["message"]


def test_client_prefers_the_error_info_reason():
    body = {"code": -32004, "message": "m", "error": {"code": 404, "message": "m", "details": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND"}]}}
    assert type(error_from_response(404, body, Operation.GET, "http://x")) is e.TaskNotFoundError


class _Foreign:
    """A 0.3 REST server of another SDK (a2a-js style error bodies: `{code, message}`), served on 127.0.0.1."""

    settings = None

    def asgi(self) -> Starlette:
        async def unsupported(request):
            return Response(json.dumps({"code": -32004, "message": "task is finished"}), status_code=400,
                            media_type="application/json")

        return Starlette(routes=[Route("/v1/tasks/{id}:cancel", unsupported, methods=["POST"]),
                                 Route("/v1/tasks/{id}", unsupported, methods=["GET"])])


async def test_parley_client_reports_the_servers_error_over_http():
    srv = LiveServer(_Foreign()).start()  # type: ignore[arg-type]
    try:
        async with httpx.AsyncClient(timeout=20) as http:
            transport = RestTransport(http, srv.url, "0.3")
            with pytest.raises(e.UnsupportedOperationError) as caught:
                await transport.call(Operation.CANCEL, m.CancelTaskRequest(id="t"))
            assert caught.value.code == -32004 and caught.value.message == "task is finished"
            with pytest.raises(e.UnsupportedOperationError):
                await transport.call(Operation.GET, m.GetTaskRequest(id="t"))
    finally:
        srv.stop()
