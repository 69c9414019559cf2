"""Small HTTP helpers shared by the HTTP bindings: bounded body reads, credentials, SSE frames."""

from __future__ import annotations


from starlette.requests import Request

from parley.protocol.errors import InvalidRequestError, PayloadTooLargeError
from parley.server.access import Credentials

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_FRAME = b": keep-alive\n\n"


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes (PayloadTooLargeError)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"Request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"Request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def credentials_of(request: Request) -> Credentials:
    """What an HTTP request presents to the authenticator: its headers and the peer address."""
    client = request.scope.get("client")
    return Credentials(headers=request.headers, peer=client[0] if client else None)


def sse_frame(data: bytes, event_id: int | None = None, event: str | None = None) -> bytes:
    """One Server-Sent Events frame; `data` must be single-line JSON."""
    head = b""
    if event_id is not None:
        head += b"id: %d\n" % event_id
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def last_event_id(request: Request) -> int | None:
    """The `Last-Event-ID` header as a sequence number, or None."""
    raw = request.headers.get("last-event-id")
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    if not raw.isdigit():
        raise InvalidRequestError(f"Invalid request: Last-Event-ID {raw!r} is not an event id of this server")
    return int(raw)


def requested_extensions(request: Request) -> frozenset[str]:
    """Extension URIs the client activated (`A2A-Extensions`, or 0.3's `X-A2A-Extensions`)."""
    uris: set[str] = set()
    for name, value in request.headers.raw:  # one pass over the headers (names are lower case in ASGI)
        if name == b"a2a-extensions" or name == b"x-a2a-extensions":
            uris.update(u.strip() for u in value.decode("latin-1").split(",") if u.strip())
    return frozenset(uris)
