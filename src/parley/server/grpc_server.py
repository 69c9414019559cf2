"""The gRPC binding of A2A 1.0 (`lf.a2a.v1.A2AService`), on grpc.aio.

One gRPC server serves every agent of a runtime, next to its HTTP server and on
the same event loop, through the same request pipeline:

* **Agent selection**: the `tenant` field every 1.0 request carries names the
  agent (`tenant: "echo"`); an empty tenant means the default agent. An
  unknown tenant is NOT_FOUND. Cards advertise `GRPC` interfaces with
  `url: "host:port"` and `tenant: <agent id>`, and clients (the a2a-sdk's
  included) copy the interface's tenant into every request.
* **Version**: the `a2a-version` metadata. The `lf.a2a.v1` service exists only
  in A2A 1.0, so a call without it is taken as 1.0; any other value than 1.x
  is VersionNotSupported (FAILED_PRECONDITION).
* **Extensions**: the `a2a-extensions` metadata (comma-separated URIs).
* **Resuming**: `SubscribeToTask` honours a `last-event-id` metadata entry
  (replay the log after that sequence number), as `Last-Event-ID` does over
  HTTP; gRPC has no per-message id, so nothing sends one back.
* **Errors**: an A2AError aborts the call with its `grpc_status` and message,
  and a `google.rpc.Status` (same code and message, one `google.rpc.ErrorInfo`
  with the error's reason and domain `a2a-protocol.org`) in the
  `grpc-status-details-bin` trailer (A2A 1.0 section 10.6). Requests that do
  not validate are INVALID_ARGUMENT naming the field.

Streams skip the engine's keep-alive ticks: HTTP/2 keeps the connection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from parley.grpc import a2a_pb2_grpc, convert
from parley.protocol import v1_0, v1_1
from parley.protocol.errors import (
    A2AError,
    InternalError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from parley.protocol.jsonrpc import negotiate_version
from parley.protocol.operations import Operation
from parley.runtime import Runtime
from parley.server.access import Credentials
from parley.server.pipeline import Call
from parley.server.resume import parse_event_id
from parley.settings import is_loopback_address
from parley.tasks.bus import StreamsEnded
from parley.telemetry import hooks as telemetry

log = logging.getLogger("parley.grpc")

ERROR_DOMAIN = "a2a-protocol.org"
STATUS_DETAILS_KEY = "grpc-status-details-bin"
VERSION_KEY = "a2a-version"
EXTENSIONS_KEY = "a2a-extensions"
LAST_EVENT_ID_KEY = "last-event-id"


def status_details(error: A2AError) -> bytes:
    """The serialised google.rpc.Status (with an ErrorInfo) for `error`."""
    code = grpc.StatusCode[error.grpc_status]
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.info or {})
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=error.message, details=[detail])
    return status.SerializeToString()


async def abort(context: grpc.aio.ServicerContext, error: A2AError) -> None:
    """End the call with `error`'s status code, message and rich status trailer (raises)."""
    telemetry.a2a_error(error)  # telemetry: error.type and gRPC status of the request span
    code = grpc.StatusCode[error.grpc_status]
    # The transport headers of the error (WWW-Authenticate, Retry-After, RateLimit...) travel as metadata.
    extra = tuple((k.lower(), v) for k, v in (error.headers or {}).items())
    await context.abort(code, error.message,
                        trailing_metadata=((STATUS_DETAILS_KEY, status_details(error)), *extra))


def _send_headers(context: grpc.aio.ServicerContext, headers: dict[str, str] | None) -> None:
    """The access steps' response headers (RateLimit, RateLimit-Policy) as the call's trailing metadata."""
    if headers:
        context.set_trailing_metadata(tuple((k.lower(), v) for k, v in headers.items()))


def credentials_of(context: grpc.aio.ServicerContext) -> Credentials:
    """What a gRPC call presents to the authenticator: its metadata (text entries) and the peer."""
    headers: dict[str, str] = {}
    for k, v in context.invocation_metadata() or ():
        if not k.endswith("-bin"):
            headers[k.lower()] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return Credentials(headers=headers, peer=context.peer())


def _metadata(context: grpc.aio.ServicerContext, key: str) -> list[str]:
    values = []
    for k, v in context.invocation_metadata() or ():
        if k.lower() == key:
            values.append(v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
    return values


class ParleyA2AServicer(a2a_pb2_grpc.A2AServiceServicer):
    """`lf.a2a.v1.A2AService` over a runtime's request pipeline."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.pipeline = runtime.pipeline

    # --- the RPCs ---------------------------------------------------------------

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.SEND, request, context)

    async def SendStreamingMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async for response in self._stream(Operation.STREAM, request, context):
            yield response

    async def GetTask(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.GET, request, context)

    async def ListTasks(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.LIST, request, context)

    async def CancelTask(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.CANCEL, request, context)

    async def SubscribeToTask(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async for response in self._stream(Operation.SUBSCRIBE, request, context):
            yield response

    async def CreateTaskPushNotificationConfig(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.PUSH_SET, request, context)

    async def GetTaskPushNotificationConfig(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.PUSH_GET, request, context)

    async def ListTaskPushNotificationConfigs(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.PUSH_LIST, request, context)

    async def DeleteTaskPushNotificationConfig(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.PUSH_DELETE, request, context)

    async def GetExtendedAgentCard(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._unary(Operation.EXTENDED_CARD, request, context)

    # --- shared -----------------------------------------------------------------

    def _decoder(self, op: Operation, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async def decode() -> Call:
            if isinstance(request, Undecodable):
                raise InvalidRequestError(f"Invalid request: the bytes are not a {request.what} ({request.reason})")
            versions = _metadata(context, VERSION_KEY)
            if versions and negotiate_version(versions[-1]) not in ("1.0", "1.1"):
                raise VersionNotSupportedError(
                    f"a2a-version {versions[-1]!r} is not supported by the gRPC binding, which is A2A 1.0 "
                    "(and the 1.1 draft) only"
                )
            extensions: set[str] = set()
            for value in _metadata(context, EXTENSIONS_KEY):
                extensions.update(u.strip() for u in value.split(",") if u.strip())
            agent_id = self._agent(getattr(request, "tenant", ""))
            resume = _last_event_id(_metadata(context, LAST_EVENT_ID_KEY)) if op is Operation.SUBSCRIBE else None
            return Call(agent_id, op, convert.decode_request(op, request, _dialect(context)), "1.0", extensions=frozenset(extensions),
                        last_event_id=resume, agent_url=lambda: self._http_url(agent_id))

        return decode

    def _http_url(self, agent_id: str) -> str:
        """The agent's HTTP URL as this server names itself (cards asked for over gRPC)."""
        return f"{self.runtime.settings.reachable_self_url()}/a2a/{agent_id}"

    def _agent(self, tenant: str) -> str:
        agent_id = self.runtime.agent_id(tenant)
        if agent_id is None:
            raise MethodNotFoundError(
                f"No agent {tenant!r} is hosted here; the tenant names the agent ({', '.join(self.runtime.agents)}), "
                "empty for the default one"
            )
        return agent_id

    @telemetry.traced_grpc_unary  # telemetry: request span (calls straight through when off)
    async def _unary(self, op: Operation, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            outcome = await self.pipeline.serve("GRPC", credentials_of(context), self._decoder(op, request, context))
            _send_headers(context, outcome.headers)
            return convert.encode_result(op, outcome.result, _dialect(context))
        except A2AError as exc:
            await abort(context, exc)
        except Exception:
            log.exception("unexpected error in gRPC %s", convert.RPCS[op])
            await abort(context, InternalError())

    @telemetry.traced_grpc_stream  # telemetry: request span (calls straight through when off)
    async def _stream(self, op: Operation, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        events: Any = None
        try:
            outcome = await self.pipeline.serve("GRPC", credentials_of(context), self._decoder(op, request, context))
            events = outcome.events
            assert events is not None
            _send_headers(context, outcome.headers)
            dialect = _dialect(context)
            async for entry in events:
                yield convert.encode_event(entry.event, dialect)
        except StreamsEnded:  # the server is stopping: a retryable status, resumed with last-event-id
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                "the server is stopping; resubscribe with last-event-id to continue")
        except A2AError as exc:
            await abort(context, exc)
        except Exception:
            log.exception("unexpected error in gRPC %s", convert.RPCS[op])
            await abort(context, InternalError())
        finally:
            if events is not None:
                await events.aclose()


def _dialect(context: grpc.aio.ServicerContext) -> Any:
    """A2A 1.1 (generation) when the call's `a2a-version` metadata asks for it, else 1.0."""
    versions = _metadata(context, VERSION_KEY)
    try:
        return v1_1 if versions and negotiate_version(versions[-1]) == "1.1" else v1_0
    except A2AError:
        return v1_0


def _last_event_id(values: list[str]) -> int | None:
    return parse_event_id(values[-1] if values else None, LAST_EVENT_ID_KEY)


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A request whose bytes are not a message of its RPC's type (answered INVALID_ARGUMENT, after
    authentication, like any other bad request)."""

    what: str
    reason: str


def _lenient(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """A request deserializer that returns Undecodable instead of raising: grpcio would answer UNKNOWN and
    log a traceback for an exception raised before the servicer runs."""
    what = getattr(getattr(parse, "__self__", None), "__name__", "message")

    def lenient(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as exc:
            return Undecodable(what, str(exc) or "malformed")

    return lenient


class _LenientRequests(grpc.GenericRpcHandler):
    """The generated handlers, with lenient request deserializers."""

    def __init__(self, inner: grpc.GenericRpcHandler) -> None:
        self.inner = inner
        self._cache: dict[str, Any] = {}

    def service(self, handler_call_details: Any) -> Any:
        method = handler_call_details.method
        if method not in self._cache:
            handler = self.inner.service(handler_call_details)
            if handler is not None and handler.request_deserializer is not None:
                handler = handler._replace(request_deserializer=_lenient(handler.request_deserializer))
            self._cache[method] = handler
        return self._cache[method]


class _Registrar:
    """What the generated `add_A2AServiceServicer_to_server` registers its handlers on."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self.server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.server.add_generic_rpc_handlers(tuple(_LenientRequests(h) for h in handlers))


def create_grpc_server(runtime: Runtime, host: str, port: int) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server for every agent of `runtime`, bound to host:port (not started); returns it and the port."""
    limit = runtime.settings.max_body_bytes
    grpc_server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit)])
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(ParleyA2AServicer(runtime), _Registrar(grpc_server))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return grpc_server, grpc_server.add_insecure_port(address)


async def start_grpc_server(runtime: Runtime, host: str, port: int) -> grpc.aio.Server:
    """Start serving `runtime`'s agents over gRPC on host:port (call on the ASGI app's event loop).

    Stop it with `await grpc_server.stop(grace)` before the engine shuts down.
    """
    secured = getattr(runtime.pipeline.authenticator, "secured", None)
    if secured is not None and not runtime.settings.insecure and not is_loopback_address(host) and not await secured():
        # The open-mode rule (parley.settings.Settings.open_mode_problem) for an app served some other way than
        # `parley serve`, which checks it before it starts: no unauthenticated gRPC on a reachable address.
        raise RuntimeError(f"no credentials are configured, so every client of grpc_host {host} would be trusted: "
                           "configure credentials, serve gRPC on a loopback address, or set insecure")
    grpc_server, bound = create_grpc_server(runtime, host, port)
    await grpc_server.start()
    log.info("gRPC (A2A 1.0) listening on %s:%d", host, bound)
    return grpc_server
