"""A2A and JSON-RPC errors, with their codes and transport mappings.

Every error Parley reports to a client is an :class:`A2AError`. The class
carries the JSON-RPC code, the HTTP status used by the HTTP+JSON binding (and
by JSON-RPC for transport-level failures), the gRPC status and the
`ErrorInfo.reason` string, as tabulated in A2A 1.0 section 5.4.
"""

from __future__ import annotations

from typing import Any, ClassVar

MAX_MESSAGE_CHARS = 1000  # an error message is cut to this (it may quote what a client sent)

class A2AError(Exception):
    """Base class: an error with a JSON-RPC code and an HTTP status."""

    code: ClassVar[int] = -32603
    default_message: ClassVar[str] = "Internal error"
    http_status: ClassVar[int] = 500
    reason: ClassVar[str] = "INTERNAL_ERROR"
    grpc_status: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str | None = None, data: Any = None, *, headers: dict[str, str] | None = None,
                 info: dict[str, str] | None = None) -> None:
        message = message or self.default_message
        if len(message) > MAX_MESSAGE_CHARS:  # a message quoting a client's huge value stays small (gRPC trailers)
            message = message[:MAX_MESSAGE_CHARS - 15] + "... (shortened)"
        self.message = message
        self.data = data
        self.headers = headers  # transport headers sent with the error (WWW-Authenticate, Retry-After, Allow)
        self.info = info  # the ErrorInfo's `metadata` on every binding (1.1 generation mismatch: taskId, ...)
        super().__init__(self.message)

    def to_jsonrpc(self) -> dict[str, Any]:
        """The `error` member of a JSON-RPC response."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class ParseError(A2AError):
    code = -32700
    default_message = "Parse error: the body is not valid JSON"
    http_status = 400
    reason = "PARSE_ERROR"
    grpc_status = "INVALID_ARGUMENT"


class InvalidRequestError(A2AError):
    code = -32600
    default_message = "Invalid request"
    http_status = 400
    reason = "INVALID_REQUEST"
    grpc_status = "INVALID_ARGUMENT"


class MethodNotFoundError(A2AError):
    code = -32601
    default_message = "Method not found"
    http_status = 404
    reason = "METHOD_NOT_FOUND"
    grpc_status = "NOT_FOUND"


class InvalidParamsError(A2AError):
    code = -32602
    default_message = "Invalid params"
    http_status = 400
    reason = "INVALID_PARAMS"
    grpc_status = "INVALID_ARGUMENT"


class InternalError(A2AError):
    code = -32603
    default_message = "Internal error"
    http_status = 500
    reason = "INTERNAL_ERROR"
    grpc_status = "INTERNAL"


class TaskNotFoundError(A2AError):
    code = -32001
    default_message = "Task not found"
    http_status = 404
    reason = "TASK_NOT_FOUND"
    grpc_status = "NOT_FOUND"


class TaskNotCancelableError(A2AError):
    code = -32002
    default_message = "Task cannot be canceled"
    http_status = 400
    reason = "TASK_NOT_CANCELABLE"
    grpc_status = "FAILED_PRECONDITION"


class PushNotificationNotSupportedError(A2AError):
    code = -32003
    default_message = "Push notifications are not supported"
    http_status = 400
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    grpc_status = "FAILED_PRECONDITION"


class UnsupportedOperationError(A2AError):
    code = -32004
    default_message = "This operation is not supported"
    http_status = 400
    reason = "UNSUPPORTED_OPERATION"
    grpc_status = "FAILED_PRECONDITION"


class ContentTypeNotSupportedError(A2AError):
    code = -32005
    default_message = "Incompatible content types"
    http_status = 400
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    grpc_status = "INVALID_ARGUMENT"


class InvalidAgentResponseError(A2AError):
    code = -32006
    default_message = "Invalid agent response"
    http_status = 500
    reason = "INVALID_AGENT_RESPONSE"
    grpc_status = "INTERNAL"


class ExtendedCardNotConfiguredError(A2AError):
    code = -32007
    default_message = "The extended agent card is not configured"
    http_status = 400
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    grpc_status = "FAILED_PRECONDITION"


class ExtensionSupportRequiredError(A2AError):
    code = -32008
    default_message = "A required extension is not supported by the client"
    http_status = 400
    reason = "EXTENSION_SUPPORT_REQUIRED"
    grpc_status = "FAILED_PRECONDITION"


class VersionNotSupportedError(A2AError):
    code = -32009
    default_message = "This A2A protocol version is not supported"
    http_status = 400
    reason = "VERSION_NOT_SUPPORTED"
    grpc_status = "FAILED_PRECONDITION"


class PayloadTooLargeError(InvalidRequestError):
    """An HTTP body over the configured limit (HTTP 413, JSON-RPC -32600)."""

    default_message = "Request body too large"
    http_status = 413


class UnsupportedMediaTypeError(InvalidRequestError):
    """A request body that is not JSON (HTTP 415): refused before it is read."""

    default_message = "Unsupported media type: send application/json"
    http_status = 415
    reason = "UNSUPPORTED_MEDIA_TYPE"


# Access errors (A2A 1.0 section 3.3.2: "JSON-RPC custom error"). JSON-RPC 2.0 reserves -32768..-32000 and A2A
# claims -32001..-32099 for its own errors (1.1 gives -32010 to TaskGenerationMismatchError), so Parley's own codes
# sit outside that range, mirroring their HTTP status: -31401, -31403, -31429, -31503 (docs/security.md). Until
# the next release error_class/error_from_jsonrpc also read the codes Parley used before (-32010..-32013 in
# LEGACY_ACCESS_CODES) as these errors when they come from a server that is not 1.1 (see legacy_access_error).


class UnauthenticatedError(A2AError):
    """No or bad credentials (HTTP 401, with a `WWW-Authenticate` challenge naming the schemes)."""

    code = -31401
    default_message = "Authentication required"
    http_status = 401
    reason = "UNAUTHENTICATED"
    grpc_status = "UNAUTHENTICATED"


class PermissionDeniedError(A2AError):
    """Authenticated, but not allowed to do this (HTTP 403)."""

    code = -31403
    default_message = "Permission denied"
    http_status = 403
    reason = "PERMISSION_DENIED"
    grpc_status = "PERMISSION_DENIED"


class RateLimitedError(A2AError):
    """Over a rate or concurrency limit (HTTP 429, with `Retry-After`)."""

    code = -31429
    default_message = "Too many requests"
    http_status = 429
    reason = "RATE_LIMITED"
    grpc_status = "RESOURCE_EXHAUSTED"


class TaskGenerationMismatchError(A2AError):
    """A2A 1.1 section 3.2.2 / 3.2.7: `ifGenerationMatch` differs from the task's generation (the task unchanged)."""

    code = -32010
    default_message = "Task generation mismatch"
    http_status = 409
    reason = "TASK_GENERATION_MISMATCH"
    grpc_status = "ABORTED"


class ServiceUnavailableError(A2AError):
    """What the server stands on (its database, its bus, shared rate-limit counters) cannot be reached right now
    (HTTP 503, with `Retry-After`): nothing was done, the request can be retried as it is."""

    code = -31503
    default_message = "Service unavailable: retry later"
    http_status = 503
    reason = "UNAVAILABLE"
    grpc_status = "UNAVAILABLE"


ALL_ERRORS: tuple[type[A2AError], ...] = (
    ParseError,
    InvalidRequestError,
    MethodNotFoundError,
    InvalidParamsError,
    InternalError,
    TaskNotFoundError,
    TaskNotCancelableError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    ExtendedCardNotConfiguredError,
    ExtensionSupportRequiredError,
    VersionNotSupportedError,
    TaskGenerationMismatchError,
)
ACCESS_ERRORS: tuple[type[A2AError], ...] = (UnauthenticatedError, PermissionDeniedError, RateLimitedError,
                                              ServiceUnavailableError)

_BY_CODE: dict[int, type[A2AError]] = {cls.code: cls for cls in (*ALL_ERRORS, *ACCESS_ERRORS)}
# The codes Parley's access errors had before 0.x+1 (kept readable for one release). -32010 is A2A 1.1's
# TaskGenerationMismatchError: a JSON-RPC error -32010 whose `data` says nothing of a generation and whose
# message does not either is read as the old UnauthenticatedError (see _legacy).
LEGACY_ACCESS_CODES: dict[int, type[A2AError]] = {-32010: UnauthenticatedError, -32011: PermissionDeniedError,
                                                  -32012: RateLimitedError, -32013: ServiceUnavailableError}


def error_class(code: Any) -> type[A2AError] | None:
    """The error class of a known numeric A2A / JSON-RPC error code (-32001: TaskNotFoundError), else None."""
    if isinstance(code, bool) or not isinstance(code, int):
        return None
    return _BY_CODE.get(code) or LEGACY_ACCESS_CODES.get(code)


def _is_generation_mismatch(error: dict[str, Any]) -> bool:
    """Whether a JSON-RPC error -32010 is A2A 1.1's generation mismatch rather than an older Parley's 401."""
    if error.get("code") != -32010:
        return False
    data, message = error.get("data"), str(error.get("message") or "")
    infos = data if isinstance(data, list) else [data]
    return "generation" in message.lower() or any(
        isinstance(i, dict) and i.get("reason") == TaskGenerationMismatchError.reason for i in infos)


def error_from_jsonrpc(error: dict[str, Any]) -> A2AError:
    """Rebuild a typed error from a JSON-RPC `error` object (client side)."""
    code = error.get("code")
    cls = _BY_CODE.get(code, A2AError) if isinstance(code, int) else A2AError
    if isinstance(code, int) and code in LEGACY_ACCESS_CODES and not _is_generation_mismatch(error):
        cls = LEGACY_ACCESS_CODES[code]
    exc = cls(str(error.get("message") or cls.default_message), error.get("data"))
    if cls is A2AError and isinstance(code, int):
        exc.code = code  # type: ignore[misc]
    return exc
