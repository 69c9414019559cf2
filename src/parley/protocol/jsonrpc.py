"""JSON-RPC 2.0 envelopes and A2A version negotiation (sans-IO).

`parse_request` checks the envelope and picks the dialect (0.3 or 1.0) from
the method name and the `A2A-Version` header, raising the precise error for
every malformed request.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from parley.protocol import v0_3, v1_0, v1_1
from parley.protocol.codec import dumps, loads
from parley.protocol.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from parley.protocol.operations import Operation

VERSION_HEADER = "A2A-Version"
SUPPORTED_VERSIONS = ("0.3", "1.0", "1.1")  # 1.1: the dev-1.1 draft (docs/protocol.md)

RequestId = str | int | None


@dataclass(slots=True)
class RpcRequest:
    """A checked JSON-RPC request: its id, operation, dialect and raw params."""

    id: RequestId
    method: str
    op: Operation
    dialect: types.ModuleType
    params: Any


class EnvelopeError(Exception):
    """An error found while reading the envelope, with the id if one was read."""

    def __init__(self, request_id: RequestId, error: A2AError) -> None:
        super().__init__(error.message)
        self.request_id = request_id
        self.error = error


def negotiate_version(header: str | None) -> str:
    """Major.minor of the requested version; missing means 0.3 (A2A 1.0 rules)."""
    if header is None or not header.strip():
        return "0.3"
    parts = header.strip().split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise VersionNotSupportedError(
            f"A2A-Version {header!r} is not a version; supported: {', '.join(SUPPORTED_VERSIONS)}"
        ) from None
    version = f"{major}.{minor}"
    if version not in SUPPORTED_VERSIONS:
        raise VersionNotSupportedError(
            f"A2A-Version {header!r} is not supported; supported: {', '.join(SUPPORTED_VERSIONS)}"
        )
    return version


def parse_request(body: bytes, version_header: str | None) -> RpcRequest:
    """Parse and check one JSON-RPC request body; raise EnvelopeError on failure."""
    try:
        data = loads(body)
    except A2AError as exc:
        raise EnvelopeError(None, exc) from None
    if isinstance(data, list):
        raise EnvelopeError(None, InvalidRequestError("Invalid request: batch requests are not supported"))
    if not isinstance(data, dict):
        raise EnvelopeError(None, InvalidRequestError("Invalid request: the body must be a JSON object"))
    rid = data.get("id")
    valid_id = rid is None or (isinstance(rid, (str, int)) and not isinstance(rid, bool))
    request_id: RequestId = rid if valid_id else None
    if data.get("jsonrpc") != "2.0":
        raise EnvelopeError(request_id, InvalidRequestError("Invalid request: `jsonrpc` must be \"2.0\""))
    if "id" not in data:
        raise EnvelopeError(None, InvalidRequestError("Invalid request: `id` is required (A2A has no notifications)"))
    if not valid_id:
        raise EnvelopeError(None, InvalidRequestError("Invalid request: `id` must be a string, an integer or null"))
    method = data.get("method")
    if not isinstance(method, str) or not method:
        raise EnvelopeError(request_id, InvalidRequestError("Invalid request: `method` must be a non-empty string"))
    params = data.get("params")
    if params is not None and not isinstance(params, dict):
        raise EnvelopeError(request_id, InvalidParamsError("Invalid params: `params` must be an object"))
    try:
        version = negotiate_version(version_header)
    except A2AError as exc:
        raise EnvelopeError(request_id, exc) from None
    if method in v0_3.METHODS:
        return RpcRequest(request_id, method, v0_3.METHODS[method], v0_3, params)
    if method in v1_0.METHODS:
        if version not in ("1.0", "1.1"):
            raise EnvelopeError(
                request_id,
                VersionNotSupportedError(
                    f"{method} is an A2A 1.0 method but the request asks for version {version}; "
                    f"send the header `{VERSION_HEADER}: 1.0`"
                ),
            )
        dialect = v1_1 if version == "1.1" else v1_0
        return RpcRequest(request_id, method, v1_0.METHODS[method], dialect, params)
    raise EnvelopeError(request_id, MethodNotFoundError(f"Method not found: {method!r}"))


def success(request_id: RequestId, result: Any) -> bytes:
    """A JSON-RPC success response body."""
    return dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def success_obj(request_id: RequestId, result: Any) -> dict[str, Any]:
    """A JSON-RPC success response as a dict (for SSE frames)."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def failure(request_id: RequestId, error: A2AError) -> bytes:
    """A JSON-RPC error response body."""
    return dumps(failure_obj(request_id, error))


def failure_obj(request_id: RequestId, error: A2AError) -> dict[str, Any]:
    """A JSON-RPC error response as a dict."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_jsonrpc()}
