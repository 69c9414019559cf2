"""The HTTP+JSON (REST) binding of A2A 0.3, served under each agent's base URL at `/v1/...`.

    POST     {base}/v1/message:send                    SendMessage -> {task} | {message}
    POST     {base}/v1/message:stream                  SendStreamingMessage (SSE, `id: <seq>`, StreamResponse)
    GET      {base}/v1/tasks/{id}                      GetTask (?historyLength=)
    GET      {base}/v1/tasks                           ListTasks (Parley extension; 1.0's query, 0.3 shapes)
    POST     {base}/v1/tasks/{id}:cancel               CancelTask
    GET|POST {base}/v1/tasks/{id}:subscribe            TaskSubscription (SSE; Last-Event-ID replays)
    POST     {base}/v1/tasks/{id}/pushNotificationConfigs            CreateTaskPushNotificationConfig
    GET      {base}/v1/tasks/{id}/pushNotificationConfigs            ListTaskPushNotificationConfig
    GET      {base}/v1/tasks/{id}/pushNotificationConfigs/{configId} GetTaskPushNotificationConfig
    DELETE   {base}/v1/tasks/{id}/pushNotificationConfigs/{configId} DeleteTaskPushNotificationConfig
    GET      {base}/v1/card                            GetAgentCard (the card in 0.3 shape)

Bodies are the ProtoJSON of the 0.3 protobuf schema (`protocol/v0_3_rest.py`).
A request without `A2A-Version` is 0.3 (A2A 1.0 section 3.6.2); one that asks
for another version gets 400 VERSION_NOT_SUPPORTED. Errors are the same
`google.rpc.Status` bodies as in 1.0, with three extra top-level members that the
official 0.3-era clients read: `message` (the 0.3.26 SDK server's error body),
`type` (the error class name the a2a-sdk 1.3 compat REST client maps to a typed
error, e.g. `TaskNotFoundError`) and `code`, the A2A error's numeric code (-32001),
which the a2a-js 0.3 REST client (`LegacyRestTransport`) maps to a typed error when
the body has a numeric `code` and a string `message`. SSE `error` events carry the
same body.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request

from parley.protocol import v0_3_rest
from parley.protocol.codec import dumps
from parley.protocol.errors import A2AError, VersionNotSupportedError
from parley.protocol.jsonrpc import negotiate_version
from parley.protocol.operations import Operation
from parley.server.rest_base import RestEndpoint, Routes, status_obj, version_requested

_ID = r"(?P<id>[^/:]+)"
_TASK = r"(?P<taskId>[^/:]+)"

ROUTES: Routes = [
    (re.compile(r"v1/message:send"), {"POST": Operation.SEND}),
    (re.compile(r"v1/message:stream"), {"POST": Operation.STREAM}),
    (re.compile(r"v1/tasks"), {"GET": Operation.LIST}),
    (re.compile(rf"v1/tasks/{_ID}"), {"GET": Operation.GET}),
    (re.compile(rf"v1/tasks/{_ID}:cancel"), {"POST": Operation.CANCEL}),
    (re.compile(rf"v1/tasks/{_ID}:subscribe"), {"GET": Operation.SUBSCRIBE, "POST": Operation.SUBSCRIBE}),
    (re.compile(rf"v1/tasks/{_TASK}/pushNotificationConfigs"), {"POST": Operation.PUSH_SET, "GET": Operation.PUSH_LIST}),
    (
        re.compile(rf"v1/tasks/{_TASK}/pushNotificationConfigs/{_ID}"),
        {"GET": Operation.PUSH_GET, "DELETE": Operation.PUSH_DELETE},
    ),
    (re.compile(r"v1/card"), {"GET": Operation.CARD}),
]

# Query parameters whose values are not strings (JSON names and proto names).
_INT_PARAMS = {"historyLength", "history_length", "pageSize", "page_size"}
_BOOL_PARAMS = {"includeArtifacts", "include_artifacts"}

# The class names the a2a-sdk 1.3 compat REST client maps back to typed errors (its `type` lookup).
SDK_ERROR_TYPES = {
    "PARSE_ERROR": "JSONParseError",
    "INVALID_REQUEST": "InvalidRequestError",
    "METHOD_NOT_FOUND": "MethodNotFoundError",
    "INVALID_PARAMS": "InvalidParamsError",
    "INTERNAL_ERROR": "InternalError",
    "TASK_NOT_FOUND": "TaskNotFoundError",
    "TASK_NOT_CANCELABLE": "TaskNotCancelableError",
    "PUSH_NOTIFICATION_NOT_SUPPORTED": "PushNotificationNotSupportedError",
    "UNSUPPORTED_OPERATION": "UnsupportedOperationError",
    "CONTENT_TYPE_NOT_SUPPORTED": "ContentTypeNotSupportedError",
    "INVALID_AGENT_RESPONSE": "InvalidAgentResponseError",
    "EXTENDED_AGENT_CARD_NOT_CONFIGURED": "ExtendedAgentCardNotConfiguredError",
    "EXTENSION_SUPPORT_REQUIRED": "ExtensionSupportRequiredError",
    "VERSION_NOT_SUPPORTED": "VersionNotSupportedError",
}

def error_body(error: A2AError) -> bytes:
    """google.rpc.Status, plus the top-level `type`, `code` and `message` 0.3-era clients read."""
    body: dict[str, Any] = {}
    sdk_type = SDK_ERROR_TYPES.get(error.reason)
    if sdk_type is not None:
        body["type"] = sdk_type
    body["code"] = error.code  # the A2A (JSON-RPC) error code, e.g. -32001 for TaskNotFoundError
    body["message"] = error.message
    body.update(status_obj(error))
    return dumps(body)


class RestV03Endpoint(RestEndpoint):
    """Serves the A2A 0.3 HTTP+JSON binding (`{base}/v1/...`) for every hosted agent."""

    binding_version = "0.3"
    dialect: Any = v0_3_rest
    routes = ROUTES
    int_params = _INT_PARAMS
    bool_params = _BOOL_PARAMS

    def check_version(self, request: Request, path: str) -> None:
        requested = negotiate_version(version_requested(request))
        if requested != "0.3":
            raise VersionNotSupportedError(
                f"{request.method} /{path.strip('/')} is an A2A 0.3 HTTP+JSON operation but the request asks for "
                f"A2A {requested}; A2A 1.0 HTTP+JSON paths have no `/v1` prefix (e.g. POST {{base}}/message:send), "
                "or leave out the A2A-Version header to speak 0.3 here"
            )

    def error_body(self, error: A2AError) -> bytes:
        return error_body(error)


__all__ = ["ROUTES", "RestV03Endpoint", "error_body"]
