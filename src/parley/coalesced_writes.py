"""A transport whose writes of one event-loop turn leave in one write.

uvicorn writes a response's head and its body apart, and an SSE response each frame apart: one system call
and one TCP segment each, which the client then reads one by one. A stream whose entries were committed
together (an echo's eight frames) went out in nine writes; through this wrapper it is one. What is written
is handed to the real transport when the loop next runs its callbacks (`call_soon`), after whatever else
is writing in this turn, or at once by `flush` (the protocol calls it when a response is complete: an answer
leaves without waiting for the next turn); `close` writes it first, `abort` drops it. Everything else is the real transport's,
flow control included: it pauses the writer once its own buffer is over the high-water mark, as before,
one loop turn later at most.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


class CoalescedWrites:
    """Wraps `transport`; see the module docstring."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

    def writelines(self, chunks: Iterable[bytes]) -> None:
        for data in chunks:
            self.write(data)

    def flush(self) -> None:
        """Hand what is pending to the real transport now."""
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:  # get_extra_info, pause_reading, set_protocol, ...
        return getattr(self._transport, name)


__all__ = ["CoalescedWrites"]
