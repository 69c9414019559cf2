"""The machinery of the HTTP+JSON (REST) bindings: route tables, typed query parameters, error bodies.

:class:`RestEndpoint` matches a path below an agent's base URL to an operation,
merges path, query and body parameters, decodes them with the binding's dialect
into a :class:`~parley.server.pipeline.Call` and encodes what the pipeline returns.
The two bindings subclass it with their own route table, dialect and version rule:
A2A 1.0 (:mod:`parley.server.rest`) and A2A 0.3 under `v1/` (:mod:`parley.server.rest_v03`).

Errors are `google.rpc.Status` bodies with an `ErrorInfo` reason and the HTTP
status of A2A 1.0 section 5.4. Route tables are plain data, so matching a path is
independent of Starlette.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response

from parley.protocol.codec import dumps, loads
from parley.protocol.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
)
from parley.protocol.names import proto_name
from parley.protocol.operations import Operation
from parley.server.http import (
    KEEPALIVE_FRAME,
    SSE_HEADERS,
    STOPPING_FRAME,
    EventStreamResponse,
    credentials_of,
    last_event_id,
    read_body,
    requested_extensions,
    require_json,
    sse_frame,
)
from parley.server.pipeline import AgentUrl, Call, Pipeline
from parley.tasks.bus import StreamsEnded
from parley.tasks.log import Entry

log = logging.getLogger("parley.rest")

A2A_JSON = "application/a2a+json"
JSON = "application/json"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
ERROR_DOMAIN = "a2a-protocol.org"
V03_PREFIX = "v1"  # A2A 0.3 HTTP+JSON paths carry this prefix below the agent's base URL; 1.0 dropped it

Routes = list[tuple[re.Pattern[str], dict[str, Operation]]]


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
        super().__init__(message, headers={"Allow": ", ".join(allowed)})
        self.allowed = allowed


def is_v03_path(path: str) -> bool:
    """Whether a path below an agent's base URL belongs to the 0.3 binding (`v1` or `v1/...`)."""
    path = path.strip("/")
    return path == V03_PREFIX or path.startswith(V03_PREFIX + "/")


def match(method: str, path: str, routes: Routes) -> RestMatch:
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


def query_params(request: Request, ints: set[str], bools: set[str]) -> dict[str, Any]:
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
            "details": [{"@type": ERROR_INFO, "reason": error.reason, "domain": ERROR_DOMAIN,
                         "metadata": error.info or {}}],
        }
    }


def status_body(error: A2AError) -> bytes:
    """A google.rpc.Status error body with an ErrorInfo detail."""
    return dumps(status_obj(error))


def version_requested(request: Request) -> str | None:
    """The `A2A-Version` the request asks for (header, else query parameter)."""
    return request.headers.get("a2a-version") or request.query_params.get("A2A-Version")


class RestEndpoint:
    """Serves one HTTP+JSON binding for every hosted agent.

    Subclasses set `binding_version`, `dialect`, `routes` and the typed query
    parameters, and override `check_version` and `error_body`.
    """

    binding_version = "1.0"
    dialect: Any = None
    routes: ClassVar[Routes] = []
    int_params: ClassVar[set[str]] = set()
    bool_params: ClassVar[set[str]] = set()

    def __init__(self, pipeline: Pipeline, max_body_bytes: int, keepalive: float = 15.0) -> None:
        self.pipeline = pipeline
        self.max_body_bytes = max_body_bytes
        self.keepalive = keepalive

    async def serve(self, request: Request, agent_id: str, path: str, agent_url: AgentUrl) -> Response:
        """Match, decode, run through the pipeline and encode one request of this binding."""
        media = self.media_type(request)
        try:
            found = match(request.method, path, self.routes)  # no route: not an A2A request at all
        except A2AError as exc:
            return self._error(exc, media)

        async def decode() -> Call:
            self.check_version(request, path)
            params = await self._params(request, found)
            req = self.dialect_for(request).decode(found.op, params)
            resume = last_event_id(request) if found.op is Operation.SUBSCRIBE else None
            return Call(agent_id, found.op, req, self.binding_version, extensions=requested_extensions(request),
                        last_event_id=resume, agent_url=agent_url, idle=self.keepalive)

        try:
            outcome = await self.pipeline.serve("HTTP+JSON", credentials_of(request), decode, agent_id)
        except A2AError as exc:
            return self._error(exc, media)
        op = outcome.call.op
        if outcome.events is not None:
            headers = {**SSE_HEADERS, **outcome.headers} if outcome.headers else SSE_HEADERS
            return EventStreamResponse(self._sse(outcome.events, op, self.dialect_for(request)), headers=headers)
        if op is Operation.PUSH_DELETE:
            return Response(b"{}", media_type=media, headers=outcome.headers)
        return Response(dumps(self.dialect_for(request).encode_result(op, outcome.result)), media_type=media,
                        headers=outcome.headers)

    def _error(self, error: A2AError, media: str) -> Response:
        return Response(self.error_body(error), status_code=error.http_status, media_type=media,
                        headers=error.headers)

    def error_response(self, request: Request, error: A2AError) -> Response:
        """`error` as this binding answers it to `request` (body, HTTP status, media type)."""
        return self._error(error, self.media_type(request))

    def media_type(self, request: Request) -> str:
        """The media type of this binding's JSON answers to `request` (SSE is always text/event-stream).

        Here: `application/a2a+json` when the request uses it (Accept or Content-Type), else
        `application/json`, which is what 0.3 HTTP+JSON answers; the 1.0 binding negotiates instead.
        """
        accept = request.headers.get("accept", "")
        ctype = request.headers.get("content-type", "")
        return A2A_JSON if A2A_JSON in accept or ctype.startswith(A2A_JSON) else JSON

    def dialect_for(self, request: Request) -> Any:
        """The dialect that reads and writes `request` (the binding's, unless a subclass negotiates)."""
        return self.dialect

    def check_version(self, request: Request, path: str) -> None:
        """Refuse requests that ask for another protocol version than this binding's."""

    def error_body(self, error: A2AError) -> bytes:
        """The error body of this binding."""
        return status_body(error)

    async def _params(self, request: Request, found: RestMatch) -> dict[str, Any]:
        params: dict[str, Any] = query_params(request, self.int_params, self.bool_params)
        if request.method in ("POST", "PUT", "PATCH"):
            require_json(request)  # 415 before the body is read: no text/plain or form posts from other sites
            body = await read_body(request, self.max_body_bytes)
            if body.strip():
                data = loads(body, max_depth=self.pipeline.input_limits.max_json_depth)
                if not isinstance(data, dict):
                    raise InvalidRequestError("Invalid request: the body must be a JSON object")
                params.update(data)
        for key, value in found.params.items():
            for name in {key, proto_name(key)}:  # the body may name it either way (ProtoJSON)
                if name in params and params.pop(name) != value:
                    raise InvalidParamsError(
                        f"Invalid params: `{name}` in the body does not match the URL ({value!r})")
            params[key] = value
        return params

    async def _sse(self, events: AsyncIterator[Entry | None], op: Operation, dialect: Any) -> AsyncIterator[bytes]:
        ends_when_settled = op is not Operation.SUBSCRIBE  # a subscription goes on through input-required
        try:
            async for entry in events:
                if entry is None:
                    yield KEEPALIVE_FRAME
                    continue
                encoded = dialect.encode_event(entry.event, interrupted_final=ends_when_settled)
                yield sse_frame(dumps(encoded), entry.seq)
        except StreamsEnded:
            yield STOPPING_FRAME
        except A2AError as exc:
            yield sse_frame(self.error_body(exc), event="error")
        except Exception:
            log.exception("REST stream failed")
            yield sse_frame(self.error_body(InternalError()), event="error")


def negotiate_json(accept: str | None) -> str:
    """`application/a2a+json` (A2A 1.0 section 11.1), unless `accept` prefers `application/json` to it.

    Each type gets the quality of the most specific Accept range that matches it (RFC 9110 section
    12.5.1); `application/json` wins only with a higher one (`Accept: application/json`, or
    `application/json, */*;q=0.1`). No Accept, `*/*`, a tie, or neither acceptable: application/a2a+json.
    """
    if not accept or not accept.strip():
        return A2A_JSON
    best: dict[str, tuple[int, float]] = {}  # candidate -> (specificity, quality) of its best range
    for item in accept.split(","):
        kind, *params = (p.strip() for p in item.split(";"))
        kind = kind.lower()
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 1.0
        for candidate in (A2A_JSON, JSON):
            specificity = 3 if kind == candidate else 2 if kind == "application/*" else 1 if kind == "*/*" else 0
            if specificity and specificity > best.get(candidate, (0, 0.0))[0]:
                best[candidate] = (specificity, quality)
    a2a_q = best.get(A2A_JSON, (0, 0.0))[1]
    json_q = best.get(JSON, (0, 0.0))[1]
    return JSON if json_q > a2a_q else A2A_JSON


__all__ = ["A2A_JSON", "JSON", "MethodNotAllowed", "RestEndpoint", "RestMatch", "Routes", "is_v03_path", "match",
           "negotiate_json", "query_params", "status_body", "status_obj", "version_requested"]
