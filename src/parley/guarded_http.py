"""uvicorn's HTTP protocol with the timeouts a public server needs: slow and stalled clients are closed.

uvicorn closes a keep-alive connection that stays idle between requests (`timeout_keep_alive`), but a
client that opens a connection and sends its request headers a byte at a time (slowloris), or that stops
reading a response (a stalled SSE subscriber), or that sends complete headers and then a body that never
ends (a partial or trickled body), is held forever. This protocol adds three timers per connection: the
request headers must arrive within `header_seconds` of the connection opening or of the request's first
byte; the request body must arrive within `body_seconds` of its headers, plus one second for every
`body_min_rate` bytes of it received (a steady upload at that rate or faster is never cut, one that stops
or trickles slower is; the clock does not run while the server itself holds the body back: reads paused
by flow control, or a `100 Continue` not yet sent); and a response the client has stopped reading (the
transport's write buffer above its high-water mark) is abandoned after `stall_seconds`. Either way the
connection is aborted, which frees its buffers at once, and a warning names the client and why; an SSE
client resumes with Last-Event-ID like after any dropped connection.

The header timer is not armed and cancelled per request: a request notes when its headers began, and the
connection's one timer, when it fires, closes the connection if headers are still awaited after
`header_seconds`, else is armed again for what is left (or not at all, when no request is begun).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("parley.http")


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol with header-read, body-read and stalled-reader timeouts (see the module docstring)."""

    header_seconds: float = 10.0
    stall_seconds: float = 60.0
    body_seconds: float = 30.0
    body_min_rate: float = 500.0  # bytes per second that earn a body one more second

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_since: float | None = None  # when the body of the request being read began to be awaited
        self._body_received = 0
        self._headers_since: float | None = self.loop.time()  # a connection that sends nothing is closed too
        self._arm_header_timer(self.header_seconds)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._headers_since = self.loop.time()
        if self._header_timer is None:
            self._arm_header_timer(self.header_seconds)

    def on_headers_complete(self) -> None:
        self._headers_since = None
        super().on_headers_complete()
        if self.parser.should_upgrade() and self._should_upgrade():
            return  # a WebSocket: its protocol takes the connection over
        # The body is awaited from now on (a request without one completes at once: on_message_complete).
        self._body_since, self._body_received = self.loop.time(), 0
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_seconds, self._body_due)

    def on_body(self, body: bytes) -> None:
        self._body_received += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_since = None
        super().on_message_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.stall_seconds, self._abort,
                                                     f"it read nothing of the response for {self.stall_seconds:g} s")

    def resume_writing(self) -> None:
        self._cancel("_stall_timer")
        super().resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel("_header_timer")
        self._cancel("_body_timer")
        self._cancel("_stall_timer")
        super().connection_lost(exc)

    def _arm_header_timer(self, delay: float) -> None:
        self._header_timer = self.loop.call_later(delay, self._headers_due)

    def _headers_due(self) -> None:
        """The header timer fired: close the connection if a request's headers are overdue, else wait on."""
        self._header_timer = None
        since = self._headers_since
        if since is None:
            return  # no request is being read; the next one arms the timer again
        left = since + self.header_seconds - self.loop.time()
        if left > 0:
            self._arm_header_timer(left)
        else:
            self._abort(f"its request headers did not arrive within {self.header_seconds:g} s")

    def _body_due(self) -> None:
        """The body timer fired: close the connection if the body is overdue, else wait on."""
        self._body_timer = None
        since = self._body_since
        if since is None:
            return  # no body is being read; the next request's headers arm the timer again
        now = self.loop.time()
        cycle = getattr(self, "cycle", None)
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            # The server holds the body back (the app has not read what came, or not asked for the rest):
            # not the client's delay. The body's clock starts again when reading goes on.
            self._body_since, self._body_received, left = now, 0, self.body_seconds
        else:
            earned = self._body_received / self.body_min_rate if self.body_min_rate > 0 else 0.0
            left = since + self.body_seconds + earned - now
        if left > 0:
            self._body_timer = self.loop.call_later(left, self._body_due)
        else:
            self._abort(f"its request body did not arrive within {self.body_seconds:g} s (plus 1 s per "
                        f"{self.body_min_rate:g} bytes received; {self._body_received} bytes came)")

    def _cancel(self, name: str) -> None:
        timer = getattr(self, name, None)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def _abort(self, why: str) -> None:
        for name in ("_header_timer", "_stall_timer", "_body_timer"):
            self._cancel(name)
        if not self.transport.is_closing() or self.flow.write_paused:
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            log.warning("closed the connection of %s: %s", client, why)
            self.transport.abort()


def guarded_protocol(header_seconds: float, stall_seconds: float, body_seconds: float = 30.0,
                     body_min_rate: float = 500.0) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for uvicorn.Config(http=...) with these timeouts."""
    attrs: dict[str, Any] = {"header_seconds": header_seconds, "stall_seconds": stall_seconds,
                             "body_seconds": body_seconds, "body_min_rate": body_min_rate}
    return type("GuardedHttp", (GuardedHttpToolsProtocol,), attrs)


__all__ = ["GuardedHttpToolsProtocol", "guarded_protocol"]
