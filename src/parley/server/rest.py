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

Errors are `google.rpc.Status` bodies with an `ErrorInfo` reason and the
HTTP status of A2A 1.0 section 5.4. The route table is plain data so that
matching a path is independent of Starlette.

`RestEndpoint` is also the machinery of the A2A 0.3 HTTP+JSON binding
(`server/rest_v03.py`), which subclasses it with its own route table, dialect
and version rule; `{base}/v1/...` paths are dispatched there.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from parley.protocol import v1_0
from parley.protocol.codec import dumps, loads
from parley.protocol.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from parley.protocol.jsonrpc import negotiate_version
from parley.protocol.operations import Operation
from parley.server.http import KEEPALIVE_FRAME, SSE_HEADERS, last_event_id, read_body, requested_extensions, sse_frame
from parley.server.service import A2AService, CallContext
from parley.tasks.log import Entry
from parley.telemetry import hooks as telemetry

log = logging.getLogger("parley.rest")

A2A_JSON = "application/a2a+json"
JSON = "application/json"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
ERROR_DOMAIN = "a2a-protocol.org"

_ID = r"(?P<id>[^/:]+)"
_TASK = r"(?P<taskId>[^/:]+)"

ROUTES: list[tuple[re.Pattern[str], dict[str, Operation]]] = [
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

# Query parameters whose values are not strings.
_INT_PARAMS = {"historyLength", "pageSize"}
_BOOL_PARAMS = {"includeArtifacts", "returnImmediately"}


@dataclass(slots=True)
class RestMatch:
    """A matched REST route: the operation and the path parameters."""

    op: Operation
    params: dict[str, str]


class MethodNotAllowed(A2AError):
    """A known path with the wrong HTTP verb (HTTP 405)."""

    code = -32601
    default_message = "Method not allowed"
    http_status = 405
    reason = "METHOD_NOT_ALLOWED"
    grpc_status = "UNIMPLEMENTED"

    def __init__(self, message: str, allowed: list[str]) -> None:
        super().__init__(message)
        self.allowed = allowed


Routes = list[tuple[re.Pattern[str], dict[str, Operation]]]

# A2A 0.3 HTTP+JSON paths carry this prefix below the agent's base URL; 1.0 dropped it.
V03_PREFIX = "v1"


def is_v03_path(path: str) -> bool:
    """Whether a path below an agent's base URL belongs to the 0.3 binding (`v1` or `v1/...`)."""
    path = path.strip("/")
    return path == V03_PREFIX or path.startswith(V03_PREFIX + "/")


def match(method: str, path: str, routes: Routes = ROUTES) -> RestMatch:
    """Find the operation for `method` on `path` (relative to the agent's base URL)."""
    path = path.strip("/")
    for pattern, verbs in routes:
        found = pattern.fullmatch(path)
        if found is None:
            continue
        op = verbs.get(method)
        if op is None:
            allowed = sorted(verbs)
            raise MethodNotAllowed(f"{method} is not allowed on /{path}; use {', '.join(allowed)}", allowed)
        return RestMatch(op, {k: v for k, v in found.groupdict().items() if v is not None})
    raise MethodNotFoundError(f"No A2A operation at /{path}")


def query_params(request: Request, ints: set[str] = _INT_PARAMS, bools: set[str] = _BOOL_PARAMS) -> dict[str, Any]:
    """Query parameters with the types the request messages expect (`ints`, `bools`; the rest are strings)."""
    out: dict[str, Any] = {}
    for key, value in request.query_params.items():
        if key == "A2A-Version":
            continue
        if key in ints:
            try:
                out[key] = int(value)
            except ValueError:
                raise InvalidParamsError(f"Invalid params: query parameter `{key}` must be an integer") from None
        elif key in bools:
            if value not in ("true", "false"):
                raise InvalidParamsError(f"Invalid params: query parameter `{key}` must be true or false")
            out[key] = value == "true"
        else:
            out[key] = value
    return out


def status_obj(error: A2AError) -> dict[str, Any]:
    """A google.rpc.Status error (as JSON-ready data) with an ErrorInfo detail."""
    return {
        "error": {
            "code": error.http_status,
            "status": error.grpc_status,
            "message": error.message,
            "details": [{"@type": ERROR_INFO, "reason": error.reason, "domain": ERROR_DOMAIN, "metadata": {}}],
        }
    }


def status_body(error: A2AError) -> bytes:
    """A google.rpc.Status error body with an ErrorInfo detail."""
    return dumps(status_obj(error))


class RestEndpoint:
    """Serves the A2A 1.0 HTTP+JSON binding for every hosted agent (and dispatches 0.3's `/v1/...`).

    Subclasses (the 0.3 binding) set `version`, `dialect`, `routes`, the typed
    query parameters, and override `check_version`, `error_body` and `unary`.
    """

    version = "1.0"
    dialect: Any = v1_0
    routes: Routes = ROUTES
    int_params: set[str] = _INT_PARAMS
    bool_params: set[str] = _BOOL_PARAMS

    def __init__(self, service: A2AService, max_body_bytes: int) -> None:
        self.service = service
        self.max_body_bytes = max_body_bytes
        self._v03: RestEndpoint | None = None

    # --- A2A 0.3 HTTP+JSON dispatch: `{base}/v1/...` is served by server/rest_v03.py -------------

    @property
    def v03(self) -> RestEndpoint:
        """The 0.3 HTTP+JSON endpoint sharing this endpoint's service."""
        if self._v03 is None:
            from parley.server.rest_v03 import RestV03Endpoint

            self._v03 = RestV03Endpoint(self.service, self.max_body_bytes)
        return self._v03

    async def handle(self, request: Request, agent_id: str, owner: str, path: str) -> Response:
        """Route one REST request: `v1/...` paths to the 0.3 binding, the rest to 1.0."""
        if is_v03_path(path):
            return await self.v03.serve(request, agent_id, owner, path)
        return await self.serve(request, agent_id, owner, path)

    # --- the shared machinery ---------------------------------------------------------------

    async def serve(self, request: Request, agent_id: str, owner: str, path: str) -> Response:
        """Match, decode, dispatch and encode one request of this endpoint's binding version."""
        media = _media_type(request)
        try:
            found = match(request.method, path, self.routes)
            telemetry.a2a_request("HTTP+JSON", agent_id, found.op, self.version)  # telemetry: request span
            self.check_version(request, path)
            params = await self._params(request, found)
            req = self.dialect.decode(found.op, params)
            telemetry.a2a_method(found.op, self.version, req)  # telemetry: method, version, task id
            ctx = CallContext(
                agent_id=agent_id, owner=owner, version=self.version, extensions=requested_extensions(request)
            )
            if found.op.streams:
                if found.op is Operation.SUBSCRIBE:
                    ctx.last_event_id = last_event_id(request)
                events = telemetry.stream_events(await self.service.stream(ctx, found.op, req))  # telemetry
                return StreamingResponse(self._sse(events), media_type="text/event-stream", headers=SSE_HEADERS)
            result = await self.unary(request, ctx, found.op, req, path)
            telemetry.a2a_result(result)  # telemetry: task id
            if found.op is Operation.PUSH_DELETE:
                return Response(b"{}", media_type=media)
            encoded = self.dialect.encode_result(found.op, result)
            return Response(dumps(encoded), media_type=media)
        except MethodNotAllowed as exc:
            telemetry.a2a_error(exc)  # telemetry: error.type
            return Response(
                self.error_body(exc), status_code=405, media_type=media, headers={"Allow": ", ".join(exc.allowed)}
            )
        except A2AError as exc:
            telemetry.a2a_error(exc)  # telemetry: error.type
            return Response(self.error_body(exc), status_code=exc.http_status, media_type=media)
        except Exception:
            log.exception("unexpected error handling a REST request")
            err = InternalError()
            telemetry.a2a_error(err)  # telemetry: error.type
            return Response(self.error_body(err), status_code=500, media_type=media)

    def check_version(self, request: Request, path: str) -> None:
        """Refuse requests that ask for another protocol version than this binding's."""
        if negotiate_version(_version(request)) != "1.0":
            raise VersionNotSupportedError(
                f"{request.method} /{path.strip('/')} is an A2A 1.0 HTTP+JSON operation but the request asks "
                "for 0.3 (no A2A-Version header); send the header `A2A-Version: 1.0`"
            )

    def error_body(self, error: A2AError) -> bytes:
        """The error body of this binding."""
        return status_body(error)

    async def unary(self, request: Request, ctx: CallContext, op: Operation, req: Any, path: str) -> Any:
        """Run a unary operation (the 0.3 binding answers its card route itself)."""
        return await self.service.call(ctx, op, req)

    async def _params(self, request: Request, found: RestMatch) -> dict[str, Any]:
        params: dict[str, Any] = query_params(request, self.int_params, self.bool_params)
        if request.method in ("POST", "PUT", "PATCH"):
            body = await read_body(request, self.max_body_bytes)
            if body.strip():
                data = loads(body)
                if not isinstance(data, dict):
                    raise InvalidRequestError("Invalid request: the body must be a JSON object")
                params.update(data)
        for key, value in found.params.items():
            if key in params and params[key] != value:
                raise InvalidParamsError(f"Invalid params: `{key}` in the body does not match the URL ({value!r})")
            params[key] = value
        return params

    async def _sse(self, events: AsyncIterator[Entry | None]) -> AsyncIterator[bytes]:
        try:
            async for entry in events:
                if entry is None:
                    yield KEEPALIVE_FRAME
                    continue
                yield sse_frame(dumps(self.dialect.encode_event(entry.event)), entry.seq)
        except A2AError as exc:
            yield sse_frame(self.error_body(exc), event="error")
        except Exception:
            log.exception("REST stream failed")
            yield sse_frame(self.error_body(InternalError()), event="error")


def _version(request: Request) -> str | None:
    return request.headers.get("a2a-version") or request.query_params.get("A2A-Version")


def _media_type(request: Request) -> str:
    accept = request.headers.get("accept", "")
    ctype = request.headers.get("content-type", "")
    return A2A_JSON if A2A_JSON in accept or ctype.startswith(A2A_JSON) else JSON
