"""uvicorn's HTTP protocol with the timeouts a public server needs: slow and stalled clients are closed.

uvicorn closes a keep-alive connection that stays idle between requests (`timeout_keep_alive`), but a
client that opens a connection and sends its request headers a byte at a time (slowloris), or that stops
reading a response (a stalled SSE subscriber), is held forever. This protocol adds two timers per
connection: the request headers must arrive within `header_seconds` of the connection opening or of the
request's first byte, and a response the client has stopped reading (the transport's write buffer above
its high-water mark) is abandoned after `stall_seconds`. Either way the connection is aborted, which frees
its buffers at once; an SSE client resumes with Last-Event-ID like after any dropped connection.

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
    """HttpToolsProtocol with a header-read timeout and a stalled-reader timeout (see the module docstring)."""

    header_seconds: float = 10.0
    stall_seconds: float = 60.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
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

    def _cancel(self, name: str) -> None:
        timer = getattr(self, name, None)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def _abort(self, why: str) -> None:
        self._header_timer = self._stall_timer = None
        if not self.transport.is_closing() or self.flow.write_paused:
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            log.warning("closed the connection of %s: %s", client, why)
            self.transport.abort()


def guarded_protocol(header_seconds: float, stall_seconds: float) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for uvicorn.Config(http=...) with these timeouts."""
    attrs: dict[str, Any] = {"header_seconds": header_seconds, "stall_seconds": stall_seconds}
    return type("GuardedHttp", (GuardedHttpToolsProtocol,), attrs)


__all__ = ["GuardedHttpToolsProtocol", "guarded_protocol"]
