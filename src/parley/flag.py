"""Flag: a one-way asyncio.Event (set once, never cleared) that allocates nothing until someone waits.

An asyncio.Event makes an empty collections.deque for its waiters when it is created: about 700 bytes each, and
every run of the engine had two (issue 25, memory per open stream). A Flag holds a boolean and, only while a
coroutine waits on it, one future that every waiter shares.
"""

from __future__ import annotations

import asyncio


class Flag:
    """`is_set`, `set` and `wait` as asyncio.Event has them, without `clear`."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        """Whether `set` was called."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        self._set = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> bool:
        """Return True once the flag is set (at once if it is). A waiter cancelled leaves the others waiting."""
        if self._set:
            return True
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._waiter)
        return True
