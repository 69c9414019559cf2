"""The inspector's gRPC calls (A2A 1.0 section 10): one call to an agent's `lf.a2a.v1.A2AService` at an address
the inspector's SSRF guard checked and pinned, each answer turned into its ProtoJSON so that it is checked like
an HTTP+JSON 1.0 answer (parley.web.response_check), and a failed call's status read as section 10.6 says.

It needs the `parley-a2a[grpc]` extra (grpcio, protobuf, googleapis-common-protos); parley.web.inspector imports
it only when a gRPC interface is called, and says so plainly when the extra is missing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from parley.grpc import a2a_pb2 as pb
from parley.grpc import a2a_pb2_grpc

STATUS_DETAILS_KEY = "grpc-status-details-bin"
ERROR_DOMAIN = "a2a-protocol.org"
# the request message of each method the inspector calls (a2a.proto, section 10.3)
REQUESTS: dict[str, type[Any]] = {
    "SendMessage": pb.SendMessageRequest, "SendStreamingMessage": pb.SendMessageRequest,
    "GetTask": pb.GetTaskRequest, "ListTasks": pb.ListTasksRequest, "CancelTask": pb.CancelTaskRequest,
    "SubscribeToTask": pb.SubscribeToTaskRequest,
}
STREAMING = {"SendStreamingMessage", "SubscribeToTask"}


class GrpcCallError(Exception):
    """The call could not be made or finished (a bad request, an unreachable agent, a timeout, a limit)."""


@dataclass(slots=True)
class GrpcPlace:
    """Where to call: `address` is the pinned `ip:port`, `authority` the card's `host:port` (the :authority
    header and, over TLS, the certificate's name), `tls` whether the card's URL asked for it."""

    address: str
    authority: str
    host: str
    tls: bool


def request_message(method: str, params: Any, tenant: str | None) -> Any:
    """`params` (the request's ProtoJSON, as the console shows it) as the method's a2a.proto request."""
    cls = REQUESTS.get(method)
    if cls is None:
        raise GrpcCallError(f"unknown method {method!r}")
    data = dict(params) if isinstance(params, dict) else {}
    if tenant and not data.get("tenant"):
        data["tenant"] = tenant  # the card interface's tenant names the agent (section 10.2)
    try:
        return json_format.ParseDict(data, cls())
    except json_format.ParseError as exc:
        raise GrpcCallError(f"the request is not an lf.a2a.v1.{cls.__name__}: {exc}") from None


def to_json(message: Any) -> dict[str, Any]:
    """A response message as its ProtoJSON (what HTTP+JSON would carry; zero values left out, as ProtoJSON does)."""
    return json_format.MessageToDict(message)


def error_json(exc: grpc.aio.AioRpcError) -> dict[str, Any]:
    """A failed call as {"error": {code, status, message, details}}: the google.rpc.Status of the
    `grpc-status-details-bin` trailer when there is one (its details as ProtoJSON), else the bare status."""
    code = exc.code()
    out: dict[str, Any] = {"code": code.value[0], "status": code.name, "message": exc.details() or ""}
    for key, value in exc.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except Exception:  # noqa: BLE001 - unreadable: said by the check, shown as such
                out["richStatus"] = "(unreadable: not a google.rpc.Status)"
                break
            rich: dict[str, Any] = {"code": status.code, "message": status.message, "details": []}
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    rich["details"].append({"@type": detail.type_url, **json_format.MessageToDict(info)})
                else:
                    rich["details"].append({"@type": detail.type_url})
            out["richStatus"] = rich
    return {"error": out}


def _channel(place: GrpcPlace, max_bytes: int) -> grpc.aio.Channel:
    options = [("grpc.default_authority", place.authority), ("grpc.max_receive_message_length", max_bytes),
               ("grpc.max_send_message_length", max_bytes), ("grpc.enable_retries", 0),
               ("grpc.enable_http_proxy", 0)]
    if place.tls:
        options.append(("grpc.ssl_target_name_override", place.host))
        return grpc.aio.secure_channel(place.address, grpc.ssl_channel_credentials(), options=options)
    return grpc.aio.insecure_channel(place.address, options=options)


def _metadata(headers: dict[str, str], version: str) -> list[tuple[str, str]]:
    """The user's headers as gRPC metadata (lower-case names, section 10.2), after `a2a-version`; GrpcCallError
    for what gRPC reserves or cannot carry as text (`grpc-*`, `*-bin`, a value that is not printable ASCII)."""
    md = [("a2a-version", version)]
    for name, value in headers.items():
        key = name.lower()
        if key == "a2a-version":
            continue
        if key.startswith("grpc-") or key.endswith("-bin"):
            raise GrpcCallError(f"the header {name} cannot be sent as gRPC metadata (gRPC reserves grpc-*; "
                                "*-bin is binary)")
        if any(not " " <= c <= "~" for c in value):
            raise GrpcCallError(f"the header {name}'s value must be printable ASCII to go as gRPC metadata")
        md.append((key, value))
    return md


def _unreachable(exc: grpc.aio.AioRpcError, place: GrpcPlace) -> GrpcCallError | None:
    """A failure of the connection rather than an answer of the agent (UNAVAILABLE without a status from it)."""
    answered = any(key == STATUS_DETAILS_KEY for key, _ in exc.trailing_metadata() or ())
    if exc.code() is grpc.StatusCode.UNAVAILABLE and not answered:
        return GrpcCallError(f"cannot reach {place.authority} over gRPC: {exc.details()}")
    if exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and "message larger than max" in (exc.details() or ""):
        return GrpcCallError(f"the answer is larger than the inspector reads ({exc.details()})")
    return None


async def unary(place: GrpcPlace, method: str, message: Any, headers: dict[str, str], *, timeout: float,
                max_bytes: int) -> tuple[str, dict[str, Any]]:
    """(status name, ProtoJSON of the response or of the error) of one unary call."""
    metadata = _metadata(headers, "1.0")
    channel = _channel(place, max_bytes)
    try:
        rpc = getattr(a2a_pb2_grpc.A2AServiceStub(channel), method)
        try:
            response = await rpc(message, metadata=metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                raise GrpcCallError(f"{place.authority} did not answer within {timeout:g} s") from None
            failure = _unreachable(exc, place)
            if failure is not None:
                raise failure from None
            return exc.code().name, error_json(exc)
        return "OK", to_json(response)
    finally:
        await channel.close()


async def stream(place: GrpcPlace, method: str, message: Any, headers: dict[str, str], *, timeout: float,
                 max_bytes: int, max_frames: int) -> AsyncIterator[dict[str, Any]]:
    """Each stream message as ProtoJSON, as it comes ({"error": ...} last if the stream ends with a status other
    than OK; {"limit": text} if the inspector stops reading). `timeout` bounds the wait for each message."""
    metadata = _metadata(headers, "1.0")
    channel = _channel(place, max_bytes)
    call = getattr(a2a_pb2_grpc.A2AServiceStub(channel), method)(message, metadata=metadata)
    count = 0
    try:
        while True:
            try:
                async with asyncio.timeout(timeout):
                    response = await call.read()
            except TimeoutError:
                raise GrpcCallError(f"no stream message from {place.authority} within {timeout:g} s") from None
            except grpc.aio.AioRpcError as exc:
                failure = _unreachable(exc, place)
                if failure is not None:
                    raise failure from None
                yield error_json(exc)
                return
            if response is grpc.aio.EOF:
                return
            count += 1
            yield to_json(response)
            if count >= max_frames:
                yield {"limit": f"(the inspector stops after {max_frames} messages)"}
                return
    finally:
        call.cancel()
        await channel.close()


__all__ = ["GrpcCallError", "GrpcPlace", "error_json", "request_message", "stream", "to_json", "unary"]
