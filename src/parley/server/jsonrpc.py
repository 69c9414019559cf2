"""The JSON-RPC 2.0 binding: one POST endpoint per agent, both protocol versions.

It decodes the envelope and params into a :class:`~parley.server.pipeline.Call`,
hands it to the request pipeline, and encodes the answer. JSON-RPC errors travel
with HTTP 200, as the official SDKs expect; only transport failures (body over the
limit: 413; a body that is not JSON: 415) and access refusals (401, 403, 429) use other statuses. Streaming methods
answer with SSE whose frames carry `id: <seq>` from the task's log.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from parley.protocol import jsonrpc, v1_0
from parley.protocol.codec import dumps, json_depth_limit
from parley.protocol.errors import A2AError, InternalError
from parley.protocol.jsonrpc import EnvelopeError, RpcRequest
from parley.protocol.operations import Operation
from parley.server.cards import card_v03, card_v1
from parley.server.http import (
    KEEPALIVE_FRAME,
    SSE_HEADERS,
    STOPPING_FRAME,
    EventStreamResponse,
    JsonResponse,
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
                "metadata": error.info or {},
            }
        ]
    return dumps(body)


class JsonRpcEndpoint:
    """Handles `POST` to an agent's JSON-RPC URL."""

    def __init__(self, pipeline: Pipeline, max_body_bytes: int, keepalive: float = 15.0) -> None:
        self.pipeline = pipeline
        self.max_body_bytes = max_body_bytes
        self.keepalive = keepalive

    async def handle(self, request: Request, agent_id: str, agent_url: AgentUrl) -> Response:
        """Decode, run through the pipeline and answer one JSON-RPC request."""
        seen: dict[str, Any] = {}  # what decoding learnt before any error: the request id and version

        async def decode() -> Call:
            require_json(request)  # 415 before the body is read: no text/plain or form posts from other sites
            body = await read_body(request, self.max_body_bytes)
            try:
                with json_depth_limit(self.pipeline.input_limits.max_json_depth):
                    rpc = jsonrpc.parse_request(body, _version_header(request))
            except EnvelopeError as exc:
                seen["id"] = exc.request_id
                raise exc.error from None
            seen["id"], seen["version"] = rpc.id, rpc.dialect.VERSION
            if rpc.dialect.VERSION == "1.0" and not v1_0.may_hold_proto_names(body):  # no proto names to look for
                req = rpc.dialect.decode(rpc.op, rpc.params, proto_names=False)
            else:
                req = rpc.dialect.decode(rpc.op, rpc.params)
            resume = last_event_id(request) if rpc.op is Operation.SUBSCRIBE else None
            return Call(agent_id, rpc.op, req, rpc.dialect.VERSION, extensions=requested_extensions(request),
                        last_event_id=resume, agent_url=agent_url, idle=self.keepalive, tag=rpc)

        try:
            outcome = await self.pipeline.serve("JSONRPC", credentials_of(request), decode, agent_id)
        except A2AError as exc:
            return self._error(seen.get("id"), exc, seen.get("version", "0.3"))
        rpc: RpcRequest = outcome.call.tag
        if outcome.events is not None:
            headers = {**SSE_HEADERS, **outcome.headers} if outcome.headers else SSE_HEADERS
            return EventStreamResponse(self._sse(rpc, outcome.events), headers=headers)
        result = outcome.result
        if rpc.op is Operation.EXTENDED_CARD:  # the card of the caller's version
            encoded = card_v1(result) if rpc.dialect.VERSION == "1.0" else card_v03(result)
        elif rpc.op is Operation.SEND and (encode_json := getattr(rpc.dialect, "encode_send_result_json", None)):
            # The answer straight from the struct to JSON, in the envelope jsonrpc.success gives it (1.0).
            return JsonResponse(b'{"jsonrpc":"2.0","id":' + dumps(rpc.id) + b',"result":' + encode_json(result) + b"}",
                                headers=outcome.headers)
        else:
            encoded = rpc.dialect.encode_result(rpc.op, result)
        return JsonResponse(jsonrpc.success(rpc.id, encoded), headers=outcome.headers)

    def _error(self, request_id: Any, error: A2AError, version: str) -> Response:
        status = error.http_status if error.http_status in (401, 403, 413, 415, 429, 503) else 200
        headers = error.headers
        return Response(error_body(request_id, error, version), status_code=status, media_type=JSON, headers=headers)

    async def _sse(self, rpc: RpcRequest, events: AsyncIterator[Entry | None]) -> AsyncIterator[bytes]:
        encode = rpc.dialect.encode_event
        # A dialect that encodes its events straight to JSON (1.0) skips the dicts; the envelope around each event
        # is the same bytes every time: {"jsonrpc":"2.0","id":ID,"result":EVENT}, as jsonrpc.success_obj makes it.
        encode_json = getattr(rpc.dialect, "encode_event_json", None)
        head = b'{"jsonrpc":"2.0","id":' + dumps(rpc.id) + b',"result":'
        ends_when_settled = rpc.op is not Operation.SUBSCRIBE  # a subscription goes on through input-required
        try:
            async for entry in events:
                if entry is None:
                    yield KEEPALIVE_FRAME
                    continue
                if encode_json is not None:  # sse_frame(head + event + b"}", entry.seq), in one step
                    yield b"id: %d\ndata: %b%b}\n\n" % (entry.seq, head,
                                                         encode_json(entry.event, interrupted_final=ends_when_settled))
                else:
                    payload = dumps(jsonrpc.success_obj(rpc.id,
                                                        encode(entry.event, interrupted_final=ends_when_settled)))
                    yield sse_frame(payload, entry.seq)
        except StreamsEnded:
            yield STOPPING_FRAME
        except A2AError as exc:
            yield sse_frame(error_body(rpc.id, exc, rpc.dialect.VERSION), event="error")
        except Exception:
            log.exception("stream failed")
            yield sse_frame(error_body(rpc.id, InternalError(), rpc.dialect.VERSION), event="error")


def _version_header(request: Request) -> str | None:
    """The requested A2A version: the header, else the `A2A-Version` query parameter."""
    return request.headers.get("a2a-version") or request.query_params.get("A2A-Version")
