"""The HTTP+JSON (REST) binding of A2A 1.0, served under each agent's base URL.

    POST   {base}/message:send            SendMessage
    POST   {base}/message:stream          SendStreamingMessage (SSE, `id: <seq>`)
    GET    {base}/tasks/{id}              GetTask (?historyLength=)
    GET    {base}/tasks                   ListTasks (?contextId=&status=&pageSize=&pageToken=...)
    POST   {base}/tasks/{id}:cancel       CancelTask
    GET|POST {base}/tasks/{id}:subscribe  SubscribeToTask (SSE)
    POST   {base}/tasks/{id}/pushNotificationConfigs            Create
    GET    {base}/tasks/{id}/pushNotificationConfigs            List
    GET    {base}/tasks/{id}/pushNotificationConfigs/{configId} Get
    DELETE {base}/tasks/{id}/pushNotificationConfigs/{configId} Delete
    GET    {base}/extendedAgentCard       GetExtendedAgentCard

JSON answers and error bodies are `application/a2a+json` (section 11.1) unless the
request's Accept prefers `application/json`; streams are `text/event-stream`. Bodies
and query parameters may name fields by their proto names too (`context_id`,
`page_size`: ProtoJSON, section 5.5).
Errors are `google.rpc.Status` bodies with an `ErrorInfo` reason and the HTTP
status of A2A 1.0 section 5.4. `{base}/v1/...` paths belong to the 0.3 binding
(:mod:`parley.server.rest_v03`); the machinery is :mod:`parley.server.rest_base`.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request

from parley.protocol import v1_0, v1_1
from parley.protocol.errors import A2AError, VersionNotSupportedError
from parley.protocol.jsonrpc import negotiate_version
from parley.protocol.names import typed_fields
from parley.protocol.operations import Operation
from parley.server.rest_base import RestEndpoint as RestBinding
from parley.server.rest_base import Routes, negotiate_json, version_requested

_ID = r"(?P<id>[^/:]+)"
_TASK = r"(?P<taskId>[^/:]+)"

ROUTES: Routes = [
    (re.compile(r"message:send"), {"POST": Operation.SEND}),
    (re.compile(r"message:stream"), {"POST": Operation.STREAM}),
    (re.compile(r"tasks"), {"GET": Operation.LIST}),
    (re.compile(rf"tasks/{_ID}"), {"GET": Operation.GET}),
    (re.compile(rf"tasks/{_ID}:cancel"), {"POST": Operation.CANCEL}),
    (re.compile(rf"tasks/{_ID}:subscribe"), {"GET": Operation.SUBSCRIBE, "POST": Operation.SUBSCRIBE}),
    (re.compile(rf"tasks/{_TASK}/pushNotificationConfigs"), {"POST": Operation.PUSH_SET, "GET": Operation.PUSH_LIST}),
    (
        re.compile(rf"tasks/{_TASK}/pushNotificationConfigs/{_ID}"),
        {"GET": Operation.PUSH_GET, "DELETE": Operation.PUSH_DELETE},
    ),
    (re.compile(r"extendedAgentCard"), {"GET": Operation.EXTENDED_CARD}),
]


class RestEndpoint(RestBinding):
    """Serves the A2A 1.0 HTTP+JSON binding for every hosted agent."""

    binding_version = "1.0"
    dialect: Any = v1_0
    routes = ROUTES
    # Query parameters that are not strings, by their JSON and their proto names (`pageSize`, `page_size`).
    int_params, bool_params = typed_fields(*set(v1_0.REQUEST_TYPES.values()))

    def media_type(self, request: Request) -> str:
        """`application/a2a+json`, unless the request's Accept prefers `application/json` (section 11.1)."""
        return negotiate_json(request.headers.get("accept"))

    def dialect_for(self, request: Request) -> Any:
        """1.1 (with `generation`, `?currentGeneration=`) when the request asks for it, else 1.0."""
        try:
            return v1_1 if negotiate_version(version_requested(request)) == "1.1" else v1_0
        except A2AError:
            return v1_0  # check_version says why

    def check_version(self, request: Request, path: str) -> None:
        if negotiate_version(version_requested(request)) not in ("1.0", "1.1"):
            raise VersionNotSupportedError(
                f"{request.method} /{path.strip('/')} is an A2A 1.0 HTTP+JSON operation but the request asks "
                "for 0.3 (no A2A-Version header); send the header `A2A-Version: 1.0`"
            )


__all__ = ["ROUTES", "RestEndpoint"]
