"""Small HTTP helpers shared by the HTTP bindings: JSON bodies only (415), bounded body reads (413),
credentials, SSE frames."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from parley.protocol.errors import InvalidRequestError, PayloadTooLargeError, UnsupportedMediaTypeError
from parley.server.access import Credentials
from parley.server.ready import ReadyItems
from parley.server.resume import parse_event_id

PRINCIPAL_KEY = "parley.principal"  # the ASGI scope key of the principal parley.server.edge authenticated

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_FRAME = b": keep-alive\n\n"
BATCH_BYTES = 65536  # frames ready together are written at once, up to about this many bytes per write
# The last frame of a stream the server ends because it is stopping: reconnect soon (to another replica behind
# the same address) with Last-Event-ID; no event is lost, the stream resumes after the last id received.
STOPPING_FRAME = b"retry: 1000\n: the server is stopping; resubscribe with Last-Event-ID to continue\n\n"

# `type/subtype` (RFC 9110 tokens), then parameters.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_MEDIA_TYPE = re.compile(rf"[ \t]*({_TOKEN})/({_TOKEN})[ \t]*(?:;(.*))?", re.DOTALL)
_JSON_TYPES = frozenset({"application/json", "application/a2a+json"})  # the usual ones: no parsing needed
_UTF8_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii"})


class ClientDisconnected(InvalidRequestError):
    """The client went away before its request body arrived: nobody is left to answer, and it is not a
    server error (no 500, no "unexpected error" in the log)."""

    default_message = "Invalid request: the client disconnected before the request body arrived"
    reason = "CLIENT_DISCONNECTED"


def require_json(request: Request) -> None:
    """Refuse (415 UnsupportedMediaTypeError) a request body that is not declared as JSON.

    Accepted: `application/json`, `application/a2a+json` and any other `json` or `+json` subtype,
    with parameters (a `charset` must be UTF-8). Refused: every other type (`text/plain`, form
    encodings, multipart: the types a browser may send cross-site without a CORS preflight), a
    Content-Type that does not parse, and a body without a Content-Type (a browser's `fetch` sends a
    Blob or ArrayBuffer body cross-site without one). A request without a body needs no Content-Type.
    Called before the body is read.
    """
    ctype = request.headers.get("content-type")
    if ctype is None:
        if _has_body(request):
            raise UnsupportedMediaTypeError(
                "Unsupported media type: a request body needs `Content-Type: application/json`"
            )
        return
    if ctype in _JSON_TYPES:
        return
    found = _MEDIA_TYPE.fullmatch(ctype)
    if found is None:
        raise UnsupportedMediaTypeError(
            f"Unsupported media type: Content-Type {ctype[:100]!r} is not a media type; send application/json"
        )
    kind, subtype = found.group(1).lower(), found.group(2).lower()
    if subtype != "json" and not subtype.endswith("+json"):
        raise UnsupportedMediaTypeError(
            f"Unsupported media type {kind}/{subtype}: the body must be JSON (application/json or application/a2a+json)"
        )
    for param in (found.group(3) or "").split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
            if charset not in _UTF8_CHARSETS:
                raise UnsupportedMediaTypeError(
                    f"Unsupported media type: charset {charset[:40]!r}; JSON bodies are UTF-8 (RFC 8259)"
                )


def _has_body(request: Request) -> bool:
    """Whether the request says a body follows (a non-zero Content-Length, or Transfer-Encoding)."""
    headers = request.headers
    length = headers.get("content-length")
    if length is not None:
        return length.strip() not in ("0", "")
    return "transfer-encoding" in headers


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes (PayloadTooLargeError).

    A client that disconnects before its body arrived raises ClientDisconnected.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"Request body of {declared} bytes exceeds the limit of {limit} bytes")
    # The ASGI messages themselves, not `request.stream()`: an async generator per request costs more than
    # the one `receive()` a small body takes. The body is read here once (nothing reads it again).
    receive = request.receive
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"Request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunk if len(chunks) == 1 else b"".join(chunks)


def credentials_of(request: Request) -> Credentials:
    """What an HTTP request presents to the authenticator: its headers and the peer address, and the principal
    the server's edge already authenticated from those headers (parley.server.edge; nothing a client sends
    can set it), so that the pipeline does not authenticate twice."""
    scope = request.scope
    client = scope.get("client")
    return Credentials(headers=request.headers, peer=client[0] if client else None,
                       principal=scope.get(PRINCIPAL_KEY))


def sse_frame(data: bytes, event_id: int | None = None, event: str | None = None) -> bytes:
    """One Server-Sent Events frame; `data` must be single-line JSON."""
    if event is None and event_id is not None:  # an event of a task's log (one per streamed token)
        return b"id: %d\ndata: %s\n\n" % (event_id, data)
    head = b""
    if event_id is not None:
        head += b"id: %d\n" % event_id
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def last_event_id(request: Request) -> int | None:
    """The `Last-Event-ID` header as a sequence number, or None."""
    return parse_event_id(request.headers.get("last-event-id"))


def requested_extensions(request: Request) -> frozenset[str]:
    """Extension URIs the client activated (`A2A-Extensions`, or 0.3's `X-A2A-Extensions`)."""
    uris: set[str] = set()
    for name, value in request.headers.raw:  # one pass over the headers (names are lower case in ASGI)
        if name == b"a2a-extensions" or name == b"x-a2a-extensions":
            uris.update(u.strip() for u in value.decode("latin-1").split(",") if u.strip())
    return frozenset(uris)


class JsonResponse(Response):
    """A JSON body, with the headers Starlette's `Response(body, media_type="application/json")` gives it
    (Content-Length, Content-Type), put together directly when there are no others (every unary JSON-RPC answer)."""

    media_type = "application/json"

    def __init__(self, body: bytes, status_code: int = 200, headers: Mapping[str, str] | None = None) -> None:
        if headers:
            super().__init__(body, status_code, headers)
            return
        self.body = body
        self.status_code = status_code
        self.background = None
        self.raw_headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]


class EventStreamResponse(Response):
    """A Server-Sent Events response: the frames of an async iterator, until it ends or the client goes away.

    What Starlette's StreamingResponse does for a stream, without its anyio task group per response (about a
    tenth of a stream's CPU in the bench profiles): one plain task, from the first time the stream has to wait,
    waits for the client's disconnect and cancels the writer, which then ends quietly. The iterator is closed however the stream ends, so its
    subscription ends with it. Frames that are ready together (a batch of events committed at once) go out in
    one write, the last ones with the end of the response; a frame is never held back waiting for the next.
    """

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[bytes], headers: Mapping[str, str] | None = None) -> None:
        self.frames = frames
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer = asyncio.current_task()
        assert writer is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            writer.cancel()

        # Started the first time the stream waits: until then the writer never blocks, and a stream whose frames
        # are all ready at once (an echo's, committed in one pass) needs no task to watch for the client leaving.
        watcher: asyncio.Task | None = None
        ready: ReadyItems[bytes] = ReadyItems(self.frames)
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            batch: list[bytes] = []
            size = 0
            while True:
                try:
                    found, frame = ready.poll()
                    if not found:  # what was ready goes out now, in one write; then wait for more
                        if batch:
                            await send({"type": "http.response.body", "body": b"".join(batch), "more_body": True})
                            batch, size = [], 0
                        if watcher is None:
                            watcher = asyncio.get_running_loop().create_task(watch())
                        frame = await ready.wait()
                except StopAsyncIteration:
                    break
                assert frame is not None
                batch.append(frame)
                size += len(frame)
                if size >= BATCH_BYTES:
                    await send({"type": "http.response.body", "body": b"".join(batch), "more_body": True})
                    batch, size = [], 0
            # The last frames and the end of the response in one write.
            await send({"type": "http.response.body", "body": b"".join(batch), "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            writer.uncancel()  # the client left: the stream ends here
        finally:
            if watcher is not None:
                watcher.cancel()
            ready.abandon()
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
