"""The client side of the gRPC binding (A2A 1.0, `lf.a2a.v1.A2AService`).

    transport = GrpcTransport(None, "127.0.0.1:50051", "1.0", tenant="echo")
    client = A2AClient(transport)

The interface URL is the gRPC target: `host:port`, or with a scheme,
`grpc://` / `http://` (plaintext) or `grpcs://` / `https://` (TLS, port 443 by
default); a path is ignored. `tenant` (the card interface's tenant) goes into
every request that does not name one. Every call carries `a2a-version: 1.0`.

Server errors come back as the `parley.protocol.errors` class named by the
`google.rpc.ErrorInfo` reason in the `grpc-status-details-bin` trailer, or,
without one, by the status code; an unreachable server is a ClientError that
says "cannot reach". gRPC streams carry no event ids, so StreamItem.event_id
is None.

Importing this module registers the binding "GRPC" (version 1.0) with
:mod:`parley.client.transports`; it needs the `parley-a2a[grpc]` extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import grpc
import grpc.aio
from google.rpc import error_details_pb2, status_pb2

from parley.client import transports
from parley.client.errors import ClientError
from parley.client.jsonrpc import StreamItem
from parley.grpc import a2a_pb2_grpc, convert
from parley.protocol.errors import (
    ACCESS_ERRORS,
    ALL_ERRORS,
    A2AError,
    InternalError,
    InvalidParamsError,
    PermissionDeniedError,
    RateLimitedError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from parley.protocol.operations import Operation
from parley.telemetry import hooks as telemetry

BINDING = "GRPC"
VERSIONS = {"1.0"}
ERROR_DOMAIN = "a2a-protocol.org"
STATUS_DETAILS_KEY = "grpc-status-details-bin"

_BY_REASON: dict[str, type[A2AError]] = {cls.reason: cls for cls in (*ALL_ERRORS, *ACCESS_ERRORS)}
_BY_CODE: dict[grpc.StatusCode, type[A2AError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidParamsError,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNKNOWN: InternalError,
    grpc.StatusCode.UNIMPLEMENTED: UnsupportedOperationError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RateLimitedError,
}
_SECURE_SCHEMES = {"grpcs": 443, "https": 443}
_PLAIN_SCHEMES = {"grpc": 80, "http": 80}


def parse_target(url: str) -> tuple[str, bool]:
    """(gRPC target `host:port`, whether to use TLS) for an interface URL."""
    if "://" not in url:
        return url.strip().rstrip("/"), False
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SECURE_SCHEMES and scheme not in _PLAIN_SCHEMES:
        raise ClientError(f"{url!r} is not a gRPC address (use host:port, grpc://, grpcs://, http:// or https://)")
    if not parts.hostname:
        raise ClientError(f"{url!r} has no host")
    port = parts.port or _SECURE_SCHEMES.get(scheme) or _PLAIN_SCHEMES[scheme]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", scheme in _SECURE_SCHEMES


def error_from_rpc(exc: grpc.aio.AioRpcError, url: str) -> Exception:
    """The A2A error (or ClientError) a failed gRPC call stands for."""
    code = exc.code()
    details = exc.details() or ""
    if code is grpc.StatusCode.UNAVAILABLE:
        return ClientError(f"cannot reach {url}: {details}")
    if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
        return ClientError(f"{url}: gRPC {code.name}: {details}")
    status = _rich_status(exc.trailing_metadata())
    if status is not None:
        for detail in status.details:
            if not detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                continue
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            cls = _BY_REASON.get(info.reason) if info.domain == ERROR_DOMAIN else None
            if cls is not None:
                return cls(status.message or details or None)
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls(details or None)
    err = A2AError(f"gRPC {code.name}: {details}")
    err.grpc_status = code.name  # type: ignore[misc]
    return err


def _rich_status(metadata: Any) -> status_pb2.Status | None:
    for key, value in metadata or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except Exception:  # noqa: BLE001 - unreadable details: the status code alone says it
                return None
            return status
    return None


class GrpcTransport:
    """Calls an A2A 1.0 agent over gRPC."""

    binding = BINDING

    def __init__(
        self,
        http: Any,
        url: str,
        version: str = "1.0",
        *,
        tenant: str | None = None,
        metadata: list[tuple[str, str]] | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float | None = None,
    ) -> None:
        if version not in VERSIONS:
            raise ClientError(f"the gRPC binding is A2A 1.0 only, not {version!r}")
        self.http = http  # unused; kept so that A2AClient can close a pool it owns
        self.url = url
        self.version = version
        self.tenant = tenant or None
        self.timeout = timeout
        self.target, secure = parse_target(url)
        self._credentials = credentials or (grpc.ssl_channel_credentials() if secure else None)
        self._extra = list(metadata or [])
        self._channel: grpc.aio.Channel | None = None
        self._stub: a2a_pb2_grpc.A2AServiceStub | None = None

    def _rpc(self, op: Operation) -> Any:
        if self._stub is None:
            if self._credentials is not None:
                self._channel = grpc.aio.secure_channel(self.target, self._credentials)
            else:
                self._channel = grpc.aio.insecure_channel(self.target)
            self._stub = a2a_pb2_grpc.A2AServiceStub(self._channel)
        return getattr(self._stub, convert.RPCS[op])

    def _metadata(self, last_event_id: str | None = None) -> list[tuple[str, str]]:
        md = [("a2a-version", self.version), *self._extra]
        if last_event_id is not None:
            md.append(("last-event-id", str(last_event_id)))
        md.extend(telemetry.trace_headers().items())  # telemetry: traceparent of the call's span
        return md

    @telemetry.traced_call  # telemetry: a CLIENT span per call (calls straight through when off)
    async def call(self, op: Operation, request: Any) -> Any:
        """A unary call; returns the canonical result or raises the server's A2A error."""
        rpc = self._rpc(op)
        message = convert.encode_request(op, request, self.tenant)
        try:
            response = await rpc(message, metadata=self._metadata(), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, self.url) from None
        return convert.decode_result(op, response)

    @telemetry.traced_stream  # telemetry: a CLIENT span per stream (calls straight through when off)
    async def stream(self, op: Operation, request: Any, last_event_id: str | None = None) -> AsyncIterator[StreamItem]:
        """A server-streaming call; yields events until the server ends the stream."""
        rpc = self._rpc(op)
        message = convert.encode_request(op, request, self.tenant)
        call = rpc(message, metadata=self._metadata(last_event_id))
        try:
            async for response in call:
                yield StreamItem(convert.decode_event(response), None)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, self.url) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        """Close the channel."""
        if self._channel is not None:
            channel, self._channel, self._stub = self._channel, None, None
            await channel.close()


transports.register(BINDING, GrpcTransport, VERSIONS)

__all__ = ["GrpcTransport", "error_from_rpc", "parse_target"]
