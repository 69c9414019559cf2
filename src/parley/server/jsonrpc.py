"""The JSON-RPC 2.0 binding: one POST endpoint per agent, both protocol versions.

JSON-RPC errors travel with HTTP 200, as the official SDKs expect; only
transport failures (body over the limit: 413) use other statuses. Streaming
methods answer with SSE whose frames carry `id: <seq>` from the task's log.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from parley.protocol import jsonrpc
from parley.protocol.codec import dumps
from parley.protocol.errors import A2AError, InternalError
from parley.protocol.jsonrpc import EnvelopeError, RpcRequest
from parley.protocol.operations import Operation
from parley.server.http import KEEPALIVE_FRAME, SSE_HEADERS, last_event_id, read_body, requested_extensions, sse_frame
from parley.server.service import A2AService, CallContext
from parley.tasks.log import Entry
from parley.telemetry import hooks as telemetry

log = logging.getLogger("parley.jsonrpc")
JSON = "application/json"
ERROR_DOMAIN = "a2a-protocol.org"


def error_body(request_id: Any, error: A2AError, version: str) -> bytes:
    """A JSON-RPC error response; 1.0 errors carry a google.rpc.ErrorInfo in `data`."""
    body = jsonrpc.failure_obj(request_id, error)
    if version == "1.0" and error.data is None:
        body["error"]["data"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": error.reason,
                "domain": ERROR_DOMAIN,
                "metadata": {},
            }
        ]
    return dumps(body)


class JsonRpcEndpoint:
    """Handles `POST` to an agent's JSON-RPC URL."""

    def __init__(self, service: A2AService, max_body_bytes: int) -> None:
        self.service = service
        self.max_body_bytes = max_body_bytes

    async def handle(self, request: Request, agent_id: str, owner: str) -> Response:
        """Parse, dispatch and answer one JSON-RPC request."""
        rpc: RpcRequest | None = None
        version = "0.3"
        telemetry.a2a_request("JSONRPC", agent_id)  # telemetry: request span
        try:
            body = await read_body(request, self.max_body_bytes)
            rpc = jsonrpc.parse_request(body, _version_header(request))
            version = rpc.dialect.VERSION
            req = rpc.dialect.decode(rpc.op, rpc.params)
            telemetry.a2a_method(rpc.op, version, req)  # telemetry: method, version, task id
            ctx = CallContext(agent_id=agent_id, owner=owner, version=version, extensions=requested_extensions(request))
            if rpc.op.streams:
                if rpc.op is Operation.SUBSCRIBE:
                    ctx.last_event_id = last_event_id(request)
                events = telemetry.stream_events(await self.service.stream(ctx, rpc.op, req))  # telemetry
                return StreamingResponse(
                    self._sse(rpc, events), media_type="text/event-stream", headers=SSE_HEADERS
                )
            result = await self.service.call(ctx, rpc.op, req)
            telemetry.a2a_result(result)  # telemetry: task id
            if rpc.op is Operation.EXTENDED_CARD:
                encoded = result
            else:
                encoded = rpc.dialect.encode_result(rpc.op, result)
            return Response(jsonrpc.success(rpc.id, encoded), media_type=JSON)
        except EnvelopeError as exc:
            return self._error(exc.request_id, exc.error, version)
        except A2AError as exc:
            return self._error(rpc.id if rpc else None, exc, version)
        except Exception:
            log.exception("unexpected error handling a JSON-RPC request")
            return self._error(rpc.id if rpc else None, InternalError(), version)

    def _error(self, request_id: Any, error: A2AError, version: str) -> Response:
        telemetry.a2a_error(error)  # telemetry: error.type
        status = error.http_status if error.http_status in (401, 403, 413) else 200
        return Response(error_body(request_id, error, version), status_code=status, media_type=JSON)

    async def _sse(self, rpc: RpcRequest, events: AsyncIterator[Entry | None]) -> AsyncIterator[bytes]:
        encode = rpc.dialect.encode_event
        try:
            async for entry in events:
                if entry is None:
                    yield KEEPALIVE_FRAME
                    continue
                payload = dumps(jsonrpc.success_obj(rpc.id, encode(entry.event)))
                yield sse_frame(payload, entry.seq)
        except A2AError as exc:
            yield sse_frame(error_body(rpc.id, exc, rpc.dialect.VERSION), event="error")
        except Exception:
            log.exception("stream failed")
            yield sse_frame(error_body(rpc.id, InternalError(), rpc.dialect.VERSION), event="error")


def _version_header(request: Request) -> str | None:
    """The requested A2A version: the header, else the `A2A-Version` query parameter."""
    return request.headers.get("a2a-version") or request.query_params.get("A2A-Version")

