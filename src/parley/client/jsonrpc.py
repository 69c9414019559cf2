"""The client side of the JSON-RPC binding, in either protocol version."""

from __future__ import annotations

import itertools
import types
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from parley.client.errors import ClientError
from parley.protocol import models as m
from parley.protocol import v0_3, v1_0, v1_1
from parley.protocol.errors import A2AError, InvalidAgentResponseError, InvalidParamsError, error_from_jsonrpc
from parley.protocol.operations import Operation
from parley.telemetry import hooks as telemetry

_METHOD_NAMES: dict[str, dict[Operation, str]] = {
    "1.0": {op: name for name, op in v1_0.METHODS.items()},
    "1.1": {op: name for name, op in v1_1.METHODS.items()},  # the dev-1.1 draft: generation (docs/protocol.md)
    "0.3": {op: name for name, op in v0_3.METHODS.items()},
}


@dataclass(slots=True)
class StreamItem:
    """One event of a stream, with its SSE id (for resuming) if the server sent one."""

    event: m.StreamEvent
    event_id: str | None


class JsonRpcTransport:
    """Calls one agent's JSON-RPC endpoint in A2A 1.0 or 0.3."""

    binding = "JSONRPC"

    def __init__(self, http: httpx.AsyncClient, url: str, version: str) -> None:
        if version not in _METHOD_NAMES:
            raise ClientError(f"unsupported protocol version {version!r}")
        self.http = http
        self.url = url
        self.version = version
        self.dialect: types.ModuleType = {"1.0": v1_0, "1.1": v1_1}.get(version, v0_3)
        self._ids = itertools.count(1)

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"A2A-Version": self.version}
        if extra:
            headers.update(extra)
        headers.update(telemetry.trace_headers())  # telemetry: traceparent of the call's span
        return headers

    def _body(self, op: Operation, request: Any) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": _METHOD_NAMES[self.version][op],
            "params": self.dialect.encode_request(op, request),
        }

    @telemetry.traced_call  # telemetry: a CLIENT span per call (calls straight through when off)
    async def call(self, op: Operation, request: Any) -> Any:
        """A unary call; returns the canonical result or raises the server's A2A error."""
        try:
            resp = await self.http.post(self.url, json=self._body(op, request), headers=self._headers())
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {self.url}: {exc.__class__.__name__}: {exc}") from None
        data = _json(resp, self.url)
        if "error" in data:
            raise error_from_jsonrpc(data["error"] if isinstance(data["error"], dict) else {})
        if "result" not in data:
            raise ClientError(f"{self.url} answered a JSON-RPC response without result or error")
        return _checked(self.url, self.dialect.decode_result, op, data["result"])

    @telemetry.traced_stream  # telemetry: a CLIENT span per stream (calls straight through when off)
    async def stream(self, op: Operation, request: Any, last_event_id: str | None = None) -> AsyncIterator[StreamItem]:
        """A streaming call; yields events until the server closes the stream."""
        headers = self._headers({"Accept": "text/event-stream"})
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        decode = v1_0.decode_stream_event if self.version in ("1.0", "1.1") else _decode_v03_event
        try:
            async with aconnect_sse(self.http, "POST", self.url, json=self._body(op, request), headers=headers) as src:
                ctype = src.response.headers.get("content-type", "")
                if not ctype.startswith("text/event-stream"):
                    await src.response.aread()
                    data = _json(src.response, self.url)
                    if "error" in data:
                        raise error_from_jsonrpc(data["error"] if isinstance(data["error"], dict) else {})
                    raise ClientError(f"{self.url} did not answer with an event stream")
                async for sse in src.aiter_sse():
                    if not sse.data:
                        continue
                    try:
                        payload = sse.json()
                    except ValueError:
                        raise ClientError(f"{self.url} sent an event that is not JSON") from None
                    if not isinstance(payload, dict):
                        raise ClientError(f"{self.url} sent an event that is not a JSON-RPC response")
                    if "error" in payload:
                        raise error_from_jsonrpc(payload["error"] if isinstance(payload["error"], dict) else {})
                    yield StreamItem(_checked(self.url, decode, payload.get("result")), sse.id or None)
        except SSEError as exc:
            raise ClientError(f"{self.url}: {exc}") from None
        except httpx.HTTPStatusError as exc:
            raise ClientError(f"{self.url} answered HTTP {exc.response.status_code}") from None


def _checked(url: str, decode: Any, *args: Any) -> Any:
    """Decode a result; a result that does not validate is the agent's fault (-32006)."""
    try:
        return decode(*args)
    except InvalidParamsError as exc:
        detail = exc.message.removeprefix("Invalid params: ").removeprefix("Invalid result: ")
        raise InvalidAgentResponseError(f"{url} sent an invalid result: {detail}") from None


def _decode_v03_event(data: Any) -> m.StreamEvent:
    return v0_3.decode_result(Operation.STREAM, data)


def _json(resp: httpx.Response, url: str) -> dict[str, Any]:
    try:
        data = resp.json()
    except ValueError:
        raise ClientError(f"{url} answered HTTP {resp.status_code} with a body that is not JSON") from None
    if not isinstance(data, dict):
        raise ClientError(f"{url} answered HTTP {resp.status_code} with JSON that is not a JSON-RPC response")
    if resp.status_code >= 400 and "error" not in data:
        raise ClientError(f"{url} answered HTTP {resp.status_code}")
    return data


__all__ = ["A2AError", "JsonRpcTransport", "StreamItem"]
