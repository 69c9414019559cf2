"""The client side of the HTTP+JSON (REST) binding, in A2A 1.0 or 0.3.

1.0 paths hang off the interface URL (`{url}/message:send`, `{url}/tasks/{id}`, ...);
0.3 paths carry a `/v1` prefix and ProtoJSON bodies of the 0.3 schema
(`protocol/v0_3_rest.py`). Errors come back as `google.rpc.Status` bodies; the
`ErrorInfo.reason` names the typed error; bodies without one but with a known numeric
A2A error code at the top level (0.3 servers such as a2a-js: `{"code": -32004, "message":
...}`) are mapped by that code, and the rest (the 0.3.26 SDK answers `{"message": ...}`)
by HTTP status.
"""

from __future__ import annotations

import types
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, aconnect_sse

from parley.client.card import normalise_card
from parley.client.errors import ClientError
from parley.client.jsonrpc import StreamItem, _checked
from parley.protocol import errors as e
from parley.protocol import v0_3_rest, v1_0
from parley.protocol.operations import Operation
from parley.telemetry import hooks as telemetry

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"

# (HTTP method, path template) per operation; `{name}` is filled from the encoded request.
ROUTES: dict[str, dict[Operation, tuple[str, str]]] = {
    "1.0": {
        Operation.SEND: ("POST", "/message:send"),
        Operation.STREAM: ("POST", "/message:stream"),
        Operation.GET: ("GET", "/tasks/{id}"),
        Operation.LIST: ("GET", "/tasks"),
        Operation.CANCEL: ("POST", "/tasks/{id}:cancel"),
        Operation.SUBSCRIBE: ("POST", "/tasks/{id}:subscribe"),
        Operation.PUSH_SET: ("POST", "/tasks/{taskId}/pushNotificationConfigs"),
        Operation.PUSH_GET: ("GET", "/tasks/{taskId}/pushNotificationConfigs/{id}"),
        Operation.PUSH_LIST: ("GET", "/tasks/{taskId}/pushNotificationConfigs"),
        Operation.PUSH_DELETE: ("DELETE", "/tasks/{taskId}/pushNotificationConfigs/{id}"),
        Operation.EXTENDED_CARD: ("GET", "/extendedAgentCard"),
    },
    "0.3": {
        Operation.SEND: ("POST", "/v1/message:send"),
        Operation.STREAM: ("POST", "/v1/message:stream"),
        Operation.GET: ("GET", "/v1/tasks/{id}"),
        Operation.LIST: ("GET", "/v1/tasks"),
        Operation.CANCEL: ("POST", "/v1/tasks/{id}:cancel"),
        Operation.SUBSCRIBE: ("GET", "/v1/tasks/{id}:subscribe"),
        Operation.PUSH_SET: ("POST", "/v1/tasks/{taskId}/pushNotificationConfigs"),
        Operation.PUSH_GET: ("GET", "/v1/tasks/{taskId}/pushNotificationConfigs/{id}"),
        Operation.PUSH_LIST: ("GET", "/v1/tasks/{taskId}/pushNotificationConfigs"),
        Operation.PUSH_DELETE: ("DELETE", "/v1/tasks/{taskId}/pushNotificationConfigs/{id}"),
        Operation.EXTENDED_CARD: ("GET", "/v1/card"),
    },
}

_BY_REASON: dict[str, type[e.A2AError]] = {
    cls.reason: cls for cls in (*e.ALL_ERRORS, *e.ACCESS_ERRORS)
}
_BY_REASON["METHOD_NOT_ALLOWED"] = e.MethodNotFoundError

# Fallbacks by HTTP status for bodies without an ErrorInfo reason (the 0.3.26 SDK server's statuses included).
_BY_STATUS: dict[int, type[e.A2AError]] = {
    400: e.InvalidRequestError,
    401: e.UnauthenticatedError,
    403: e.PermissionDeniedError,
    429: e.RateLimitedError,
    405: e.MethodNotFoundError,
    409: e.TaskNotCancelableError,
    413: e.PayloadTooLargeError,
    415: e.ContentTypeNotSupportedError,
    422: e.InvalidParamsError,
    500: e.InternalError,
    502: e.InvalidAgentResponseError,
}
_TASK_OPS = {Operation.GET, Operation.CANCEL, Operation.SUBSCRIBE, Operation.PUSH_SET, Operation.PUSH_GET,
             Operation.PUSH_LIST, Operation.PUSH_DELETE}
_PUSH_OPS = {Operation.PUSH_SET, Operation.PUSH_GET, Operation.PUSH_LIST, Operation.PUSH_DELETE}


class RestTransport:
    """Calls one agent's HTTP+JSON interface in A2A 1.0 or 0.3."""

    binding = "HTTP+JSON"

    def __init__(self, http: httpx.AsyncClient, url: str, version: str) -> None:
        if version not in ROUTES:
            raise ClientError(f"unsupported HTTP+JSON protocol version {version!r}")
        self.http = http
        self.url = url.rstrip("/")
        self.version = version
        self.dialect: types.ModuleType = v1_0 if version == "1.0" else v0_3_rest

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"A2A-Version": self.version}
        if extra:
            headers.update(extra)
        headers.update(telemetry.trace_headers())  # telemetry: traceparent of the call's span
        return headers

    def _request(self, op: Operation, request: Any) -> tuple[str, str, dict[str, Any], dict[str, Any] | None]:
        """(HTTP method, URL, query, JSON body or None) for one operation."""
        method, template = ROUTES[self.version][op]
        params = dict(self.dialect.encode_request(op, request) or {})
        tenant = params.pop("tenant", None) if self.version == "1.0" else None
        path = template
        for name in ("taskId", "id"):
            if "{" + name + "}" in path:
                value = params.pop(name, None)
                if not isinstance(value, str) or not value:
                    raise ClientError(f"{op.value}: `{name}` is required")
                path = path.replace("{" + name + "}", quote(value, safe=""))
        if tenant:
            path = "/" + quote(tenant, safe="") + path
        url = self.url + path
        if method in ("GET", "DELETE"):
            return method, url, _query(params), None
        if op is Operation.SUBSCRIBE and not params:
            return method, url, {}, None
        return method, url, {}, params

    @telemetry.traced_call  # telemetry: a CLIENT span per call (calls straight through when off)
    async def call(self, op: Operation, request: Any) -> Any:
        """A unary call; returns the canonical result or raises the server's A2A error."""
        method, url, query, body = self._request(op, request)
        try:
            resp = await self.http.request(method, url, params=query, json=body, headers=self._headers())
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {url}: {exc.__class__.__name__}: {exc}") from None
        if resp.status_code >= 400:
            raise error_from_response(resp.status_code, _json_or_none(resp), op, url)
        if op is Operation.PUSH_DELETE:
            return None
        data = _json_or_none(resp)
        if data is None:
            raise ClientError(f"{method} {url} answered HTTP {resp.status_code} with a body that is not JSON")
        if op is Operation.EXTENDED_CARD:
            return normalise_card(data)
        return _checked(url, self.dialect.decode_result, op, data)

    @telemetry.traced_stream  # telemetry: a CLIENT span per stream (calls straight through when off)
    async def stream(self, op: Operation, request: Any, last_event_id: str | None = None) -> AsyncIterator[StreamItem]:
        """A streaming call; yields events until the server closes the stream."""
        method, url, query, body = self._request(op, request)
        headers = self._headers({"Accept": "text/event-stream"})
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        decode = self.dialect.decode_stream_event
        try:
            async with aconnect_sse(self.http, method, url, params=query, json=body, headers=headers) as src:
                resp = src.response
                if resp.status_code >= 400:
                    await resp.aread()
                    raise error_from_response(resp.status_code, _json_or_none(resp), op, url)
                if not resp.headers.get("content-type", "").startswith("text/event-stream"):
                    await resp.aread()
                    raise ClientError(f"{method} {url} did not answer with an event stream")
                async for sse in src.aiter_sse():
                    if not sse.data:
                        continue
                    try:
                        payload = sse.json()
                    except ValueError:
                        raise ClientError(f"{url} sent an event that is not JSON") from None
                    if sse.event == "error" or (isinstance(payload, dict) and "error" in payload):
                        raise error_from_response(200, payload, op, url)
                    yield StreamItem(_checked(url, decode, payload), sse.id or None)
        except SSEError as exc:
            raise ClientError(f"{url}: {exc}") from None


def error_from_response(status: int, body: Any, op: Operation, url: str) -> Exception:
    """The typed A2A error of an HTTP+JSON error answer: by the ErrorInfo reason, else by a known numeric
    A2A error code at the top of the body (0.3 servers: `{"code": -32001, "message": ...}`), else by the
    HTTP status."""
    err = body.get("error") if isinstance(body, dict) else None
    message = None
    reason = None
    if isinstance(err, dict):
        message = err.get("message")
        for detail in err.get("details") or []:
            if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO:
                reason = detail.get("reason")
                break
        if status == 200 and isinstance(err.get("code"), int):
            status = err["code"]
    if message is None and isinstance(body, dict):
        message = body.get("message")
    cls = _BY_REASON.get(reason) if isinstance(reason, str) else None
    if cls is None and isinstance(body, dict):
        cls = e.error_class(body.get("code"))
        if cls is e.TaskGenerationMismatchError and status == 401:  # an older Parley's -32010 (one release)
            cls = e.UnauthenticatedError
    if cls is None:
        if status == 404:
            cls = e.TaskNotFoundError if op in _TASK_OPS else e.MethodNotFoundError
        elif status == 501:
            cls = e.PushNotificationNotSupportedError if op in _PUSH_OPS else e.UnsupportedOperationError
        else:
            cls = _BY_STATUS.get(status)
    if cls is None:
        detail = f": {message}" if isinstance(message, str) and message else ""
        return ClientError(f"{url} answered HTTP {status}{detail}")
    return cls(str(message) if message else None)


def _query(params: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def _json_or_none(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


__all__ = ["RestTransport", "error_from_response"]
