"""Reading an async iterator in a task of its own, through a small bounded buffer.

Waiting for the next item with a deadline then never interrupts the source (a
deadline on the source itself would cancel it), the source runs in its own context
(context variables it sets stay there), and a slow reader makes the source wait
instead of buffering without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
DEFAULT_BUFFER = 64


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class Pump(Generic[T]):
    """Runs `source` in a task; :meth:`get` hands over its items in order."""

    def __init__(self, source: AsyncIterator[T], buffer: int = DEFAULT_BUFFER) -> None:
        self.source = source
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=buffer)
        self._task = asyncio.ensure_future(self._run())
        self._done = False

    async def _run(self) -> None:
        try:
            async for item in self.source:
                await self._queue.put(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the reader, raised there
            await self._queue.put(_Failed(exc))
            return
        finally:
            closer = getattr(self.source, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()
        await self._queue.put(_END)

    async def get(self, timeout: float | None = None) -> T:
        """The next item; StopAsyncIteration at the end, TimeoutError if none came within `timeout`
        (the source goes on), or the exception the source raised."""
        if self._done:
            raise StopAsyncIteration
        if self._queue.empty() and timeout is not None:
            async with asyncio.timeout(timeout):
                item = await self._queue.get()
        else:
            item = await self._queue.get()
        if item is _END:
            self._done = True
            raise StopAsyncIteration
        if isinstance(item, _Failed):
            self._done = True
            raise item.error
        return item

    async def aclose(self) -> None:
        """Stop the source (its task is canceled and the source closed)."""
        self._done = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


__all__ = ["Pump"]
